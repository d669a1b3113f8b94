"""Pi's events as the rules see them: the catalogue of event types and fields (`catalog`,
docs/events.md), Pi's payloads mapped to it (`normalize`), the field tree load-time checks use
(`fields`), the one question model (`questions`).
"""
