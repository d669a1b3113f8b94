"""router.lang.functions: every helper, through both languages, with its edge cases."""

from __future__ import annotations

from typing import Any

import jmespath
import pytest

from router.lang.functions import FUNCTIONS
from router.lang.query.query import _OPTIONS, compile_query
from tests.helpers import fails, run

# JMESPath spellings of the examples of the functions JMESPath does not have natively.
JMESPATH_EXAMPLES = {
    "type_of": "type_of(`0.5`) == 'number'",
    "closest": "closest('threshhold', ['mode', 'threshold']) == 'threshold'",
    "key_paths": "key_paths({a: {b: `1`}, c: {d: `2`}}, ['c']) == ['a', 'a.b', 'c']",
    "range": "range(`3`) == [`0`, `1`, `2`]",
    "zip": "zip([`1`, `2`], ['a', 'b']) == [[`1`, 'a'], [`2`, 'b']]",
    "lower": "lower('DeepSeek-V4') == 'deepseek-v4'",
    "upper": "upper('ok') == 'OK'",
    "trim": "trim('  yes ') == 'yes'",
    "utf16_len": "utf16_len('a😀') == `3`",
    "tail": "tail('abcdef', `2`) == 'ef'",
    "head": "head('abcdef', `2`) == 'ab'",
    "split": "split('a,b', ',') == `[\"a\", \"b\"]`",
    "replace": "replace('a-b', '-', '+') == 'a+b'",
    "to_json": 'to_json(`{"a": 1}`) == \'{"a": 1}\'',
    "parse_json": "parse_json('{\"a\": 1}').a == `1`",
    "extract_json": "extract_json('Sure: {\"x\": 2} done').x == `2`",
    "regex": "regex('MVP (Recommended)', 'recommend', 'i')",
    "regex_find": "regex_find('p=0.86', '[0-9.]+') == '0.86'",
    "count_keywords": 'count_keywords(\'add a prefix to the debug tool\', `["fix", "debug"]`) == `2`',
    "clamp": "clamp(`1.7`, `0`, `1`) == `1`",
    "round": "round(`0.856`, `2`) == `0.86`",
    "get": "get(`{\"a\": 1}`, 'b', `0`) == `0`",
    "intersect": 'intersect(`["a", "b", "c"]`, `["c", "a"]`) == `["a", "c"]`',
    "without": 'without(`["a", "b"]`, `["b"]`) == `["a"]`',
    "expand_aliases": 'expand_aliases(`["read", "search"]`, `{"search": ["grep", "find"]}`, '
    '`["find", "read"]`) == `["read", "find"]`',
    "cap_level": "cap_level('medium', 'low') == 'low'",
    "map_score": 'map_score(`0.3`, `[{"score": 0.2, "level": "off"}, {"score": 0.4, "level": "low"}]`, '
    "'high') == 'low'",
    "pick_model": 'pick_model(`["a", "b"]`, \'smallest_fitting\', `{"a": {"context_window": 8000}, '
    '"b": {"context_window": 32000}}`, `0.2`) == \'a\'',
    "parse_value": "parse_value('0.6') == `0.6` && parse_value('on') == 'on'",
    "fixed": "fixed(`1`, `2`) == '1.00'",
    "deep_merge": 'deep_merge(`{"a": {"b": 1, "c": 2}}`, `{"a": {"c": 3}}`) == `{"a": {"b": 1, "c": 3}}`',
    "omit_nulls": 'omit_nulls(`{"a": 1, "b": null}`) == `{"a": 1}`',
    "join_values": 'join_values(`["a", "b"]`) == \'a, b\'',
    "argmax": "argmax(`[1, 3, 3]`) == `1`",
    "pick_option": 'pick_option(`[{"value": "a", "label": "A"}, {"value": "b", '
    '"label": "B (Recommended)"}]`, `[{"pattern": "recommended", "flags": "i", '
    "\"add\": 100}]`).value == 'b'",
    "validate_answers": 'validate_answers(`{"answers": [{"value": "MVP"}]}`, `[{"id": "q1", '
    '"options": [{"value": "mvp", "label": "MVP"}], "allow_other": false}]`)'
    ".q1.value == 'mvp'",
}

