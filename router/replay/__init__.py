"""Offline replay of recorded Pi sessions through a policy (`router replay`, `router diff`).

`session_file` reads Pi's session JSONL, `log_reader` the decision log, `rebuild` turns a
session's entries into the events Pi fired, `runner` evaluates them with the interpreter,
`summary` aggregates, `prices` estimates costs, `diff` compares two runs, `render` prints.
"""
