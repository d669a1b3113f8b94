"""Find and read the policy layers: built-in packs, the user's file, the project's file, `use:`.

Order of evaluation: for every file, the files it `use:`s come first (depth first, each file at
most once), then its own rules. The layers are the built-in `default` pack, then
`$PI_CODING_AGENT_DIR/router.yaml` (default `~/.pi/agent/router.yaml`), then `.pi/router.yaml`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from router.diagnostics import Diagnostic, Span
from router.errors import SourceError
from router.model import Policy
from router.paths import agent_dir, display_path, layer_paths, pack_names, packs_dir
from router.source import SourceDoc, read_source
from router.validation import validation_diagnostics

__all__ = ["MAX_RULES", "PolicyFile", "agent_dir", "layer_paths", "load_layers", "pack_names", "packs_dir"]

MAX_RULES = 5_000  # compiled in 1.3 s here (3.5 s on a busy machine); more rules fail fast instead


@dataclass(frozen=True)
class PolicyFile:
    """One loaded policy file with its source positions."""

    path: str
    doc: SourceDoc
    policy: Policy
    layer: str
    group: str
    source: Path | None = None


def load_layers(layers: Iterable[tuple[str, Path]]) -> tuple[list[PolicyFile], list[Diagnostic]]:
    """Load each layer and what it uses; return files in evaluation order plus diagnostics."""
    loader = _Loader()
    for layer, path in layers:
        loader.load(path, layer, via=None)
    return loader.files, loader.diagnostics


class _Loader:
    def __init__(self) -> None:
        self.files: list[PolicyFile] = []
        self.diagnostics: list[Diagnostic] = []
        self._done: set[Path] = set()
        self._active: list[Path] = []

    def load(self, path: Path, layer: str, via: Span | None) -> None:
        resolved = path.resolve()
        if resolved in self._active:
            chain = " -> ".join(p.name for p in [*self._active, resolved])
            self.diagnostics.append(Diagnostic("RT121", f"`use:` cycle: {chain}", via,
                                               help="remove one of the `use:` entries"))
            return
        if resolved in self._done:
            return
        try:
            doc = read_source(path, display=display_path(path))
        except SourceError as exc:
            self.diagnostics.extend(d.at(d.span or via) for d in exc.diagnostics)
            return
        policy = self._validate(doc)
        if policy is None:
            return
        self._active.append(resolved)
        for index, entry in enumerate(policy.use):
            span = doc.span(("use", index))
            target = self._resolve_use(entry, path.parent, span)
            if target is not None:
                self.load(target, "pack" if target.parent == packs_dir() else layer, span)
        self._active.pop()
        self._done.add(resolved)
        group = policy.group or (path.stem if layer == "pack" else "main")
        self.files.append(PolicyFile(doc.path, doc, policy, layer, group, resolved))

    def _validate(self, doc: SourceDoc) -> Policy | None:
        if doc.data is None:
            return Policy.model_validate({})
        if not isinstance(doc.data, dict):
            self.diagnostics.append(Diagnostic("RT111", "a policy file must be a mapping at the top level",
                                               doc.span(())))
            return None
        rules = doc.data.get("rules")
        if isinstance(rules, list) and len(rules) > MAX_RULES:  # before validating thousands of rules
            self.diagnostics.append(too_many_rules(len(rules), doc.span(("rules",), key=True)))
            return None
        try:
            return Policy.model_validate(doc.data)
        except ValidationError as exc:
            self.diagnostics.extend(validation_diagnostics(exc, doc, Policy))
            return None

    def _resolve_use(self, entry: str, base: Path, span: Span) -> Path | None:
        if "/" in entry or entry.endswith((".yaml", ".yml")):
            target = (base / entry).expanduser()
            if target.is_file():
                return target
            self.diagnostics.append(Diagnostic("RT120", f"`use:` file not found: {entry}", span,
                                               help=f"paths are relative to {base}"))
            return None
        candidate = packs_dir() / f"{entry}.yaml"
        if candidate.is_file():
            return candidate
        from router.suggest import did_you_mean

        self.diagnostics.append(Diagnostic(
            "RT120", f"unknown pack '{entry}'; expected one of {', '.join(pack_names())}", span,
            help=did_you_mean(entry, pack_names()) or "use ./path.yaml for a file"))
        return None


def too_many_rules(count: int, span: Span | None) -> Diagnostic:
    """RT103 for a policy of more than MAX_RULES rules."""
    return Diagnostic("RT103", f"the policy has {count} rules; at most {MAX_RULES} are supported", span,
                      help="merge rules that differ only in data into one rule reading a var, or split "
                      "the work between policies")
