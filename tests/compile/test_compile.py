"""router.compile.compiler: every compile diagnostic, with its code, file, line and column."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from router.compile.compiler import compile_files
from router.compile.context import Context
from router.diagnostics.diagnostic import Severity
from router.load.loader import MAX_RULES
from tests.helpers import codes, compile_ok, compile_text, only, where, write


def diagnose(tmp_path: Path, text: str) -> list:
    policy, diagnostics = compile_text(tmp_path, text)
    assert policy is None or all(d.severity is Severity.WARNING for d in diagnostics)
    return diagnostics


def test_compile_unknown_key_rt110_with_did_you_mean(tmp_path: Path) -> None:
    diag = only(
        diagnose(
            tmp_path,
            """
        rules:
          - id: a
            on: input
            matchh: "text == 'x'"
        """,
        ),
        "RT110",
    )
    assert where(diag) == (4, 5) and diag.span.path.endswith("policy.yaml")
    assert "did you mean 'match'?" in (diag.help or "")
    assert diag.key_path == "rules[0].matchh" and "'a'" in diag.message


@pytest.mark.parametrize(
    ("text", "line", "col", "key"),
    [
        ("versoin: 1\n", 1, 1, "versoin"),
        ("signals:\n  s:\n    expr: '1'\n    fallbak: '0'\nrules: []\n", 4, 5, "signals.s.fallbak"),
        ("vars:\n  x: {env: X, typ: number}\n", 2, 15, "vars.x.typ"),
        (
            "rules:\n  - id: a\n    on: input\n    examples:\n"
            "      - event: {type: input}\n        expct: {}\n",
            6,
            9,
            "rules[0].examples[0].expct",
        ),
        ("commands:\n  - name: c\n    descr: x\n", 3, 5, "commands[0].descr"),
        (
            "rules:\n  - id: a\n    on: input\n    do:\n      - tools: {only: [read], extra: 1}\n",
            5,
            31,
            "rules[0].do[0].tools.extra",
        ),
    ],
)
def test_compile_unknown_key_at_every_level_rt110(
    tmp_path: Path, text: str, line: int, col: int, key: str
) -> None:
    found = diagnose(tmp_path, text)
    diag = next(d for d in found if d.code in ("RT110", "RT207"))
    assert where(diag) == (line, col), diag
    assert key.split(".")[-1] in diag.message


def test_compile_wrong_type_rt111_at_value(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: a\n    on: input\n    continue: maybe\n"), "RT111")
    assert where(diag) == (4, 15) and "'maybe'" in diag.message and "rules[0].continue" in diag.message


@pytest.mark.parametrize(
    ("text", "line", "col"),
    [
        ("rules: {a: 1}\n", 1, 8),
        ("rules:\n  - id: 'bad id!'\n    on: input\n", 2, 9),
        ("rules:\n  - id: a\n    on: input\n    do:\n      - notify\n", 5, 9),
        ("use: [1]\n", 1, 7),
        ("rules:\n  - id: a\n    on: input\n    when: 5\n", 4, 11),
        ("- a\n- b\n", 1, 1),
        ("just a string\n", 1, 1),
    ],
)
def test_compile_invalid_value_rt111(tmp_path: Path, text: str, line: int, col: int) -> None:
    diag = only(diagnose(tmp_path, text), "RT111")
    assert where(diag) == (line, col)


def test_compile_missing_key_rt112_at_parent(tmp_path: Path) -> None:
    found = diagnose(tmp_path, "rules:\n  - when: 'true'\n")
    assert codes(found) == ["RT112", "RT112"]
    assert {d.message.split("'")[1] for d in found} == {"id", "on"}
    assert all(where(d) == (2, 5) for d in found)


def test_compile_unsupported_version_rt113(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "version: 2\n"), "RT113")
    assert where(diag) == (1, 10)


def test_compile_use_missing_file_rt120_at_entry(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "use:\n  - ./nope.yaml\n"), "RT120")
    assert where(diag) == (2, 5) and "nope.yaml" in diag.message


def test_compile_use_unknown_pack_rt120_did_you_mean(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "use: [defualt]\n"), "RT120")
    assert where(diag) == (1, 7) and "did you mean 'default'?" in (diag.help or "")


def test_compile_skills_resolved_per_file_deduplicated_in_layer_order(tmp_path: Path) -> None:
    for name in ("one", "two"):
        write(tmp_path, f"---\nname: {name}\ndescription: d\n---\n", f"lib/skills/{name}/SKILL.md")
    write(tmp_path, "skills: [skills/two, skills/one]\n", "lib/pack.yaml")
    write(tmp_path, "use: [./lib/pack.yaml]\nskills: lib/skills/one\n", "main.yaml")
    policy, found = compile_files([("file", tmp_path / "main.yaml")])
    assert policy is not None, found
    assert policy.skills == (str(tmp_path / "lib/skills/two"), str(tmp_path / "lib/skills/one"))


def test_compile_skill_without_skill_md_rt123(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    policy, found = compile_files([("file", write(tmp_path, "rules: []\nskills: [empty]\n"))])
    diag = only(found, "RT123")
    assert policy is None and where(diag) == (2, 10)
    assert diag.message == f"skill not found: empty (looked for {tmp_path / 'empty'}/SKILL.md)"


def test_compile_use_cycle_rt121(tmp_path: Path) -> None:
    write(tmp_path, "use: [./b.yaml]\n", "a.yaml")
    write(tmp_path, "rules: []\nuse: [./a.yaml]\n", "b.yaml")
    policy, found = compile_files([("file", tmp_path / "a.yaml")])
    diag = only(found, "RT121")
    assert policy is None and diag.span.path.endswith("b.yaml") and where(diag) == (2, 7)
    assert "a.yaml -> b.yaml -> a.yaml" in diag.message


def test_compile_use_self_rt121(tmp_path: Path) -> None:
    assert codes(diagnose(tmp_path, "use: [./policy.yaml]\n")) == ["RT121"]


def test_compile_use_broken_file_located_in_that_file(tmp_path: Path) -> None:
    write(tmp_path, "rules:\n  - id: x\n    on: [input\n", "base.yaml")
    policy, found = compile_files([("file", write(tmp_path, "use: [./base.yaml]\n"))])
    assert policy is None and codes(found) == ["RT101"] and found[0].span.path.endswith("base.yaml")


def test_compile_unknown_rule_in_disable_rt122_warning(tmp_path: Path) -> None:
    policy, found = compile_text(tmp_path, "rules:\n  - id: alpha\n    on: input\ndisable: [alpah]\n")
    diag = only(found, "RT122")
    assert policy is not None and diag.severity is Severity.WARNING
    assert where(diag) == (4, 11) and "did you mean 'alpha'?" in (diag.help or "")


def test_compile_unknown_anchor_in_after_rt122(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: b\n    on: input\n    after: nope\n"), "RT122")
    assert where(diag) == (4, 12)


@pytest.mark.parametrize(
    ("kind", "text", "code", "line", "col"),
    [
        ("match", 'match: "text =="', "RT201", 4, 20),
        ("when", 'when: "text >"', "RT202", 4, 12),
        ("template", "do: [{notify: 'p={text:.2f'}]", "RT204", 4, 31),
    ],
)
def test_compile_expression_syntax_located_in_the_string(
    tmp_path: Path, kind: str, text: str, code: str, line: int, col: int
) -> None:
    diag = only(diagnose(tmp_path, f"rules:\n  - id: a\n    on: input\n    {text}\n"), code)
    assert where(diag) == (line, col), diag.message
    assert diag.rule_id == "a"


FORBIDDEN = [("when: \"text.lower() == 'x'\"", 12), ("when: \"'a' == lower(text.strip())\"", 25)]


@pytest.mark.parametrize(("text", "col"), FORBIDDEN)
def test_compile_forbidden_construct_rt203_on_its_line(tmp_path: Path, text: str, col: int) -> None:
    diag = only(diagnose(tmp_path, f"rules:\n  - id: a\n    on: input\n    {text}\n"), "RT203")
    assert where(diag)[0] == 4 and diag.rule_id == "a"


@pytest.mark.parametrize(("text", "col"), FORBIDDEN)
def test_compile_forbidden_construct_rt203_column(tmp_path: Path, text: str, col: int) -> None:
    diag = only(diagnose(tmp_path, f"rules:\n  - id: a\n    on: input\n    {text}\n"), "RT203")
    assert where(diag) == (4, col)


def test_compile_syntax_error_in_block_scalar_on_next_line(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: a\n    on: input\n    when: |\n      text >\n"), "RT202")
    assert where(diag)[0] == 5


def test_compile_unknown_event_type_rt205(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: a\n    on: [input, tool_cal]\n"), "RT205")
    assert where(diag) == (3, 17) and "did you mean 'tool_call'?" in (diag.help or "")


def test_compile_unknown_action_rt206_at_key(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: a\n    on: input\n    do:\n      - notfy: hi\n"), "RT206")
    assert where(diag) == (5, 9) and "did you mean 'notify'?" in (diag.help or "")


@pytest.mark.parametrize(
    ("item", "line", "col"),
    [
        ("- tools: {only: [read], add: [bash]}", 5, 16),
        ("- notify: {level: loud, text: x}", 5, 25),
        ("- {notify: a, log: b}", 5, 9),
        ("- model: 5", 5, 16),
        ("- set: [a]", 5, 14),
    ],
)
def test_compile_invalid_action_params_rt207(tmp_path: Path, item: str, line: int, col: int) -> None:
    found = diagnose(tmp_path, f"rules:\n  - id: a\n    on: input\n    do:\n      {item}\n")
    assert "RT207" in codes(found)
    diag = next(d for d in found if d.code == "RT207")
    assert where(diag) == (line, col), diag.message


@pytest.mark.parametrize(
    ("cond", "code"),
    [
        ("when: \"lowercase(text) == 'x'\"", "RT208"),
        ("match: \"lowercase(text) == 'x'\"", "RT208"),
        ('when: "clamp(1, 2) > 0"', "RT209"),
        ('match: "clamp(`1`) > `0`"', "RT209"),
        ("when: \"regex(text, '(unclosed')\"", "RT210"),
        ("match: \"regex(text, '[z-a]')\"", "RT210"),
    ],
)
def test_compile_function_checks(tmp_path: Path, cond: str, code: str) -> None:
    diag = only(diagnose(tmp_path, f"rules:\n  - id: a\n    on: input\n    {cond}\n"), code)
    assert where(diag)[0] == 4 and diag.rule_id == "a"


def test_compile_unknown_function_did_you_mean(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, 'rules:\n  - id: a\n    on: input\n    when: "lowr(text)"\n'), "RT208")
    assert "did you mean 'lower'?" in (diag.help or "")


def test_compile_wrong_arity_help_shows_example(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, 'rules:\n  - id: a\n    on: input\n    when: "tail(text)"\n'), "RT209")
    assert "tail() takes 2 arguments, got 1" in diag.message and "tail(" in (diag.help or "")


def test_compile_jmespath_builtin_wrong_arity_rt209(tmp_path: Path) -> None:
    assert "RT209" in codes(
        diagnose(tmp_path, 'rules:\n  - id: a\n    on: input\n    match: "length(text, text) > `1`"\n')
    )


@pytest.mark.parametrize(
    ("cond", "code", "bad"),
    [
        ("when: \"tool.nmae == 'bash'\"", "RT301", "tool.nmae"),
        ("match: \"tool.nmae == 'bash'\"", "RT301", "tool.nmae"),
        ('match: "usage.percnt > `1`"', "RT301", "usage.percnt"),
        ('match: "model.cost.inptu > `1`"', "RT301", "model.cost.inptu"),
        ('when: "vars.treshold > 1"', "RT303", "vars.treshold"),
        ('when: "signals.pcomplex > 1"', "RT304", "signals.pcomplex"),
        ('when: "signal_errors.nope"', "RT304", "signal_errors.nope"),
    ],
)
def test_compile_unknown_paths(tmp_path: Path, cond: str, code: str, bad: str) -> None:
    diag = only(
        diagnose(
            tmp_path,
            "vars: {threshold: 1}\nsignals: {p_complex: {expr: '1'}}\n"
            f"rules:\n  - id: a\n    on: tool_call\n    {cond}\n",
        ),
        code,
    )
    assert where(diag)[0] == 6 and f"'{bad}'" in diag.message


def test_compile_unknown_field_did_you_mean(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, 'rules:\n  - id: a\n    on: tool_call\n    when: "tool.nmae"\n'), "RT301")
    assert "did you mean 'name'?" in (diag.help or "")


def test_compile_field_of_other_event_type_rt301(tmp_path: Path) -> None:
    assert codes(
        diagnose(tmp_path, "rules:\n  - id: a\n    on: input\n    when: \"tool.name == 'x'\"\n")
    ) == ["RT302"]
    assert (
        codes(
            diagnose(
                tmp_path, "rules:\n  - id: a\n    on: [input, tool_call]\n    when: \"tool.name == 'x'\"\n"
            )
        )
        == []
    )


def test_compile_free_parts_of_the_tree_unchecked(tmp_path: Path) -> None:
    compile_ok(
        tmp_path,
        'rules:\n  - id: a\n    on: tool_call\n    when: "tool.input.anything.deep and '
        "state.whatever.x and env.X and models['a/b'].cost.input\"\n",
    )


def test_compile_unknown_name_rt302_suggests_quotes(tmp_path: Path) -> None:
    diag = only(
        diagnose(tmp_path, 'rules:\n  - id: a\n    on: input\n    when: "state.band == react"\n'), "RT302"
    )
    assert where(diag) == (4, 11) and "write 'react' in quotes" in (diag.help or "")


def test_compile_duplicate_rule_id_rt305(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "rules:\n  - id: a\n    on: input\n  - id: a\n    on: input\n"), "RT305")
    assert where(diag) == (4, 9)


def test_compile_action_without_effect_on_event_rt309(tmp_path: Path) -> None:
    diag = only(
        diagnose(
            tmp_path, "rules:\n  - id: a\n    on: input\n    do:\n      - section: {name: x, text: y}\n"
        ),
        "RT309",
    )
    assert where(diag) == (5, 9) and "before_agent_start" in (diag.help or "")


def test_compile_signal_cycle_rt310(tmp_path: Path) -> None:
    diag = only(
        diagnose(tmp_path, "signals:\n  a: {expr: 'signals.b'}\n  b: {expr: 'signals.a + 1'}\n"), "RT310"
    )
    assert where(diag) == (2, 6) and "a -> b -> a" in diag.message


def test_compile_leaves_no_cycle_holding_its_context(tmp_path: Path) -> None:
    """A compile's context (its documents, diagnostics, names) is freed when the compile returns,
    not at the next garbage collection: the signal cycle check used to be a closure calling
    itself, a reference cycle that held the context."""
    text = ("signals:\n  a: {expr: 'signals.b'}\n  b: {expr: '1'}\n"
            "rules:\n  - {id: r, on: input, do: [{notify: x}]}\n")
    diagnose(tmp_path, text)
    gc.collect()
    gc.disable()
    try:
        diagnose(tmp_path, text)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        held = [o for o in gc.garbage if isinstance(o, Context)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert held == []


def test_compile_signal_self_cycle_rt310(tmp_path: Path) -> None:
    assert codes(diagnose(tmp_path, "signals:\n  a: {expr: 'signals.a'}\n")) == ["RT310"]


def test_compile_signal_two_sources_rt111(tmp_path: Path) -> None:
    diag = only(diagnose(tmp_path, "signals:\n  s:\n    expr: '1'\n    child: {prompt: x}\n"), "RT111")
    assert where(diag)[0] == 3 and "exactly one" in diag.message


def test_compile_signal_expressions_checked(tmp_path: Path) -> None:
    found = diagnose(
        tmp_path, "signals:\n  s:\n    expr: 'lowr(x)'\n    fallback: 'nope'\n    transform: 'result +'\n"
    )
    assert sorted((d.code, *where(d)) for d in found) == [
        ("RT202", 5, 17),
        ("RT208", 3, 11),
        ("RT302", 3, 11),
        ("RT302", 4, 15),
    ]


def test_compile_transform_may_read_result(tmp_path: Path) -> None:
    compile_ok(
        tmp_path,
        "signals:\n  s:\n    complete: {prompt: hi}\n    transform: 'extract_json(result).p'\n"
        "    fallback: '0'\nrules:\n  - id: a\n    on: input\n    when: 'signals.s > 1'\n",
    )


def test_compile_all_errors_reported_together(tmp_path: Path) -> None:
    found = diagnose(
        tmp_path, "rules:\n  - id: a\n    on: inptu\n    when: 'lowr(x)'\n    do: [{notfy: 1}]\n"
    )
    assert {"RT205", "RT206", "RT208"} <= set(codes(found))


def test_compile_policy_none_on_error_and_frozen_on_success(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, "rules:\n  - id: a\n    on: [input, turn_end]\n")
    assert [r.id for r in policy.by_event["input"]] == ["a"] and policy.event_types == ("input", "turn_end")
    assert compile_text(tmp_path, "rules:\n  - id: a\n    on: nope\n")[0] is None


def test_compile_empty_file_is_an_empty_policy(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, "")
    assert policy.rules == ()


def test_policy_over_the_rule_limit_fails_fast_naming_the_limit_rt103(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("version: 1\nrules:\n" + "".join(f"  - {{id: r{i}, on: input}}\n"
                                                   for i in range(MAX_RULES * 2)), encoding="utf-8")
    policy, diagnostics = compile_files([("file", path)])
    assert policy is None
    (diagnostic,) = diagnostics
    assert diagnostic.code == "RT103"
    assert diagnostic.message == f"the policy has {MAX_RULES * 2} rules; at most {MAX_RULES} are supported"
    assert diagnostic.span is not None and (diagnostic.span.line, diagnostic.span.col) == (2, 1)


def test_layers_over_the_rule_limit_together_fail_rt103(tmp_path: Path) -> None:
    half = MAX_RULES // 2 + 1
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path, prefix in ((first, "a"), (second, "b")):
        path.write_text("rules:\n" + "".join(f"  - {{id: {prefix}{i}, on: input}}\n" for i in range(half)))
    policy, diagnostics = compile_files([("file", first), ("file", second)])
    assert policy is None and [d.code for d in diagnostics] == ["RT103"]
    assert f"has {2 * half} rules" in diagnostics[0].message


def test_many_overrides_keep_their_places(tmp_path: Path) -> None:
    base, top = tmp_path / "base.yaml", tmp_path / "top.yaml"
    base.write_text("rules:\n" + "".join(f"  - {{id: r{i}, on: input}}\n" for i in range(2000)))
    top.write_text("use: [./base.yaml]\ndisable: [r5]\nrules:\n  - {id: r0, on: turn_end}\n"
                   "  - {id: new, on: input, before: r3}\n  - {id: r1999, on: input, after: r0}\n")
    policy, diagnostics = compile_files([("file", top)])
    assert policy is not None and not diagnostics
    ids = [r.id for r in policy.rules]
    assert ids[:6] == ["r0", "r1999", "r1", "r2", "new", "r3"] and "r5" not in ids
    assert len(ids) == 2000 and policy.rules[0].on == ("turn_end",)
