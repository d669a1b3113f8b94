"""Credentials out of URLs: every message, excerpt and log line that may quote a git source's
URL shows it through these (a token in a URL never reaches a terminal, a CI log or a file)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def redact(url: str) -> str:
    """The URL without credentials: `https://***@host/…` for a token, ssh keeps the user name."""
    parts = urlsplit(url)
    if not parts.netloc or "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}@" if parts.scheme == "ssh" and not colon else "***@"
    return url.replace(parts.netloc, shown + hostport, 1)


def redact_text(text: str) -> str:
    """`text` with the credentials of every URL in it replaced."""
    return re.sub(r"[a-z+]+://[^\s'\"]+", lambda m: redact(m.group(0)), text, flags=re.IGNORECASE)