REACT = [
    "开发",
    "创建",
    "写一个",
    "生成",
    "从零",
    "做一个",
    "游戏",
    "网页",
    "网站",
    "构建",
    "新项目",
    "搭建",
    "实现",
    "做出",
    "上线",
    "落地",
    "脚本",
    "工具",
    "应用",
    "build",
    "create",
    "develop",
    "generate",
    "implement",
    "make a",
    "new project",
]
SPEC = [
    "修复",
    "修一下",
    "调试",
    "重构",
    "维护",
    "排查",
    "报错",
    "出错",
    "崩溃",
    "优化",
    "审查",
    "review",
    "fix",
    "debug",
    "refactor",
    "maintain",
    "repair",
    "broken",
    "break",
    "为什么",
    "异常",
    "故障",
    "迁移",
    "升级",
    "兼容",
]
COMPLEX = (
    "重构|架构|全面|详细|设计|系统|优化|分析|survey|overview|architecture|refactor|comprehensive|detailed|"
    "design|system|optimize|analyze"
)

# the original pi-deepseek-router's worked examples: (input, build matches, fix matches, result, complex)
SEED_TABLE = [
    ("build a new command-line tool", 1, 0, "react", False),
    ("fix the crash in the parser", 0, 1, "spec", False),
    ("please inspect this", 0, 0, "weak", False),
    ("please explain the architecture", 0, 0, "weak", True),
    ("refactor and build", 1, 1, "weak", True),
    ("add a prefix to the debug tool", 0, 2, "spec", False),
    ("Rebuild the website", 1, 0, "react", False),
    ("preview the filesystem", 0, 1, "spec", True),
    ("breakfast", 0, 1, "spec", False),
    ("修复登录报错", 0, 2, "spec", False),
    ("写一个脚本", 2, 0, "react", False),
]






@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_example_true_as_expression(name: str) -> None:
    assert run(FUNCTIONS[name].example) is True


@pytest.mark.parametrize("name", sorted(JMESPATH_EXAMPLES))
def test_function_example_true_as_jmespath(name: str) -> None:
    source = JMESPATH_EXAMPLES[name]
    assert compile_query(source).search({}) is True
    assert jmespath.search(source, {}, options=_OPTIONS) is True


def test_jmespath_examples_cover_every_non_native_function() -> None:
    assert set(JMESPATH_EXAMPLES) == {n for n, f in FUNCTIONS.items() if not f.native_jmespath}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_registration_has_summary_and_sane_arity(name: str) -> None:
    spec = FUNCTIONS[name]
    assert spec.summary and spec.example and spec.name == name
    assert spec.max_args is None or spec.max_args >= spec.min_args >= 1


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("a😀", 3),
        ("𝄞", 2),
        ("é", 1),
        ("e\u0301", 2),
        ("", 0),
        ("x" * 121, 121),
        ("👨\u200d👩\u200d👧", 8),
    ],
)
def test_utf16_len_astral_chars_count_two(text: str, units: int) -> None:
    assert run("utf16_len(t)", t=text) == units


@pytest.mark.parametrize(("text", "react", "spec", "result", "complex_"), SEED_TABLE)
def test_count_keywords_seed_table_matches(
    text: str, react: int, spec: int, result: str, complex_: bool
) -> None:
    counts = run("[count_keywords(t, r), count_keywords(t, s)]", t=text, r=REACT, s=SPEC)
    assert counts == [react, spec]
    decided = run(
        "'react' if count_keywords(t, r) > count_keywords(t, s) else "
        "('spec' if count_keywords(t, s) > count_keywords(t, r) else 'weak')",
        t=text,
        r=REACT,
        s=SPEC,
    )
    assert decided == result
    assert run(f"utf16_len(t) > 120 or regex(t, '{COMPLEX}', 'i')", t=text) is complex_


@pytest.mark.parametrize(("text", "react", "spec", "result", "complex_"), SEED_TABLE)
def test_count_keywords_literal_lists_agree_with_runtime_lists(
    text: str, react: int, spec: int, result: str, complex_: bool
) -> None:
    literal = ", ".join(repr(k) for k in SPEC)
    assert run(f"count_keywords(t, [{literal}])", t=text) == spec
    assert compile_query(f"count_keywords(t, `{_json(SPEC)}`)").search({"t": text}) == spec


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize(
    ("text", "words", "count"),
    [
        ("add a prefix to the debug tool", ["fix", "debug"], 2),
        ("aaaa", ["aa"], 2),
        ("FIX Fix fix", ["fix"], 3),
        ("new project", ["new", "new project", "project"], 2),
        ("new project", ["new project", "new", "project"], 1),
        ("a.b", ["."], 1),
        ("(x)", ["(", ")"], 2),
        (None, ["x"], 0),
        ("anything", [], 0),
    ],
)
def test_count_keywords_non_overlapping_in_alternation_order(
    text: str | None, words: list[str], count: int
) -> None:
    assert run("count_keywords(t, w)", t=text, w=words) == count


