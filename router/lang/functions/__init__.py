"""functions: see docs/architecture.md."""
