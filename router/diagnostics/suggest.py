"""Did-you-mean suggestions for unknown names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to `name`, if one is reasonably close."""
    options = list(candidates)
    matches = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if matches:
        return matches[0]
    lowered = {c.lower(): c for c in options}
    return lowered.get(name.lower())


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """`did you mean 'x'?` or None."""
    match = closest(name, candidates)
    return f"did you mean '{match}'?" if match else None
