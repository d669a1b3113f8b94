"""trust: see docs/architecture.md."""
