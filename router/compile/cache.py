"""A cache of compiled policies for `router serve`, so a sidecar starts without pydantic.

A policy that compiled cleanly is stored as plain data (expression sources, action parameters,
spans) keyed by the router version, the directories and the layers; each file's size and mtime
guard it. Loading it recompiles only the expressions (no YAML, no validation, no lint), which is
what makes the sidecar ready quickly. Any mismatch means a normal compile.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from router.compile.ir import (
    ClassifyQuestionSpec,
    CompiledAction,
    CompiledPolicy,
    CompiledRule,
    CompiledSignal,
)
from router.diagnostics.diagnostic import Span
from router.lang.expr.expression import Template, compile_expression, compile_template
from router.lang.expr.trees import map_leaves
from router.lang.query.query import compile_query
from router.trust.capabilities import CapabilityUse, Confinement, Refusal

FORMAT = 14


def cache_path(agent: Path, key: str) -> Path:
    return agent / "router" / "cache" / f"policy-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"


def cache_key(*parts: Any) -> str:
    from router import __version__
    return json.dumps([FORMAT, __version__, sys.version_info[:2], *[str(p) for p in parts]])


def stamp(path: Path) -> list[Any]:
    try:
        info = path.stat()
    except OSError:
        return [str(path), -1, -1]
    return [str(path), info.st_mtime_ns, info.st_size]


def load(path: Path, candidates: list[Path]) -> CompiledPolicy | None:
    """The cached policy, when every file it was built from is unchanged."""
    entry = load_entry(path, candidates)
    return entry[0] if entry is not None else None


def load_entry(path: Path, candidates: list[Path]) -> tuple[CompiledPolicy, dict[str, Any]] | None:
    """The cached policy and the metadata saved with it, when every file is unchanged."""
    data = _read(path)
    if data is None:
        return None
    wanted = {str(p) for p in candidates}
    recorded = {s[0] for s in data.get("stamps", [])}
    if not wanted <= recorded or any(stamp(Path(s[0])) != s for s in data["stamps"]):
        return None
    return _policy(data)


def load_last_good(path: Path) -> CompiledPolicy | None:
    """The cached policy whatever changed since: the last one that compiled for these layers."""
    data = _read(path)
    entry = None if data is None else _policy(data)
    return entry[0] if entry is not None else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _policy(data: dict[str, Any]) -> tuple[CompiledPolicy, dict[str, Any]] | None:
    try:
        meta = data.get("meta")
        return from_ir(data["policy"]), meta if isinstance(meta, dict) else {}
    except Exception:
        return None


def save(path: Path, policy: CompiledPolicy, candidates: list[Path], *,
         meta: dict[str, Any] | None = None) -> None:
    """Store the policy (best effort: a cache that cannot be written is skipped)."""
    import tempfile  # here: a sidecar's start does without it (~3 ms)

    files = {Path(source) for _, source in policy.file_refs} | set(candidates)
    body = {"format": FORMAT, "stamps": [stamp(p) for p in sorted(files)], "policy": to_ir(policy),
            "meta": meta or {}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".policy-")
        try:  # strict JSON: a policy holding .inf or .nan is not cached (null would change it)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(body, handle, allow_nan=False)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except (OSError, TypeError, ValueError, RecursionError):
        pass


# --- to and from plain data ------------------------------------------------------------------


def _sources(tree: Any) -> Any:
    return map_leaves(tree, lambda value: value.source if isinstance(value, Template) else value)


def _templates(tree: Any) -> Any:
    return map_leaves(tree, _template)


def _template(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    template = compile_template(value)
    return value if template.expression is None else template


def _span(span: Span | None) -> list[Any] | None:
    return None if span is None else [span.path, span.line, span.col]


def _unspan(data: list[Any] | None) -> Span | None:
    return None if data is None else Span(data[0], data[1], data[2])


def to_ir(policy: CompiledPolicy) -> dict[str, Any]:
    rules = [{
        "id": r.id, "index": r.index, "group": r.group, "on": list(r.on),
        "match": r.match.source if r.match else None, "when": r.when.source if r.when else None,
        "actions": [{"name": a.name, "params": _sources(a.params), "span": _span(a.span),
                     "confined": dict(a.confined), "defaulted": sorted(a.defaulted),
                     "refuses": a.refuses} for a in r.actions],
        "continue": r.continue_, "shadow": r.shadow, "span": _span(r.span), "file": r.file,
        "key_path": r.key_path, "description": r.description,
        "match_span": _span(r.match_span), "when_span": _span(r.when_span),
        "layer": r.layer, "sandboxed": r.sandboxed, "origin": r.origin, "locked": r.locked,
        "let": [[name, e.source] for name, e in r.bindings],
    } for r in policy.rules]
    signals = [{
        "name": s.name, "kind": s.kind, "span": _span(s.span), "expr": s.expr.source if s.expr else None,
        "request": _sources(s.request),
        "questions": [{"name": q.name, "type": q.type, "instructions": q.instructions,
                       "criteria": q.criteria, "when": q.when.source if q.when else None}
                      for q in s.questions],
        "transform": s.transform.source if s.transform else None,
        "fallback": s.fallback.source if s.fallback else None,
        "layer": s.layer, "sandboxed": s.sandboxed, "confined": dict(s.confined),
        "let": [[name, e.source] for name, e in s.bindings],
    } for s in policy.signals.values()]
    return {"rules": rules, "signals": signals, "vars": dict(policy.vars),
            "env_vars": {k: dict(v) for k, v in policy.env_vars.items()},
            "commands": list(policy.commands), "virtual_models": list(policy.virtual_models),
            "tools": list(policy.tools), "bus_events": list(policy.bus_events),
            "question_events": dict(policy.question_events), "model_choice": dict(policy.model_choice),
            "prices": {ref: dict(price) for ref, price in policy.prices.items()},
            "skills": list(policy.skills), "env_names": sorted(policy.env_names),
            "transient_state": sorted(policy.transient_state), "project_data": list(policy.project_data),
            "file_refs": [list(f) for f in policy.file_refs],
            "confinement": policy.confinement.to_dict() if policy.confinement else None,
            "refused": [r.to_dict() for r in policy.refused],
            "capabilities": [u.to_dict() for u in policy.capabilities],
            "decision_log": dict(policy.decision_log), "failure": dict(policy.failure)}


def _expr(source: str | None) -> Any:
    return compile_expression(source) if source is not None else None


def _rule(r: dict[str, Any]) -> CompiledRule:
    return CompiledRule(
        id=r["id"], index=r["index"], group=r["group"], on=tuple(r["on"]),
        match=compile_query(r["match"]) if r["match"] is not None else None, when=_expr(r["when"]),
        actions=tuple(CompiledAction(a["name"], _templates(a["params"]), _unspan(a["span"]) or Span(""),
                                     a["confined"], frozenset(a.get("defaulted", ())),
                                     a.get("refuses") is True)
                      for a in r["actions"]),
        continue_=r["continue"], shadow=r["shadow"], span=_unspan(r["span"]) or Span(""),
        file=r["file"], key_path=r["key_path"], description=r["description"],
        match_span=_unspan(r["match_span"]), when_span=_unspan(r["when_span"]),
        layer=r["layer"], sandboxed=r["sandboxed"], origin=r["origin"], locked=r["locked"],
        bindings=tuple((name, compile_expression(source)) for name, source in r["let"]),
    )


def _signal(s: dict[str, Any]) -> CompiledSignal:
    return CompiledSignal(
        s["name"], s["kind"], _unspan(s["span"]) or Span(""), expr=_expr(s["expr"]),
        request=_templates(s["request"]),
        questions=tuple(ClassifyQuestionSpec(q["name"], q["type"], q["instructions"], q["criteria"],
                                             _expr(q["when"])) for q in s["questions"]),
        transform=_expr(s["transform"]), fallback=_expr(s["fallback"]),
        layer=s["layer"], sandboxed=s["sandboxed"], confined=s["confined"],
        bindings=tuple((name, compile_expression(source)) for name, source in s["let"]),
    )


class _Lazy(Mapping[str, Any]):
    """A mapping whose values are compiled on first access (one event type or signal at a time)."""

    def __init__(self, raw: dict[str, Any], build: Callable[[Any], Any]) -> None:
        self._raw, self._build = raw, build
        self._done: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._done:
            self._done[key] = self._build(self._raw[key])
        return self._done[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._raw else default

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def built(self, key: str) -> bool:
        """Whether `key`'s value is compiled already (reading it costs nothing more)."""
        return key in self._done or key not in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class _LazyRules(Sequence[CompiledRule]):
    """Every rule in policy order, compiled on first access (lint, explain, `rule(id)`)."""

    def __init__(self, raw: list[dict[str, Any]], build: Callable[[dict[str, Any]], CompiledRule]) -> None:
        self._raw, self._build = raw, build

    @overload
    def __getitem__(self, index: int) -> CompiledRule: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[CompiledRule]: ...

    def __getitem__(self, index: int | slice) -> CompiledRule | Sequence[CompiledRule]:
        if isinstance(index, slice):
            return tuple(self._build(r) for r in self._raw[index])
        return self._build(self._raw[index])

    def __len__(self) -> int:
        return len(self._raw)