def test_count_keywords_literal_empty_keyword_counts_zero() -> None:
    assert run("count_keywords('abc', [''])") == run("count_keywords('abc', w)", w=[""]) == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```JSON\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('Sure: {"x": {"y": 2}} done.', {"x": {"y": 2}}),
        ('  {"a": true}  ', {"a": True}),
        ('Here:\n```json\n{"a": 1}\n```\nThanks', {"a": 1}),
        ("42", 42),
    ],
)
def test_extract_json_fences_and_prose(text: str, expected: Any) -> None:
    assert run("extract_json(t)", t=text) == expected


@pytest.mark.parametrize("text", ["no json here", "{not: json}", "} backwards {", ""])
def test_extract_json_nothing_found_rt402(text: str) -> None:
    assert fails("extract_json(t)", t=text).code == "RT402"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("round(2.5)", 3),
        ("round(-2.5)", -3),
        ("round(0.125, 2)", 0.13),
        ("tail('abc', 0)", ""),
        ("head('abc', -1)", ""),
        ("to_number('1e3')", 1000),
        ("to_number('x')", None),
        ("to_number('')", None),
        ("to_number(true)", None),
        ("get([1, 2], -1, 0)", 2),
        ("get([1, 2], 5, 0)", 0),
        ("get('str', 0, 9)", 9),
        ("lower(null)", None),
        ("regex(null, 'x')", False),
        ("regex_find('abc', 'z')", None),
        ("not_null(null, null)", None),
        ("merge()", {}),
        ("split('a', ',')", ["a"]),
        ("expand_aliases(['x', 'read'], null, ['read'])", ["read"]),
        ("starts_with(null, 'a')", False),
    ],
)
def test_helpers_edge_values(source: str, expected: Any) -> None:
    assert run(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "lower(1)",
        "upper([1])",
        "trim({})",
        "utf16_len(null)",
        "tail(1, 2)",
        "tail('a', 'b')",
        "split('a', 1)",
        "replace('a', 1, 'b')",
        "join(1, ['a'])",
        "parse_json('{bad')",
        "parse_json(1)",
        "regex(1, 'a')",
        "count_keywords(1, ['a'])",
        "count_keywords('a', 'a')",
        "sum(['a'])",
        "sum(1)",
        "max(1)",
        "length(5)",
        "contains(5, 1)",
        "keys([1])",
        "values('a')",
        "merge({}, 1)",
        "intersect(1, [1])",
        "without([1], 1)",
        "round('1')",
        "abs('1')",
        "cap_level('x', 'low')",
        "regex('a', p, 'q')",
        "regex('a', p)",
    ],
)
def test_helpers_wrong_types_raise_expression_error(source: str) -> None:
    error = fails(source, p="(")
    assert error.code == "RT402" and error.source == source


def test_validate_answers_missing_reason_and_confidence_take_the_arguments() -> None:
    questions = [{"id": "q1", "options": [{"value": "mvp", "label": "MVP"}], "allow_other": False}]
    bare = {"answers": [{"value": "MVP"}]}
    assert run("validate_answers(p, q, 'picked', 0.6, 'child-agent').q1", p=bare, q=questions) == {
        "id": "q1", "value": "mvp", "label": "MVP", "reason": "picked", "confidence": 0.6,
        "source": "child-agent"}
    plain = run("validate_answers(p, q).q1", p=bare, q=questions)
    assert (plain["reason"], plain["confidence"], plain["source"]) == (None, None, None)
    named = run("validate_answers(p, q, null, null, 'delegate').q1", p=bare, q=questions)
    assert named["source"] == "delegate"
    given = {"answers": [{"value": "mvp", "reason": " fits ", "confidence": 5}]}
    assert run("validate_answers(p, q, 'picked', 0.6).q1", p=given, q=questions)["reason"] == "fits"
    assert run("validate_answers(p, q, 'picked', 0.6).q1", p=given, q=questions)["confidence"] == 1.0


@pytest.mark.parametrize("args", ["1, 0.6", "'picked', '0.6'", "'picked', 0.6, 1"])
def test_validate_answers_wrong_default_types_rt402(args: str) -> None:
    error = fails(f"validate_answers(p, q, {args})", p={"answers": [{"value": "x"}]}, q=[{"id": "q1"}])
    assert error.code == "RT402"


def test_join_non_string_items_rt402() -> None:
    assert fails("join(',', [1, null, true])").code == "RT402"
