"""query: see docs/architecture.md."""
