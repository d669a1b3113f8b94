"""Things that must stay impossible in expressions and templates.

Security regressions and features left out on purpose. Every test here names a way out of the
sandbox (Python internals, builtins, unbounded time or memory) and asserts it is refused at load
time or fails cleanly at evaluation time with an ExpressionError.
"""

from __future__ import annotations

from typing import Any

import pytest

from router.errors import ExpressionError
from router.expr import Evaluator, ExpressionSyntaxError, compile_template
from tests.helpers import fails, refused, run


@pytest.mark.parametrize(
    "source",
    [
        "x.__class__",
        "x.__class__.__mro__[1].__subclasses__()",
        "''.__class__",
        "(1).__class__",
        "x.__dict__",
        "x.__globals__",
        "lower.__globals__",
        "x.__init__.__globals__",
        "x._anything",
        "[c for c in x.__class__.__bases__]",
        "f'{x.__class__}'",
    ],
)
def test_dunder_and_private_attributes_refused_at_load(source: str) -> None:
    assert refused(source).code == "RT203"


@pytest.mark.parametrize(
    "source", ["__builtins__", "__import__('os')", "__class__", "__name__", "__loader__"]
)
def test_dunder_names_refused_at_load(source: str) -> None:
    assert refused(source).code == "RT203"


@pytest.mark.parametrize("source", ["import os", "from os import system", "exec('1')\nx", "del x", "x = 1"])
def test_statements_are_not_expressions(source: str) -> None:
    assert refused(source).code == "RT202"


@pytest.mark.parametrize(
    "name",
    [
        "open",
        "getattr",
        "setattr",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "type",
        "dir",
        "print",
        "input",
        "breakpoint",
        "help",
        "object",
        "str",
        "list",
        "dict",
        "len",
        "format",
    ],
)
def test_python_builtins_are_not_callable(name: str) -> None:
    error = fails(f"{name}('x')")
    assert error.code == "RT208" and name in error.message


@pytest.mark.parametrize("name", ["open", "getattr", "len", "list", "dict", "print", "Evaluator", "self"])
def test_python_builtins_are_not_names(name: str) -> None:
    assert run(name) is None


@pytest.mark.parametrize(
    "source",
    [
        "text.lower()",
        "text.format(x)",
        "'{0.__class__}'.format(x)",
        "text.encode()",
        "d.keys()",
        "d.get('a')",
        "items.append(1)",
        "lower(text).upper()",
        "(text).join([])",
    ],
)
def test_method_calls_refused_at_load(source: str) -> None:
    assert refused(source).code == "RT203"


@pytest.mark.parametrize(
    ("source", "scope"),
    [
        ("s.format", {"s": "x"}),
        ("s.upper", {"s": "x"}),
        ("items.append", {"items": []}),
        ("n.real", {"n": 1}),
    ],
)
def test_attribute_on_plain_value_never_yields_a_bound_method(source: str, scope: dict[str, Any]) -> None:
    assert fails(source, **scope).code == "RT401"


def test_attribute_on_object_reads_keys_not_attributes() -> None:
    assert run("d.keys", d={}) is None
    assert run("d.items", d={"items": 3}) == 3
    assert run("d['__class__']", d={}) is None


def test_subscript_string_key_on_string_refused_at_run_time() -> None:
    assert fails("s['__class__']", s="x").code == "RT401"


@pytest.mark.parametrize(
    "source",
    [
        "lambda: 1",
        "(lambda x: x)(1)",
        "(y := 1)",
        "(x for x in a)",
        "{x for x in a}",
        "lower(*a)",
        "lower(**a)",
        "(yield)",
        "lower(x=1)",
        "[*a]",
        "{1}",
        "a & b",
        "~a",
        "a << 64",
    ],
)
def test_left_out_constructs_refused_at_load(source: str) -> None:
    assert refused(source).code == "RT203"


@pytest.mark.parametrize(
    "source",
    [
        "{x:>99999999}",
        "{x:<10000}",
        "{x:.99999f}",
        "{x:0>12345}",
        "{x:{w}}",
        "{x:>{w}}",
        "{x!r:>9999}",
        "a{x:٩٩٩٩}b",
    ],
)
def test_format_spec_attacks_refused_at_load_rt204(source: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_template(source)
    assert info.value.code == "RT204"


def test_format_spec_attack_in_expression_fstring_refused() -> None:
    assert refused("f'{x:>99999999}'").code == "RT204"


def test_template_values_are_never_formatted_twice() -> None:
    evaluator = Evaluator({"t": "{__class__} {x:>99999999}", "x": 1})
    assert evaluator.render(compile_template("{t}")) == "{__class__} {x:>99999999}"
    assert evaluator.render(compile_template("a {t} b")) == "a {__class__} {x:>99999999} b"


@pytest.mark.parametrize(
    ("source", "scope"),
    [
        ("'x' * 10 ** 9", {}),
        ("[0] * 10 ** 9", {}),
        ("s * n", {"s": "ab", "n": 10**8}),
        ("10 ** 10 ** 10", {}),
        ("2 ** 100000", {}),
        ("(-9) ** 99999", {}),
        ("s + s", {"s": "x" * 60_000}),
        ("[1 for a in r for b in r for c in r for d in r]", {"r": list(range(20))}),
        ("[[1 for a in r] for b in r]", {"r": list(range(200))}),
    ],
)
def test_resource_limits_bound_time_and_memory_rt403(source: str, scope: dict[str, Any]) -> None:
    assert fails(source, **scope).code == "RT403"


def test_percent_formatting_width_bounded_rt403() -> None:
    assert fails("'%1000000s' % 'x'").code == "RT403"


def test_template_total_output_bounded_rt403() -> None:
    template = compile_template("".join("{x:>999}" for _ in range(200)))
    with pytest.raises(ExpressionError) as info:
        Evaluator({"x": 1}).render(template)
    assert info.value.code == "RT403"


def test_huge_int_to_text_fails_cleanly() -> None:
    with pytest.raises(ExpressionError):
        run("to_json(10 ** 4000 * 10 ** 4000)")


@pytest.mark.parametrize(
    "source",
    [
        "(" * 300 + "1" + ")" * 300,
        "-" * 5000 + "1",
        "not " * 3000 + "x",
        "1" + "+1" * 9000,
        "a" + ".b" * 5000,
        "x" + "[0]" * 3000,
    ],
)
def test_deep_nesting_refused_at_load_rt202(source: str) -> None:
    assert refused(source).code == "RT202"


def test_deep_conditional_nesting_refused_at_load_rt202() -> None:
    assert refused("a if b else " * 500 + "c").code == "RT202"


def test_moderate_nesting_compiles_and_runs() -> None:
    assert run("a if b else " * 200 + "c", b=False, c=7) == 7
    assert run("(" * 100 + "1" + ")" * 100) == 1


def test_scope_objects_expose_only_their_keys() -> None:
    class Sneaky(dict[str, Any]):
        secret = "attribute"

    assert run("o.secret", o=Sneaky(visible=1)) is None
    assert run("o.visible", o=Sneaky(visible=1)) == 1


def test_regex_literal_with_bad_pattern_never_reaches_run_time() -> None:
    assert refused("regex(text, '(?P<x')").code == "RT210"


def test_null_bytes_refused_at_load() -> None:
    assert refused("'a\x00b'").code == "RT202"
