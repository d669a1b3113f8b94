"""`router test`: policy tests and inline examples run through the interpreter (`runner`).
"""
