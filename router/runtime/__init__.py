"""The sidecar: the JSON-lines server (`server`, `protocol`), the executor, the only place with
side effects (`executor`, `filelock`), the policy a session runs (`session_policy`), `/policy`
(`policy_command`) and the trust review both it and `router trust` show (`trust_review`).
"""
