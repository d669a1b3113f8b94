"""diagnostics: see docs/architecture.md."""
