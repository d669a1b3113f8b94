"""expr: see docs/architecture.md."""
