"""What a layer may do and whether the project layer applies: capabilities and confinement of
paths (`capabilities`), the trust store keyed by content digests (`store`).
"""
