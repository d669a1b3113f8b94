"""Helpers on the normalized question model of docs/events.md: options, scores, answers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from router.lang.functions.patterns import compile_regex, search
from router.lang.functions.registry import (
    bounded_text,
    fail,
    function,
    list_arg,
    number_arg,
    text_arg,
    type_name,
)

# --- questions and answers (the normalized question model of docs/events.md) ---------


@function("omit_nulls", min_args=1, max_args=1, example="omit_nulls({'a': 1, 'b': null}) == {'a': 1}")
def omit_nulls(value: Any) -> Any:
    """A copy of an object without its null-valued keys."""
    if not isinstance(value, Mapping):
        raise fail("omit_nulls", f"expected an object, got {type_name(value)}")
    return {k: v for k, v in value.items() if v is not None}


@function("join_values", min_args=1, max_args=2, example="join_values(['a', 'b']) == 'a, b'")
def join_values(value: Any, sep: Any = ", ") -> str:
    """An array's items joined with `sep` (default ', '); any other value as text."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        parts = [str(v) for v in value]
        separator = text_arg("join_values", sep)
        bounded_text("join_values", sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1))
        return separator.join(parts)
    return "" if value is None else str(value)


@function("argmax", min_args=1, max_args=1, example="argmax([1, 3, 3]) == 1")
def argmax(values: Any) -> int | None:
    """Index of the first largest number (null for an empty array)."""
    items = [number_arg("argmax", v) for v in list_arg("argmax", values)]
    return max(range(len(items)), key=lambda i: (items[i], -i)) if items else None


def _score(option: Mapping[str, Any], index: int, scorer: Mapping[str, Any]) -> float:
    if scorer.get("first"):
        return float(scorer.get("add", 0)) if index == 0 else 0.0
    pattern = compile_regex(str(scorer.get("pattern", "")), str(scorer.get("flags", "")))
    for field in scorer.get("fields") or ("label", "value", "description"):
        text = option.get(field)
        if isinstance(text, str) and search("pick_option", pattern,
                                            text.strip() if scorer.get("trim") else text):
            return float(scorer.get("add", 0))
    return 0.0


@function("pick_option", min_args=2, max_args=2,
          example="pick_option([{'value': 'a', 'label': 'A'}, {'value': 'b', 'label': 'B (Recommended)'}], "
                  "[{'pattern': 'recommended', 'flags': 'i', 'add': 100}]).value == 'b'")
def pick_option(options: Any, scorers: Any) -> Any:
    """The best-scoring option (ties go to the earlier one) with its `score` and `index`, or null.

    Each scorer adds `add` when its regex `pattern` (with `flags`) is found in one of `fields`
    (default label, value, description; `trim: true` trims the text first), or, with
    `first: true`, to the first option.
    """
    items = [o for o in list_arg("pick_option", options) if isinstance(o, Mapping)]
    if not items:
        return None
    rules = [s for s in list_arg("pick_option", scorers) if isinstance(s, Mapping)]
    scores = [sum(_score(o, i, s) for s in rules) for i, o in enumerate(items)]
    best = max(range(len(items)), key=lambda i: (scores[i], -i))
    return {**items[best], "score": scores[best], "index": best}


def _answer_values(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        return [raw.strip()] if raw.strip() else None
    if isinstance(raw, Sequence) and raw and all(isinstance(v, str) for v in raw):
        values = [v.strip() for v in raw if v.strip()]
        return values or None
    return None


def _accept(answer: Any, question: Mapping[str, Any], *, reason: str | None,
            confidence: float | None, source: str | None) -> dict[str, Any] | None:
    if not isinstance(answer, Mapping):
        return None
    raw = next((answer[k] for k in ("value", "answer", "selected") if answer.get(k) is not None), None)
    values = _answer_values(raw)
    if values is None:
        return None
    options = [o for o in question.get("options") or [] if isinstance(o, Mapping)]
    matched = [next((o for o in options if v in (o.get("value"), o.get("label"))), None) for v in values]
    multi = bool(question.get("multi_select"))
    if all(m is not None for m in matched):
        chosen = [m["value"] for m in matched if m is not None]
        labels = [m["label"] for m in matched if m is not None]
    elif question.get("allow_other", True):
        chosen, labels = values, values
    else:
        return None
    given = answer.get("confidence")
    finite = isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given)
    label = answer.get("label")
    text = answer.get("reason")
    return {
        "id": answer["id"] if isinstance(answer.get("id"), str) else question.get("id"),
        "value": chosen if multi else chosen[0],
        "label": label.strip() if isinstance(label, str) and label.strip() else ", ".join(labels),
        "reason": text.strip() if isinstance(text, str) and text.strip() else reason,
        "confidence": max(0.0, min(1.0, float(given))) if finite and given is not None else confidence,
        "source": source,
    }


@function("validate_answers", min_args=2, max_args=5,
          example="validate_answers({'answers': [{'value': 'MVP'}]}, "
                  "[{'id': 'q1', 'options': [{'value': 'mvp', 'label': 'MVP'}], 'allow_other': false}])"
                  ".q1.value == 'mvp'")
def validate_answers(parsed: Any, questions: Any, reason: Any = None, confidence: Any = None,
                     source: Any = None) -> dict[str, Any]:
    """Check a model's JSON answers against normalized questions; all or nothing.

    Answers are matched to questions by position (extra ones ignored); the value comes from
    `value`, `answer` or `selected` (a non-empty string or strings); each value must equal an
    option's value or label (a label becomes its value) unless the question allows other
    answers; confidence is clamped to [0, 1]. An answer without a reason gets `reason`, one
    without a finite confidence gets `confidence` (both null when not given); every answer's
    `source` is `source` (null when not given: the policy names who answered). The result maps
    each answer's id (the answer's own `id` when it is a string) to the answer. Fails when any
    answer is invalid.
    """
    if not isinstance(parsed, Mapping) or not isinstance(parsed.get("answers"), list):
        raise fail("validate_answers", "expected an object with an `answers` array")
    if reason is not None:
        reason = text_arg("validate_answers", reason)
    if confidence is not None:
        confidence = number_arg("validate_answers", confidence)
    if source is not None:
        source = text_arg("validate_answers", source)
    asked = [q for q in list_arg("validate_answers", questions) if isinstance(q, Mapping)]
    given = parsed["answers"]
    accepted = [_accept(given[i], q, reason=reason, confidence=confidence, source=source)
                if i < len(given) else None
                for i, q in enumerate(asked)]
    if any(a is None for a in accepted):
        raise fail("validate_answers", "incomplete or invalid JSON answers")
    return {a["id"]: a for a in accepted if a is not None}
