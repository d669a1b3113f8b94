"""One decision-log record: `build_record` turns an evaluated event into the JSON record
(pure; docs/observability.md has the format), with the digests that name the event and the
policy, and text shown only as the user's settings allow (router/runtime/log_privacy.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.compile.ir import CompiledPolicy, CompiledRule
from router.diagnostics.code_names import BUDGET_EXCEEDED
from router.engine.choices import answering_model, chosen_model, chosen_tier
from router.engine.decision import Decision, Effect
from router.load.prices import Catalog, Tokens
from router.runtime.filelock import read_text
from router.runtime.log_privacy import Stubber, event_names, literals_of

if TYPE_CHECKING:
    from router.runtime.decision_log import LogSettings

VERSION = 2  # 2: text not known to be safe is stubbed (router/runtime/log_privacy.py)


SIGNAL_VALUE_LIMIT = 4096  # bytes of JSON: a larger signal value is left out (marked `truncated`)


TEXT_SIGNALS = frozenset({"complete", "child"})  # signals whose value is model-written text


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8", "backslashreplace")).hexdigest()


def catalog_digest(models: Any) -> str:
    """The SHA-256 of a model catalog's canonical JSON (it stands in for the catalog in the
    event digest, so a sidecar hashes its catalog once, not once per event)."""
    return _sha256(models)


def event_digest(event: Mapping[str, Any], models_digest: str | None = None) -> str:
    """`sha256:` of the event as canonical JSON, its model catalog (`models`, when not empty)
    replaced by `catalog_digest` of it (`models_digest` when the caller has it already)."""
    models = event.get("models")
    if not models:
        return "sha256:" + _sha256(event)
    return "sha256:" + _sha256({**event, "models": models_digest or catalog_digest(models)})


def policy_digest(policy: CompiledPolicy) -> str:
    """The content hash of the policy in force: every file it was built from, by absolute path
    and bytes (not the path as shown, which depends on the working directory of whoever loaded it,
    so `router replay` anywhere gets the sidecar's digest for the same files)."""
    digest = hashlib.sha256()
    for source in sorted(source for _, source in policy.file_refs):
        digest.update(source.encode("utf-8", "surrogateescape") + b"\0")
        try:  # a regular file only: a FIFO planted as the policy must not block the sidecar
            digest.update(read_text(Path(source)).encode("utf-8", "surrogateescape"))
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()


def now_iso(moment: datetime | None = None) -> str:
    """UTC with milliseconds: `2026-12-01T11:00:00.123Z`."""
    return (moment or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def evaluated_rules(rules: Sequence[CompiledRule], decision: Decision) -> list[CompiledRule]:
    """The rules the interpreter evaluated: those of the event type, less the ones skipped because
    their group was decided, and those after a rule that ran out of budget (RT404)."""
    stopped = next((e.rule_id for e in decision.errors if e.code == BUDGET_EXCEEDED), None)
    if not decision.fired and stopped is None:
        return list(rules)  # nothing fired, nothing stopped: every rule of the type was evaluated
    fired = set(decision.fired)
    decided: set[str] = set()
    evaluated = []
    for rule in rules:
        if rule.group in decided:
            continue
        evaluated.append(rule)
        if rule.id == stopped:
            break
        if rule.id in fired and not rule.shadow and not rule.continue_:
            decided.add(rule.group)
    return evaluated


def rule_origin(rule: CompiledRule) -> str:
    """Where the rule is defined: the compiled `origin` when there is one, else `file:line`."""
    origin = getattr(rule, "origin", None)
    if isinstance(origin, str) and origin:
        return origin
    return f"{rule.span.path or rule.file}:{rule.span.line}"


def action_dict(effect: Effect) -> dict[str, Any]:
    return {"action": effect.action, "params": effect.params, "rule": effect.rule_id}


def agrees(would: Sequence[Mapping[str, Any]], applied: Sequence[Mapping[str, Any]]) -> bool:
    """A shadow rule agrees when, for every action it would take, what was applied holds the same
    action with the same parameters (ignoring which rule asked for it)."""
    done = [(a.get("action"), canonical(a.get("params"))) for a in applied]
    return all((w.get("action"), canonical(w.get("params"))) in done for w in would)


def turn_price(event: Mapping[str, Any], policy: CompiledPolicy, prices: Catalog | None = None
               ) -> tuple[float | None, str | None]:
    """What the event's turn cost and where its price comes from, priced as `router replay` prices
    it (router/load/prices.py: the policy's `provides.prices`, a local model, the registry's
    price); (None, None) for an event without a usage, or a model that should have a price and has
    none (Pi's own figure is not taken: it is the registry's price, or 0 for a model without one).
    `prices`: the catalog of the event's models, which a caller keeps per catalog and policy."""
    tokens = event_tokens(event)
    if tokens is None:
        return None, None
    catalog = prices if prices is not None else Catalog.of_event(event.get("models"), policy.prices)
    return catalog.priced(answering_model(event), Tokens(**tokens))


def event_tokens(event: Mapping[str, Any]) -> dict[str, int] | None:
    """The tokens of the turn's answer (`turn_end`), what a report prices on another model."""
    usage = event.get("message_usage")
    if not isinstance(usage, Mapping):
        return None
    return {key: value for key in ("input", "output", "cache_read", "cache_write")
            if isinstance(value := usage.get(key), int) and not isinstance(value, bool)}


def prompt_text(event: Mapping[str, Any]) -> str | None:
    """The user's prompt the event carries, if any (recorded only when the user opts in)."""
    for key in ("text", "prompt", "last_user_text"):
        value = event.get(key)
        if isinstance(value, str) and value and event.get("type") != "tool_result":
            return value
    return None


def scrub(value: Any, secrets: Mapping[str, str]) -> Any:
    """`value` with the environment values the policy reads replaced by `<$NAME>` (for the text a
    user opted in to keep: the rest is stubbed whole)."""
    if isinstance(value, str):
        for name, secret in secrets.items():
            if len(secret) >= 4 and secret in value:
                value = value.replace(secret, f"<${name}>")
        return value
    if isinstance(value, Mapping):
        return {str(k): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value


@dataclass(frozen=True)
class Shown:
    """How one record shows text: kept (with env values replaced) where the user opted in, else
    stubbed (router/runtime/log_privacy.py)."""

    stubber: Stubber
    keep: frozenset[str]
    secrets: Mapping[str, str]

    def action(self, effect: Effect) -> dict[str, Any]:
        params = (scrub(effect.params, self.secrets) if "actions" in self.keep
                  else self.stubber.params(effect.action, effect.params))
        return {"action": effect.action, "params": params, "rule": effect.rule_id}

    def signal(self, value: Any) -> Any:
        return scrub(value, self.secrets) if "signals" in self.keep else self.stubber.value(value)

    def error(self, text: str) -> str:
        return scrub(text, self.secrets) if "errors" in self.keep else self.stubber.error(text)

    def name(self, text: str) -> str:
        """A model ref or a tier: kept when known to be safe (or opted in with the actions)."""
        return scrub(text, self.secrets) if "actions" in self.keep else self.stubber.text(text)


def signal_entries(policy: CompiledPolicy, decision: Decision, shown: Shown) -> dict[str, Any]:
    """The external signals the decision used: value, source (live, fallback, error), error text."""
    entries: dict[str, Any] = {}
    for name, value in decision.signals.items():
        spec = policy.signals.get(name)
        if spec is None or not spec.external:
            continue
        error = decision.signal_errors.get(name)
        entry: dict[str, Any] = {"source": "live" if error is None else
                                 ("fallback" if spec.fallback is not None else "error")}
        if error is not None:
            entry["error"] = shown.error(error)
        if spec.kind in TEXT_SIGNALS and "signals" not in shown.keep and error is None \
                and isinstance(value, str):
            entry.update(value=None, redacted=True)  # a model's answer: not even its digest
            entries[name] = entry
            continue
        value_shown = shown.signal(value)
        if value_shown != value:
            entry["redacted"] = True  # a replay does not take a stubbed value for the real one
        size = len(canonical(value_shown).encode())
        entry.update({"value": value_shown} if size <= SIGNAL_VALUE_LIMIT else
                     {"value": None, "truncated": True, "bytes": size})
        entries[name] = entry
    return entries


def build_record(*, policy: CompiledPolicy, event: Mapping[str, Any], decision: Decision,
                 session: str, seq: int, latency_ms: float, policy_hash: str,
                 settings: LogSettings, secrets: Mapping[str, str], refused: frozenset[str] = frozenset(),
                 moment: datetime | None = None, models_digest: str | None = None,
                 has_shadow: bool | None = None, key: bytes = b"",
                 literals: frozenset[str] | None = None,
                 project: Mapping[str, str | None] | None = None, prices: Catalog | None = None
                 ) -> dict[str, Any]:
    """The decision-log record of one evaluated event (docs/observability.md); `refused`: rules
    the executor did not carry out (a confined path out of bounds), not `fired`, no actions.
    `models_digest`, `has_shadow` (whether the event type has shadow rules) and `literals` (of
    `literals_of(policy)`) are what a caller that keeps them per catalog and policy passes, so they
    are not computed per event; `key` is the digest key of the stubs of text; `project` the
    session's `{name, digest}` (router.load.paths.project_identity); `prices` the catalog a turn
    is priced with (`turn_price`)."""
    event_type = str(event.get("type") or decision.event_type)
    models = event.get("models")
    stubber = Stubber(key, literals_of(policy) if literals is None else literals, event_names(event),
                      models if isinstance(models, Mapping) else {})
    shown = Shown(stubber, settings.kept, secrets)
    fired = set(decision.fired) - refused
    evaluated = evaluated_rules(policy.by_event.get(event_type, ()), decision)
    listed = fired | refused  # and the shadow rules evaluated (`router shadow-report` counts them)
    if has_shadow is None:
        has_shadow = any(r.shadow for r in evaluated)
    rules = [{"id": r.id, "origin": rule_origin(r), "fired": r.id in fired and not r.shadow}
             for r in evaluated if r.shadow or r.id in listed] if listed or has_shadow else []
    applied = [e for e in decision.effects if e.rule_id not in refused]
    shadow = _shadow_entries(decision, applied, evaluated if fired and has_shadow else [], fired, shown)
    model = chosen_model(event, decision.effects)
    record: dict[str, Any] = {
        "v": VERSION, "time": now_iso(moment), "session": session,
        **({"project": dict(project)} if project is not None else {}), "event": event_type, "seq": seq,
        "event_digest": event_digest(event, models_digest), "policy": policy_hash, "rules": rules,
        "evaluated": len(evaluated), "actions": [shown.action(e) for e in applied],
        "signals": signal_entries(policy, decision, shown),
        "latency_ms": round(latency_ms, 3), "shadow": shadow,
        "model": shown.name(model) if model is not None else None,
    }
    tier = chosen_tier(decision.effects, policy.model_choice)
    cost, source = turn_price(event, policy, prices)
    if tier is not None:
        record["tier"] = shown.name(tier)
    if cost is not None:
        record.update(cost=cost, price_source=source)
    tokens = event_tokens(event)
    if tokens:
        record["tokens"] = tokens
    if refused:
        record["refused"] = sorted(refused)
    if decision.errors:
        record["errors"] = [shown.error(f"{e.code} {e.message}") for e in decision.errors]
    text = prompt_text(event) if "prompt" in settings.kept else None
    if text is not None:
        record["text"] = scrub(text, secrets)
    return record


def _shadow_entries(decision: Decision, applied: list[Effect], fired_shadow_candidates: list[CompiledRule],
                    fired: set[str], shown: Shown) -> list[dict[str, Any]]:
    """What each shadow rule would have done, and whether that agrees with what was applied; a
    shadow rule that fired without an action is listed with none."""
    raw_applied = [action_dict(e) for e in applied]
    shadow = []
    for rule_id in dict.fromkeys(e.rule_id for e in decision.shadowed):
        would = [e for e in decision.shadowed if e.rule_id == rule_id]
        shadow.append({"id": rule_id, "would": [shown.action(e) for e in would],
                       "agrees": agrees([action_dict(e) for e in would], raw_applied)})
    for rule in fired_shadow_candidates:
        if rule.shadow and rule.id in fired and all(s["id"] != rule.id for s in shadow):
            shadow.append({"id": rule.id, "would": [], "agrees": True})
    return shadow
