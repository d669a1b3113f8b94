"""load: see docs/architecture.md."""
