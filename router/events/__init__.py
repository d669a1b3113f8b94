"""events: see docs/architecture.md."""
