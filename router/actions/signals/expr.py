"""`expr`: an expression over the event, computed by the interpreter (the signal's `expr:` field)."""

from __future__ import annotations

from router.actions.signals import kind

KIND = kind("expr", "interpreter", "an expression over the event", 0)
