"""The pure interpreter: ordered rules of one event type, groups, signals that suspend evaluation
(`interpreter`, `scope`), the decision it returns (`decision`), traces (`trace`), resolved vars
remembered per environment (`vars_memo`). No I/O.
"""
