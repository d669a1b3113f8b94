"""`router packs`: the packs `use:` can name, and where each comes from."""

from __future__ import annotations

import json

from router.load.installed_packs import installed_packs
from router.load.paths import display_path, pack_names, packs_dir


def rows() -> list[dict[str, str | None]]:
    """Built-in packs first, then those of installed distributions (a name taken is shadowed)."""
    builtin = pack_names()
    found: list[dict[str, str | None]] = [
        {"name": name, "source": "built-in", "path": display_path(packs_dir() / f"{name}.yaml"),
         "problem": None} for name in builtin]
    taken = set(builtin)
    for pack in installed_packs():
        problem = pack.problem
        if problem is None and pack.name in taken:
            problem = "shadowed by the pack of the same name listed above"
        taken.add(pack.name)
        source = f"distribution {pack.distribution} {pack.version} ({pack.value})"
        found.append({"name": pack.name, "source": source,
                      "path": display_path(pack.path) if pack.path else None, "problem": problem})
    return found


def run(*, fmt: str = "text") -> tuple[int, str]:
    listing = rows()
    if fmt == "json":
        return 0, json.dumps({"packs": listing}, indent=2, ensure_ascii=False)
    width = max(len(str(r["name"])) for r in listing)
    lines = []
    for row in listing:
        where = f"  {row['path']}" if row["path"] else ""
        problem = f"  (not usable: {row['problem']})" if row["problem"] else ""
        lines.append(f"{str(row['name']).ljust(width)}  {row['source']}{where}{problem}")
    return 0, "\n".join(lines)
