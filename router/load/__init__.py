"""Files to `PolicyFile`s: YAML with positions and limits (`source`), the pydantic model of a
policy file (`model`, `validation`), layers and `use:` (`loader`, `paths`), git sources with
`router.lock` (`git_source`), the managed layer (`managed`), installed packs (`installed_packs`),
event documents people write (`event_documents`).
"""
