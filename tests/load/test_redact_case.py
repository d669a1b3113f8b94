"""URL schemes are case-insensitive (`HTTPS://` parses as https): their credentials are redacted
in any text too."""

from __future__ import annotations

from router.load.git_spec import redact_text


def test_an_upper_case_scheme_is_redacted_in_text() -> None:
    text = "use 'git+HTTPS://alice:ghp_SECRET123@example.com/x.git@v1#p.yaml' refused"
    shown = redact_text(text)
    assert "ghp_SECRET123" not in shown
    assert "example.com/x.git@v1#p.yaml" in shown
