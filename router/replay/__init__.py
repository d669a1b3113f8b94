"""`router replay` and `router diff`: Pi's session files and the decision log read back, events
rebuilt and evaluated offline, costs estimated (docs/replay.md).
"""
