"""JMESPath `match`: parsed once with the shared helper functions (`query`), compiled to closures
(`compiler`).
"""
