"""RT335: a key `provides:` replaced, still written at the top level (it loads; lint says where)."""

from __future__ import annotations

from collections.abc import Iterator

from router.compile.compiled import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.lint import check
from router.load.model import LEGACY_PROVIDES


def fix_text(key: str) -> str:
    """What to write instead of the top-level `key:`."""
    sub = LEGACY_PROVIDES[key]
    renamed = f" renamed `{sub}:`" if sub != key else ""
    return (f"move `{key}:` and its value under the file's one `provides:` key,{renamed} indented two "
            f"spaces: `provides:` then `  {sub}: …` (a file with `provides:` already adds it there)")


@check("RT335")
def moved_keys(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Each top-level key of a file that belongs under `provides:`."""
    for f in policy.files:
        for key in f.policy.legacy_keys():
            yield Diagnostic("RT335", f"`{key}:` belongs under `provides:` (as provides."
                             f"{LEGACY_PROVIDES[key]}); the top-level key still loads",
                             f.doc.span((key,), key=True), Severity.WARNING, help=fix_text(key))
