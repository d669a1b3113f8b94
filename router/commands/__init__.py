"""The command line: one module per command (`lint`, `explain`, `test`, `replay`, …); `cli` parses
and renders, `entry` is the console script (it starts `router serve` without the CLI's libraries).
"""
