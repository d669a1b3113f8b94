"""The broken-policy corpus: every file yields exactly the errors it declares, never a crash.

Each file in tests/corpus/broken/ is a policy with at least one problem. Its first line declares
the errors it must produce, in order of position: `# expect: RT207 6:17, RT207 6:18` (code, then
line:col where the place means something; `# expect: RT100` for a file that cannot be read). Files
whose bytes cannot carry a comment (binary, UTF-16) declare theirs in `expect.toml` beside them.
Through the API (`compile_files`) the errors in the file must be exactly those, each located and
worded as diagnostics are; through `router lint` it exits 1 and never shows a traceback. A
hypothesis test then feeds arbitrary text and arbitrary policy-shaped documents to the compiler
and the lint checks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from router.commands.cli import app
from router.compile.compiler import compile_files
from router.diagnostics.diagnostic import Severity, sort_diagnostics
from router.lint import run_checks

CORPUS = Path(__file__).parent.parent / "corpus" / "broken"
FILES = sorted(CORPUS.glob("*.yaml"))
KNOWN_BUGS: dict[str, str] = {}
SIDECAR: dict[str, str] = tomllib.loads((CORPUS / "expect.toml").read_text(encoding="utf-8"))
EXPECT_LINE = re.compile(rb"# expect: (.+)")
EXPECTED_ITEM = re.compile(r"(RT\d{3})(?: (\d+):(\d+))?")

Expected = tuple[str, int | None, int | None]


def expected_errors(path: Path) -> list[Expected]:
    """The errors a corpus file declares: (code, line, col), line and col None where not given."""
    match = EXPECT_LINE.match(path.read_bytes().split(b"\n", 1)[0])
    text = match.group(1).decode("ascii") if match else SIDECAR.get(path.name)
    assert text, f"{path.name}: first line `# expect: CODE LINE:COL`, or an entry in expect.toml"
    items = []
    for item in text.split(","):
        parsed = EXPECTED_ITEM.fullmatch(item.strip())
        assert parsed, f"{path.name}: cannot read {item.strip()!r} (expected `RT123 4:5` or `RT123`)"
        code, line, col = parsed.groups()
        items.append((code, int(line) if line else None, int(col) if col else None))
    return items


def corpus_codes() -> set[str]:
    """Every code some corpus file declares (tests/diagnostics/test_code_coverage.py counts them)."""
    return {code for path in FILES for code, _, _ in expected_errors(path)}


def _param(path: Path) -> Any:
    reason = KNOWN_BUGS.get(path.name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.name, marks=marks)


def test_corpus_is_large_enough() -> None:
    assert len(FILES) >= 40
    assert set(KNOWN_BUGS) <= {p.name for p in FILES}
    assert set(SIDECAR) <= {p.name for p in FILES}


def test_expected_errors_reads_the_declaration(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("# expect: RT207 6:17, RT100\nrules: []\n", encoding="utf-8")
    assert expected_errors(path) == [("RT207", 6, 17), ("RT100", None, None)]
    path.write_text("rules: []\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="first line"):
        expected_errors(path)


@pytest.mark.parametrize("path", [_param(p) for p in FILES])
def test_corpus_file_yields_located_error_through_api(path: Path) -> None:
    policy, diagnostics = compile_files([("file", path)])
    errors = sort_diagnostics(d for d in diagnostics if d.severity is Severity.ERROR)
    assert policy is None and errors
    here = [d for d in errors if d.span is not None and Path(d.span.path).resolve() == path.resolve()]
    expected = expected_errors(path)
    shown = [f"{d.code} {d.span}: {d.message}" for d in here]
    assert [d.code for d in here] == [code for code, _, _ in expected], shown
    for diag, (_, line, col) in zip(here, expected, strict=True):
        assert diag.span is not None, shown
        assert line is None or (diag.span.line, diag.span.col) == (line, col), shown
    for diag in errors:
        assert diag.code.startswith("RT") and len(diag.code) == 5
        assert diag.span is not None and diag.span.path
        assert diag.span.line >= 1 and diag.span.col >= 1
        first = diag.message.split()[0]
        assert not first[0].isupper() or first.isupper(), diag.message  # lower case, or an acronym
        assert not diag.message.endswith(".")
    assert any(Path(d.span.path).resolve() == path.resolve() for d in errors)


@pytest.mark.parametrize("path", [_param(p) for p in FILES])
def test_corpus_file_lint_cli_exit_1_without_traceback(path: Path) -> None:
    result = CliRunner().invoke(app, ["lint", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stdout.splitlines()
    assert any(line.split(":")[0].endswith(path.name) and ": error: " in line for line in lines), (
        result.output
    )
    assert f"[{expected_errors(path)[0][0]}]" in result.stdout
    assert lines[-1].startswith("Found ") and " error" in lines[-1]
    assert result.stderr.startswith("policy: ")  # the files linted, on stderr


def test_corpus_lint_through_real_entry_point() -> None:
    paths = [str(p) for p in FILES if p.name not in KNOWN_BUGS]
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "router", "lint", *paths],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=Path(__file__).parent.parent.parent,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-2000:]
    assert "Traceback" not in output and "internal error" not in output
    for path in paths:
        assert Path(path).name in output


def test_corpus_lint_json_format_lists_every_file() -> None:
    paths = [str(p) for p in FILES if p.name not in KNOWN_BUGS][:10]
    result = CliRunner().invoke(app, ["lint", "--format", "json", *paths])
    body = json.loads(result.stdout)
    assert result.exit_code == 1 and body["errors"] >= 10
    assert {Path(d["path"]).name for d in body["diagnostics"]} == {Path(p).name for p in paths}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the fuzz tests' policy file (module-scoped: Hypothesis runs many examples)."""
    return tmp_path_factory.mktemp("router-fuzz")


