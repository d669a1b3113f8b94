"""lang: see docs/architecture.md."""
