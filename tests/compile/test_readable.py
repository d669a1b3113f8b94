"""The readability forms: `let:` bindings, multi-line templates, `command:` shorthand, `defaults:`, RT332."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.compile.readable import command_match
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.diagnostics.errors import ExpressionError
from router.engine.interpreter import evaluate
from router.lang.budget import BudgetExceeded
from router.lang.expr.blocks import MAX_OUTPUT
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lint import run_checks
from router.load.model import CommandSpec


def _compile(tmp_path: Path, text: str) -> tuple[object, list[Diagnostic]]:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    return compile_files([("file", path)])


def _codes(found: list[Diagnostic]) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.col) for d in found if d.span is not None]


def _render(source: str, scope: dict[str, object]) -> object:
    return Evaluator(scope).render(compile_template(source))


# --- multi-line templates -----------------------------------------------------------------------


def test_block_template_loops_choices_and_the_last_line_break() -> None:
    source = "head {x}\n{for r in rows}\n- {r.name}\n{if r.v > 1}\n  big\n{elif r.v > 0}\n  some\n" \
             "{else}\n  none\n{end}\n{end}\ntail"
    rows = [{"name": "a", "v": 2}, {"name": "b", "v": 1}, {"name": "c", "v": 0}]
    assert _render(source, {"x": 1, "rows": rows}) == "head 1\n- a\n  big\n- b\n  some\n- c\n  none\ntail"
    assert _render("a\n{for r in rows}\n{r}\n{end}", {"rows": [1, 2]}) == "a\n1\n2"
    assert _render("a\n{for r in rows}\n{r}\n{end}\n", {"rows": [1, 2]}) == "a\n1\n2\n"
    assert _render("a\n{for r in rows}\n{r}\n{end}", {"rows": None}) == "a"


def test_block_template_names_exclude_loop_variables() -> None:
    template = compile_template("{for r in rows}\n{r.name} {x}\n{end}\n")
    assert template.expression is not None
    assert template.expression.names == {"rows", "x"}
    assert ("r", "name") not in template.expression.paths


@pytest.mark.parametrize(("source", "message", "offset"), [
    ("a\n{for x in}\n{end}", "write the loop as {for NAME in EXPR}", 2),
    ("a\n{if 1}\nb", "missing {end}", 2),
    ("a\n{end}\n{if 1}\n{end}", "{end} without an opening", 2),
    ("a\n{if 1}\n{else}\n{else}\n{end}", "{else} after {else}", 16),
    ("a\n{for x in xs}\n{else}\n{end}", "ends with {end}, not {else}", 16),
])
def test_block_template_structure_errors_are_located(source: str, message: str, offset: int) -> None:
    with pytest.raises(ExpressionSyntaxError) as raised:
        compile_template(source)
    assert message in raised.value.message and raised.value.code == "RT204"
    assert raised.value.offset == offset


def test_block_template_runtime_errors_name_the_line_and_the_output_is_bounded() -> None:
    needs_array = r"template line 2: \{for x in …\} needs an array, got a number"
    with pytest.raises(ExpressionError, match=needs_array):
        _render("a\n{for x in n}\n{x}\n{end}", {"n": 3})
    with pytest.raises(ExpressionError, match="longer than 100,000 characters") as raised:
        _render("a\n{for x in xs}\n{x}\n{end}", {"xs": ["y" * 1000] * (MAX_OUTPUT // 1000 + 1)})
    assert raised.value.code == "RT403"


_LINES = st.sampled_from(["{for x in xs}", "{if x}", "{elif y}", "{else}", "{end}", "text {x}", "{x.a}",
                          "{", "}", "{{", "{for}", "{if}", "plain", "", "{xs[0]}", "{for x in 3}",
                          "{len(x)}", "{x:>5}", "{'a' * 10}"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=12), st.booleans())
def test_templates_never_crash(lines: list[str], final: bool) -> None:
    """Any template compiles or raises a located ExpressionSyntaxError; any compiled one renders
    to a value or raises ExpressionError (or runs out of budget)."""
    source = "\n".join(lines) + ("\n" if final else "")
    try:
        template = compile_template(source)
    except ExpressionSyntaxError as exc:
        assert 0 <= exc.offset <= len(source) and exc.code.startswith("RT2")
        return
    try:
        value = Evaluator({"x": 1, "y": 0, "xs": [1, {"a": 2}, "s"]}).render(template)
    except (ExpressionError, BudgetExceeded):
        return
    if template.block is not None:
        assert isinstance(value, str) and len(value) <= MAX_OUTPUT


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="{}forinifelsend x\n:[]'.0", max_size=60))
def test_arbitrary_text_templates_never_crash(source: str) -> None:
    try:
        template = compile_template(source)
        Evaluator({"x": [1], "xs": []}).render(template)
    except (ExpressionSyntaxError, ExpressionError, BudgetExceeded):
        pass


# --- command: ----------------------------------------------------------------------------------


def test_command_shorthand_expansions() -> None:
    assert command_match("cuttle") == "name == 'cuttle'"
    assert command_match("cuttle config set") == "name == 'cuttle' && argv[0] == 'config' && argv[1] == 'set'"
    assert command_match(CommandSpec(name="c", sub=["on", "off"])) == \
        "name == 'c' && (argv[0] == 'on' || argv[0] == 'off')"
    assert command_match(CommandSpec(name="c", sub=["", "status"])) == \
        "name == 'c' && (length(argv) == `0` || argv[0] == 'status')"
    assert command_match(CommandSpec(name="c", sub="config set", min_args=2)) == \
        "name == 'c' && argv[0] == 'config' && argv[1] == 'set' && length(argv) >= `4`"
    assert command_match(CommandSpec(name="c", sub="config", args=0)) == \
        "name == 'c' && argv[0] == 'config' && length(argv) == `1`"
    assert command_match(["c on", "c init"]) == \
        "(name == 'c' && argv[0] == 'on') || (name == 'c' && argv[0] == 'init')"


_COMMANDS = "version: 1\ncommands: [{name: demo}]\nrules:\n"


def test_command_shorthand_matches_like_the_match_it_expands_to(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, _COMMANDS + """\
  - id: set
    on: command
    command: {name: demo, sub: config set, min_args: 2}
    do: [{notify: "set {argv[2]}"}]
  - id: status
    on: command
    command: {name: demo, sub: ["", status]}
    do: [{notify: status}]
