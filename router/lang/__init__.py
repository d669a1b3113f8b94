"""The two rule languages and what they share: safe `when` expressions and `{…}` templates
(`expr/`), JMESPath `match` (`query/`), the helper functions both call (`functions/`), the
per-event evaluation budget (`budget`), strict JSON values (`jsonout`). Imports only diagnostics.
"""
