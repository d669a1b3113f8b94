"""`router lint`'s checks over a compiled policy beyond compile errors (`checks`, `readability`).
"""
