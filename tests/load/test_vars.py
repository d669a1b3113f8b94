"""router.compile.vars: environment-bound variables parsed the way the seeds parse them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.compile.vars import parse_env_value, resolve_vars
from router.load.model import EnvVar
from tests.helpers import compile_ok, decide, texts


def spec(kind: str, default: Any = None, **bounds: float) -> EnvVar:
    return EnvVar(env="X", type=kind, default=default, **bounds)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", False),
        ("false", False),
        ("FALSE", False),
        (" off ", False),
        ("No", False),
        ("", True),
        ("1", True),
        ("yes", True),
        ("anything", True),
        ("nope", True),
    ],
)
def test_parse_env_bool_off_words_else_on(raw: str, expected: bool) -> None:
    assert parse_env_value(spec("bool", default=True), raw) is expected


def test_parse_env_unset_gives_default() -> None:
    for kind in ("bool", "number", "int", "string", "list"):
        assert parse_env_value(spec(kind, default="D"), None) == "D"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("90.5", 90.5),
        ("95", 95),
        (" 42 ", 42),
        ("", 0),
        ("   ", 0),
        ("1e1", 10),
        ("+5", 5),
        (".5", 0.5),
        ("0", 0),
        ("100", 100),
        ("abc", 95),
        ("inf", 95),
        ("-inf", 95),
        ("Infinity", 95),
        ("NaN", 95),
        ("100.01", 95),
        ("-1", 95),
        ("90%", 95),
    ],
)
def test_parse_env_number_js_number_rules_within_bounds(raw: str, expected: float) -> None:
    value = parse_env_value(spec("number", default=95, min=0, max=100), raw)
    assert value == expected and type(value) is type(expected)


def test_parse_env_number_hex_like_javascript() -> None:
    assert parse_env_value(spec("number", default=95, min=0, max=100), "0x10") == 16


def test_parse_env_number_underscore_is_not_a_number() -> None:
    assert parse_env_value(spec("number", default=95, min=0, max=100), "5_0") == 95


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("45000", 45000),
        (" 200 ", 200),
        ("+7", 7),
        ("1.5", 45000),
        ("", 45000),
        ("abc", 45000),
        ("0", 45000),
        ("-3", 45000),
        ("1e3", 45000),
    ],
)
def test_parse_env_int_positive_digits_only(raw: str, expected: int) -> None:
    assert parse_env_value(spec("int", default=45000, min=1), raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [("", "dflt"), ("x", "x"), (" spaced ", " spaced ")])
def test_parse_env_string_empty_means_unset(raw: str, expected: str) -> None:
    assert parse_env_value(spec("string", default="dflt"), raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a, b,,c ", ["a", "b", "c"]),
        ("", []),
        ("single", ["single"]),
        (" , ", []),
    ],
)
def test_parse_env_list_comma_separated_trimmed(raw: str, expected: list[str]) -> None:
    assert parse_env_value(spec("list", default=["d"]), raw) == expected


def test_parse_env_min_max_fall_back_to_default() -> None:
    bounded = spec("number", default=3, min=1, max=5)
    assert [parse_env_value(bounded, raw) for raw in ("0.99", "1", "5", "5.01")] == [3, 1, 5, 3]


def test_resolve_vars_literals_plus_environment() -> None:
    resolved = resolve_vars({"a": 1}, {"b": EnvVar(env="B", type="int", default=2)}, {"B": "9"})
    assert resolved == {"a": 1, "b": 9}


POLICY = """
env: [PLAIN]
vars:
  percent: {env: ROUTER_PERCENT, type: number, default: 95, min: 0, max: 100}
  enabled: {env: ROUTER_ENABLED, type: bool, default: true}
rules:
  - id: show
    on: input
    when: "vars.enabled"
    do: [{notify: "{vars.percent}"}]
"""


def test_env_vars_resolved_from_event_env(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    assert texts(decide(policy, {"type": "input"})) == [95]
    assert texts(decide(policy, {"type": "input", "env": {"ROUTER_PERCENT": "90.5"}})) == [90.5]
    assert texts(decide(policy, {"type": "input", "env": {"ROUTER_PERCENT": ""}})) == [0]
    assert decide(policy, {"type": "input", "env": {"ROUTER_ENABLED": "off"}}).fired == ()


def test_env_names_include_declared_and_var_bound(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    assert policy.env_names == {"PLAIN", "ROUTER_PERCENT", "ROUTER_ENABLED"}


def test_vars_for_memoized_per_env_and_not_shared_mutably(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    first = policy.vars_for({"ROUTER_PERCENT": "10", "UNRELATED": "1"})
    second = policy.vars_for({"ROUTER_PERCENT": "10", "UNRELATED": "2"})
    assert first == second == {"percent": 10, "enabled": True}
