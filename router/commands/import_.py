"""`router import`: a pack's JSON settings file becomes vars of the YAML policy (router.yaml).

What moves is the pack's `provides.import:` declaration (which file, which var or vars); cuttle's moves
pi-cuttle.json into `vars: {cuttle: …}`. The JSON keeps working as it is (the pack reads it);
importing writes the vars next to `use: [<pack>]`, keeping the file's comments.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from router.diagnostics.suggest import closest
from router.load.loader import load_layers
from router.load.paths import pack_names, packs_dir
from router.runtime.filelock import json_kind


@dataclass(frozen=True)
class ImportSpec:
    """One pack's `provides.import:`: its settings file and where the values go."""

    pack: str
    file: str
    var: str | None = None
    keys: dict[str, str] | None = None
    known: dict[str, Any] | None = None   # the file's keys, from the pack's `known` var

    def problem(self, config: dict[str, Any]) -> str | None:
        """Why `config` is not this pack's settings file (an unknown key, an object expected), or None."""
        if self.known is None:
            return None
        expected = sorted(self.known)
        unknown = [key for key in config if key not in self.known and key != "$schema"]
        if unknown:
            hints = [f"{key!r}" + (f" (did you mean {c!r}?)" if (c := closest(key, expected)) else "")
                     for key in unknown]
            return (f"not a {self.file} settings file: unknown key{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(hints)}; expected keys: {', '.join(expected)}")
        for key, value in config.items():
            if isinstance(self.known.get(key), dict) and not isinstance(value, dict):
                return f"{key!r} is {json.dumps(value)}, expected an object (as in {self.file})"
        return None

    def targets(self, config: dict[str, Any]) -> dict[str, Any]:
        """The vars the JSON object becomes (with `keys`, only the keys it has)."""
        if self.var is not None:
            return {self.var: config}
        return {var: config[key] for key, var in (self.keys or {}).items() if key in config}


def pack_imports() -> dict[str, ImportSpec]:
    """Every built-in pack that declares `provides.import:`, by name."""
    found = {}
    for name in pack_names():
        files, _ = load_layers([("pack", packs_dir() / f"{name}.yaml")])
        declared = files[0].policy.provides.import_ if files else None
        if declared is not None:
            known = files[0].policy.vars.get(declared.known) if declared.known else None
            found[name] = ImportSpec(name, declared.file, declared.var, declared.keys,
                                     known if isinstance(known, dict) else None)
    return found


def choose_import(pack: str | None, source: Path | None) -> ImportSpec | str:
    """The declaration to follow: the named pack's, the one whose file is `source`, or the only one."""
    specs = pack_imports()
    listed = ", ".join(sorted(specs)) or "none"
    if pack is not None:
        return specs.get(pack) or f"pack {pack!r} declares no import (packs that do: {listed})"
    matching = [s for s in specs.values() if source is not None and s.file == source.name]
    candidates = matching or list(specs.values())
    if len(candidates) == 1:
        return candidates[0]
    return f"several packs import settings ({listed}); choose one with --pack" if candidates else \
        "no built-in pack declares an import"


def import_cuttle(source: Path, target: Path, *, force: bool = False) -> tuple[int, str]:
    """The cuttle pack's import (pi-cuttle.json into vars.cuttle)."""
    spec = choose_import("cuttle", source)
    assert isinstance(spec, ImportSpec), spec
    return import_settings(spec, source, target, force=force)


def import_settings(spec: ImportSpec, source: Path, target: Path, *, force: bool = False) -> tuple[int, str]:
    """Merge the JSON settings into `target` (created when missing) as `spec` says."""
    try:
        config: Any = json.loads(source.read_text(encoding="utf-8-sig"))  # a BOM is harmless
    except FileNotFoundError:
        return 1, f"{source}: file not found"
    except json.JSONDecodeError as exc:
        return 1, f"{source}:{exc.lineno}:{exc.colno}: error: not valid JSON: {exc.msg}"
    if not isinstance(config, dict):
        return 1, f"{source}: expected a JSON object (the {spec.file} settings), not {json_kind(config)}"
    if problem := spec.problem(config):
        return 1, f"{source}: {problem}; nothing written"
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    document: Any = CommentedMap([("version", 1)])
    if target.is_file():
        loaded = yaml.load(target.read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            return 1, f"{target}: the policy is not a mapping; not touching it"
        document = loaded if loaded is not None else document
    variables = document.get("vars")
    if not isinstance(variables, dict):
        variables = CommentedMap()
        document["vars"] = variables
    values = spec.targets(config)
    taken = [name for name in values if name in variables]
    if taken and not force:
        return 1, f"{target} already has {', '.join('vars.' + n for n in taken)}; use --force to replace it"
    variables.update(values)
    uses = document.get("use") or []
    uses = [uses] if isinstance(uses, str) else list(uses)
    if spec.pack not in uses:
        document["use"] = [*uses, spec.pack]
    out = io.StringIO()
    yaml.dump(document, out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(out.getvalue(), encoding="utf-8")
    written = ", ".join(f"vars.{n}" for n in values) or "no vars"
    return 0, (f"imported {source} into {target} ({written}, use: {spec.pack})\n"
               "the JSON file still works; remove it once you edit the YAML instead\n"
               f"next: router lint {target}")