def compiled_for(policy: CompiledPolicy, event_type: str) -> bool:
    """Whether the rules of `event_type` are compiled (a policy from the cache compiles them on
    their first event: seconds for thousands of rules, which the sidecar announces first)."""
    lazy = policy.by_event
    return not isinstance(lazy, _Lazy) or lazy.built(event_type)


def from_ir(data: dict[str, Any]) -> CompiledPolicy:
    """The policy `to_ir` saved, the same as the compiler built it (without the source files):
    rules and signals compile lazily, per event type and per signal."""
    rules_by_event: dict[str, list[dict[str, Any]]] = {}
    for raw in data["rules"]:
        for event_type in raw["on"]:
            rules_by_event.setdefault(event_type, []).append(raw)
    compiled: dict[int, CompiledRule] = {}

    def build(raw: dict[str, Any]) -> CompiledRule:  # once, even for a rule on several events
        rule = compiled.get(raw["index"])
        if rule is None:
            rule = compiled[raw["index"]] = _rule(raw)
        return rule

    def build_rules(raws: list[dict[str, Any]]) -> tuple[CompiledRule, ...]:
        return tuple(build(r) for r in raws)

    return CompiledPolicy(
        rules=_LazyRules(data["rules"], build), by_event=_Lazy(rules_by_event, build_rules),
        vars=data["vars"], env_vars=data["env_vars"],
        signals=_Lazy({s["name"]: s for s in data["signals"]}, _signal),
        commands=tuple(data["commands"]), virtual_models=tuple(data["virtual_models"]),
        tools=tuple(data["tools"]), bus_events=tuple(data["bus_events"]),
        question_events=data["question_events"], model_choice=data["model_choice"],
        prices=data["prices"],
        skills=tuple(data["skills"]), env_names=frozenset(data["env_names"]),
        transient_state=frozenset(data["transient_state"]), project_data=tuple(data["project_data"]),
        file_refs=tuple(tuple(f) for f in data["file_refs"]),
        confinement=Confinement.from_dict(data["confinement"]) if data["confinement"] else None,
        refused=tuple(Refusal.from_dict(r) for r in data["refused"]),
        capabilities=tuple(CapabilityUse(**u) for u in data["capabilities"]),
        decision_log=data.get("decision_log") or {}, failure=data.get("failure") or {},
    )
