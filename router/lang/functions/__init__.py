"""Helper functions shared by both languages (JMESPath `match` and `when` expressions).

Each entry is registered with `@function` into `FUNCTIONS` (registry.py), declares its arity and
carries a runnable example (docs/reference/functions.md is generated from these; a test runs
every example). Importing this package registers every helper.
"""

from __future__ import annotations

from router.lang.functions import containers, library, models, numbers, patterns, text
from router.lang.functions.models import THINKING_LEVELS, cap_level
from router.lang.functions.registry import (
           FUNCTIONS,
           MAX_TEXT,
           NOT_LITERAL,
           Function,
           function_names,
           type_name,
)

__all__ = ["FUNCTIONS", "MAX_TEXT", "NOT_LITERAL", "THINKING_LEVELS", "Function", "cap_level",
           "containers", "function_names", "library", "models", "numbers", "patterns", "text", "type_name"]