""")
    assert policy is not None, found

    def fired(argv: list[str]) -> tuple[str, ...]:
        event = {"type": "command", "name": "demo", "args": " ".join(argv), "argv": argv}
        return evaluate(policy, event).fired  # type: ignore[arg-type]

    assert fired(["config", "set", "k", "v"]) == ("set",)
    assert fired(["config", "set", "k"]) == ()
    assert fired([]) == ("status",) and fired(["status"]) == ("status",)


def test_command_shorthand_mistakes_are_located(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, _COMMANDS + """\
  - id: wrong-event
    on: input
    command: demo
  - id: bad-name
    on: command
    command: "/demo x"
  - id: undeclared
    on: command
    command: dmeo
""")
    assert policy is None
    assert _codes(found) == [("RT333", 5, 9), ("RT333", 9, 14), ("RT334", 12, 14)]
    assert "did you mean 'demo'" in found[2].help.lower() if found[2].help else False
    assert found[2].severity is Severity.WARNING


# --- let: --------------------------------------------------------------------------------------


def test_let_bindings_in_when_templates_and_later_bindings(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    let:
      words: "split(text, ' ')"
      count: "length(words)"
    when: "count > 1"
    do: [{notify: "{count} words, first {words[0]}"}]
""")
    assert policy is not None, found
    decision = evaluate(policy, {"type": "input", "text": "a b c"})  # type: ignore[arg-type]
    assert [e.params for e in decision.effects] == [{"text": "3 words, first a", "level": "info"}]
    assert evaluate(policy, {"type": "input", "text": "a"}).fired == ()  # type: ignore[arg-type]


