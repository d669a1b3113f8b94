"""Loaded files to the one immutable `CompiledPolicy` (`compiler`, `compiled`): layers merged,
every expression parsed once, capabilities analysed (`capability_analysis`), `let:`/`defaults:`
forms (`readable`), vars (`vars`); the cache is its serializer (`cache`).
"""
