"""A diagnostic's source excerpt never shows the credentials of a URL the line holds (lint's text
output lands in CI logs)."""

from __future__ import annotations

from router.diagnostics.diagnostic import Diagnostic, Span, render_text


def test_the_excerpt_of_a_use_entry_with_a_token_is_redacted() -> None:
    line = "  - git+https://alice:ghp_SECRET123@example.com/x.git@v1#p.yaml"
    found = Diagnostic("RT125", "refused", Span(".pi/router.yaml", 2, 5))
    text = render_text([found], source_lines={".pi/router.yaml": ["use:", line]})
    assert "ghp_SECRET123" not in text
    assert "example.com/x.git@v1#p.yaml" in text