def test_let_bindings_see_state_written_by_the_rule(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    let: {n: "state.n or 0"}
    do: [{set: {n: "{n + 1}"}}, {notify: "{n}"}]
""")
    assert policy is not None, found
    decision = evaluate(policy, {"type": "input", "text": "x"})  # type: ignore[arg-type]
    assert decision.effects[-1].params["text"] == 1  # one placeholder: the value itself


def test_let_problems_are_located(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    let:
      text: "1"
      a: "b + 1"
      b: "2"
      c: "c"
      d: "nope"
    when: "a and b and c and d"
""")
    assert policy is None
    found = sorted(found, key=lambda d: (d.span.line if d.span else 0))
    assert _codes(found) == [("RT330", 6, 7), ("RT330", 7, 10), ("RT330", 9, 10), ("RT302", 10, 10)]
    assert "already a name of this scope" in found[0].message
    assert "uses 'b', which is defined below it" in found[1].message
    assert "refers to itself" in found[2].message


def test_let_cycle_and_unused_binding(tmp_path: Path) -> None:
    _, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    let: {a: "b", b: "a"}
    when: "a"
""")
    assert [d.code for d in found] == ["RT330"] and "depend on each other (a cycle)" in found[0].message
    policy, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    let: {spare: "1"}
    when: "true"
""")
    assert policy is not None
    assert [(d.code, d.severity) for d in found] == [("RT331", Severity.WARNING)]


def test_let_on_an_expression_signal(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, """\
version: 1
signals:
  shout:
    let: {t: "upper(text)"}
    expr: "t + '!'"
rules:
  - id: r
    on: input
    do: [{notify: "{signals.shout}"}]
""")
    assert policy is not None, found
    decision = evaluate(policy, {"type": "input", "text": "hi"})  # type: ignore[arg-type]
    assert decision.effects[0].params["text"] == "HI!"


def test_template_loop_name_may_not_hide_a_name(tmp_path: Path) -> None:
    _, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    do:
      - notify: |-
          {for text in [1]}
          {text}
          {end}
""")
    assert [d.code for d in found] == ["RT330"]


def test_block_template_error_is_located_on_its_line(tmp_path: Path) -> None:
    _, found = _compile(tmp_path, """\
version: 1
rules:
  - id: r
    on: input
    do:
      - notify: |-
          first
          {if text}
          {text +}
          {end}
""")
    assert [(d.code, d.span.line) for d in found if d.span] == [("RT204", 9)]  # the line of `{text +}`


# --- defaults: and RT332 -----------------------------------------------------------------------


def test_defaults_fill_what_an_action_leaves_out(tmp_path: Path) -> None:
    policy, found = _compile(tmp_path, f"""\
version: 1
defaults:
  log: {{file: "{tmp_path}/debug.log"}}
rules:
  - id: r
    on: input
    continue: true
    do: [{{log: "one"}}, {{log: {{text: two, file: "{tmp_path}/other.log"}}}}]
""")
    assert policy is not None, found
    decision = evaluate(policy, {"type": "input", "text": "x"})  # type: ignore[arg-type]
    assert [(e.params["text"], e.params["file"]) for e in decision.effects] == [
        ("one", f"{tmp_path}/debug.log"), ("two", f"{tmp_path}/other.log")]


def test_defaults_mistakes_are_located(tmp_path: Path) -> None:
    _, found = _compile(tmp_path, "version: 1\ndefaults:\n  logg: {file: x}\n  log: {fille: x}\n")
    assert _codes(found) == [("RT206", 3, 3), ("RT207", 4, 9)]


def test_over_long_expressions_warn_with_a_hint(tmp_path: Path) -> None:
    long = " or ".join(f"text == 'value number {i}'" for i in range(10))
    policy, found = _compile(tmp_path, f'version: 1\nrules:\n  - id: r\n    on: input\n    when: "{long}"\n')
    assert policy is not None, found
    warnings = [d for d in run_checks(policy) if d.code == "RT332"]  # type: ignore[arg-type]
    assert [(d.span.line, d.span.col) for d in warnings if d.span] == [(5, 11)]
    assert "let:" in (warnings[0].help or "")
