"""`when` expressions and `{…}` templates: parsed once (`expression`), compiled to closures
(`compiler`), multi-line templates (`blocks`), local names on top of a scope (`layered`).
"""