def _compile_and_lint(scratch: Path, text: str) -> None:
    path = scratch / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    policy, diagnostics = compile_files([("file", path)])
    for diag in diagnostics:
        assert diag.span is None or (diag.span.line >= 1 and diag.span.col >= 1)
    if policy is not None:
        run_checks(policy)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
def test_compile_files_arbitrary_text_never_raises(scratch: Path, text: str) -> None:
    _compile_and_lint(scratch, text)


EVENTS = ["input", "turn_end", "tool_call", "before_agent_start", "context", "route", "question", "nope"]
EXPRESSIONS = [
    "text == 'x'",
    "lower(text) == 'y'",
    "usage.percent > 90",
    "state.band == 'react'",
    "signals.s > 0.5",
    "vars.v + 1",
    "count_keywords(text, ['a', 'b']) > 1",
    "regex(text, '(a+)+')",
    "tool.name in ['bash']",
    "text.lower()",
    "x +",
    "{p:.2f}",
    "not state.done",
    "utf16_len(text) > 120",
    "clamp(1, 2)",
    "nope(1)",
    "text == `1`",
    "length(text) > `3`",
    "tools.active[0] == 'read'",
    "model.cost.input > `1`",
    "'{text}'",
    "p={signals.s:.1f}",
    "",
    "  ",
    "__class__",
    "1 if a else 2",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.sampled_from(EXPRESSIONS),
    st.text(max_size=8),
)
KEYS = [
    "id",
    "on",
    "when",
    "match",
    "do",
    "continue",
    "shadow",
    "group",
    "enabled",
    "before",
    "after",
    "examples",
    "event",
    "expect",
    "fires",
    "state",
    "signals",
    "notify",
    "set",
    "unset",
    "tools",
    "only",
    "model",
    "text",
    "expr",
    "fallback",
    "transform",
    "classify",
    "questions",
    "env",
    "type",
    "vars",
    "rules",
    "use",
    "disable",
    "bogus",
]
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
actions = st.dictionaries(
    st.sampled_from(
        ["notify", "set", "unset", "log", "tools", "model", "section", "block", "compact", "bogus"]
    ),
    values,
    min_size=1,
    max_size=1,
)
rules = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "c", "bad id"]),
        "on": st.one_of(st.sampled_from(EVENTS), st.lists(st.sampled_from(EVENTS), min_size=1, max_size=2)),
    },
    optional={
        "when": st.sampled_from(EXPRESSIONS),
        "match": st.sampled_from(EXPRESSIONS),
        "do": st.lists(actions, max_size=3),
        "continue": st.booleans(),
        "shadow": st.booleans(),
        "group": st.sampled_from(["g", "h"]),
        "after": st.sampled_from(["a", "b", "zz"]),
        "examples": st.lists(
            st.fixed_dictionaries(
                {
                    "event": st.fixed_dictionaries(
                        {"type": st.sampled_from(EVENTS)}, optional={"text": scalars}
                    ),
                    "expect": st.fixed_dictionaries({}, optional={"fires": st.booleans()}),
                }
            ),
            max_size=2,
        ),
        "bogus": values,
    },
)
policies = st.fixed_dictionaries(
    {},
    optional={
        "version": st.sampled_from([1, 2, "1"]),
        "rules": st.lists(rules, max_size=4),
        "vars": st.dictionaries(st.sampled_from(["v", "w"]), values, max_size=2),
        "signals": st.dictionaries(
            st.sampled_from(["s", "t"]),
            st.dictionaries(
                st.sampled_from(["expr", "fallback", "transform", "complete", "bogus"]),
                st.sampled_from(EXPRESSIONS),
                max_size=2,
            ),
            max_size=2,
        ),
        "disable": st.lists(st.sampled_from(["a", "zz"]), max_size=2),
        "env": values,
        "bogus": values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=policies)
def test_compile_files_policy_shaped_documents_never_raise(scratch: Path, document: dict[str, Any]) -> None:
    _compile_and_lint(scratch, json.dumps(document, allow_nan=True))
