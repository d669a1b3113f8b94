"""runtime: see docs/architecture.md."""
