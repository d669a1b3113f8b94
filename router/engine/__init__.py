"""engine: see docs/architecture.md."""
