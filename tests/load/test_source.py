"""router.load.source: YAML with the 1-based position of every key and value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.errors import SourceError
from router.load.file_reading import MAX_FILE_BYTES
from router.load.source import format_key_path, parse_source, read_source
from router.load.yaml_data import MAX_DEPTH, MAX_NODES

POLICY = """\
version: 1
rules:
  - id: first
    on: [input, turn_end]
    when: "text == 'x'"
    do:
      - notify: {text: hi}
  - id: second
    on: input
    match: |
      text == 'y'
"""


def _errors(text: str) -> list[tuple[str, int, int]]:
    with pytest.raises(SourceError) as info:
        parse_source(text, "p.yaml")
    return [(d.code, d.span.line, d.span.col) for d in info.value.diagnostics if d.span]


def test_parse_source_top_level_keys_and_values_one_based() -> None:
    doc = parse_source(POLICY, "p.yaml")
    assert doc.key_pos[("version",)] == (1, 1)
    assert doc.value_pos[("version",)] == (1, 10)
    assert doc.key_pos[("rules",)] == (2, 1)
    assert doc.value_pos[()] == (1, 1)


def test_parse_source_nested_keys_and_values_located() -> None:
    doc = parse_source(POLICY, "p.yaml")
    assert doc.value_pos[("rules", 0)] == (3, 5)
    assert doc.key_pos[("rules", 0, "id")] == (3, 5)
    assert doc.value_pos[("rules", 0, "id")] == (3, 9)
    assert doc.value_pos[("rules", 0, "on", 1)] == (4, 17)
    assert doc.key_pos[("rules", 0, "do", 0, "notify", "text")] == (7, 18)
    assert doc.value_pos[("rules", 0, "do", 0, "notify", "text")] == (7, 24)
    assert doc.key_pos[("rules", 1, "match")] == (10, 5)


def test_parse_source_scalars_typed_like_yaml() -> None:
    doc = parse_source("a: 1\nb: 1.5\nc: true\nd: null\ne: '1'\nf: x\n", "p.yaml")
    assert doc.data == {"a": 1, "b": 1.5, "c": True, "d": None, "e": "1", "f": "x"}


@pytest.mark.parametrize("text", ["._", "a: ._", "- ._\n- 1_0.5_"])
def test_parse_source_scalar_ruamel_cannot_convert_stays_text(text: str) -> None:
    data = parse_source(text, "p.yaml").data
    values = data if isinstance(data, list) else [data] if isinstance(data, str) else list(data.values())
    assert values[0] == "._"


def test_span_missing_path_falls_back_to_closest_parent() -> None:
    doc = parse_source(POLICY, "p.yaml")
    span = doc.span(("rules", 0, "nope", 3))
    assert (span.path, span.line, span.col) == ("p.yaml", 3, 5)


def test_span_key_flag_points_at_the_key() -> None:
    doc = parse_source(POLICY, "p.yaml")
    assert (doc.span(("rules", 0, "when"), key=True).line, doc.span(("rules", 0, "when"), key=True).col) == (
        5,
        5,
    )
    assert doc.span(("rules", 0, "when")).col == 11


def test_span_in_quoted_scalar_skips_the_quote() -> None:
    doc = parse_source(POLICY, "p.yaml")
    span = doc.span_in(("rules", 0, "when"), 5)
    assert (span.line, span.col) == (5, 17)


def test_span_in_block_scalar_points_at_next_line() -> None:
    doc = parse_source(POLICY, "p.yaml")
    span = doc.span_in(("rules", 1, "match"), 3)
    assert span.line == 11


def test_parse_source_duplicate_key_rt102_at_second_key() -> None:
    assert _errors("a: 1\nb: 2\na: 3\n") == [("RT102", 3, 1)]


def test_parse_source_duplicate_key_in_flow_mapping_rt102() -> None:
    assert _errors("x: {a: 1, a: 2}\n") == [("RT102", 1, 11)]


def test_parse_source_duplicate_nested_keys_all_reported() -> None:
    text = "rules:\n  - id: a\n    id: b\n  - on: x\n    on: y\n"
    assert _errors(text) == [("RT102", 3, 5), ("RT102", 5, 5)]


def test_parse_source_unclosed_bracket_rt101_with_line_col() -> None:
    found = _errors("rules:\n  - id: x\n    on: [input\n")
    assert len(found) == 1 and found[0][0] == "RT101" and found[0][1] >= 3


def test_parse_source_bad_indentation_rt101_located() -> None:
    with pytest.raises(SourceError) as info:
        parse_source("a:\n  b: 1\n c: 2\n", "p.yaml")
    diag = info.value.diagnostics[0]
    assert diag.code == "RT101" and diag.span is not None
    assert (diag.span.line, diag.span.col) == (3, 2)
    assert diag.message.startswith("invalid YAML")


def test_parse_source_tab_indentation_rt101() -> None:
    assert _errors("a:\n\tb: 1\n")[0][:2] == ("RT101", 2)


def test_parse_source_merge_key_explicit_keys_win() -> None:
    doc = parse_source(
        "base: &b {x: 1, y: 1}\nmore: &m {z: 3, x: 9}\nother:\n  <<: [*b, *m]\n  y: 2\n", "p.yaml"
    )
    assert doc.data["other"] == {"x": 1, "y": 2, "z": 3}
    assert doc.value_pos[("other", "y")] == (5, 6)


def test_parse_source_merge_key_position_follows_the_value() -> None:
    doc = parse_source("base: &b {x: 1}\nmore: &m {x: 9}\nother:\n  <<: [*b, *m]\n", "p.yaml")
    assert doc.data["other"] == {"x": 1}
    assert doc.value_pos[("other", "x")][0] == 1


@pytest.mark.parametrize("text", ["a:\n  <<: 1\n", "a:\n  <<: [1]\n", "a:\n  <<: [[x]]\n"])
def test_parse_source_merge_of_non_mapping_rt101(text: str) -> None:
    found = _errors(text)
    assert found and found[0][:2] == ("RT101", 2)


def test_parse_source_undefined_alias_rt101() -> None:
    assert _errors("a: *nope\n")[0][0] == "RT101"


def test_parse_source_second_document_rt101() -> None:
    assert _errors("a: 1\n---\nb: 2\n")[0][:2] == ("RT101", 2)


def test_parse_source_complex_key_refused_rt101() -> None:
    assert _errors("? [a, b]\n: 1\n") == [("RT101", 1, 3)]


def test_parse_source_deep_nesting_refused_rt101() -> None:
    text = "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v\n"
    found = _errors(text)
    assert found and found[0][0] == "RT101"


def test_parse_source_deep_flow_nesting_refused_without_recursion() -> None:
    found = _errors("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert found[0][0] == "RT101"


def test_parse_source_nesting_of_64_levels_accepted() -> None:
    doc = parse_source("a: " + "[" * 60 + "]" * 60 + "\n", "p.yaml")
    assert isinstance(doc.data["a"], list)


def test_parse_source_self_referencing_alias_refused() -> None:
    assert _errors("a: &x [*x]\n")[0][0] == "RT101"


def _laughs(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_parse_source_alias_bomb_refused_rt101() -> None:
    with pytest.raises(SourceError) as info:
        parse_source(_laughs(5), "p.yaml")  # 6 lines expanding to 123,456 nodes
    assert info.value.diagnostics[0].code == "RT101"


def test_parse_source_control_character_rt101() -> None:
    with pytest.raises(SourceError) as info:
        parse_source("rules:\n  - id: a\x07b\n", "p.yaml")
    assert info.value.diagnostics[0].code == "RT101"


def test_parse_source_control_character_located_on_one_line() -> None:
    with pytest.raises(SourceError) as info:
        parse_source("rules:\n  - id: a\x07b\n", "p.yaml")
    diag = info.value.diagnostics[0]
    assert (diag.span.line, diag.span.col) == (2, 10) and "\n" not in diag.message


def test_parse_source_python_tags_stay_plain_strings() -> None:
    doc = parse_source("a: !!python/object/apply:os.system ['true']\nb: !custom 1\n", "p.yaml")
    assert doc.data == {"a": ["true"], "b": "1"}


def test_parse_source_empty_text_is_none() -> None:
    assert parse_source("", "p.yaml").data is None
    assert parse_source("# only a comment\n", "p.yaml").data is None


def test_parse_source_unicode_keys_and_values_located() -> None:
    doc = parse_source('名前: 値\né: "😀"\n', "p.yaml")
    assert doc.data == {"名前": "値", "é": "😀"}
    assert doc.value_pos[("é",)] == (2, 4)


def test_read_source_non_utf8_file_rt100(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SourceError) as info:
        read_source(path)
    diag = info.value.diagnostics[0]
    assert diag.code == "RT100" and diag.span is not None and diag.span.path == str(path)


def test_read_source_missing_file_rt100(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as info:
        read_source(tmp_path / "nope.yaml")
    diag = info.value.diagnostics[0]
    assert diag.code == "RT100" and "not found" in diag.message


def test_read_source_directory_rt100(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as info:
        read_source(tmp_path)
    assert info.value.diagnostics[0].code == "RT100"


def test_read_source_display_path_used_in_spans(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("a: [1\n", encoding="utf-8")
    with pytest.raises(SourceError) as info:
        read_source(path, display="shown.yaml")
    assert info.value.diagnostics[0].span.path == "shown.yaml"


def test_read_source_crlf_line_endings_same_positions(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(POLICY.replace("\n", "\r\n").encode())
    doc = read_source(path)
    assert doc.value_pos[("rules", 0, "when")] == (5, 11)


@pytest.mark.parametrize(
    ("parts", "text"),
    [
        (("rules", 3, "when"), "rules[3].when"),
        ((), ""),
        ((0, "a"), "[0].a"),
        (("vars", "x", "env"), "vars.x.env"),
    ],
)
def test_format_key_path_renders_dotted_and_indexed(parts: tuple[str | int, ...], text: str) -> None:
    assert format_key_path(parts) == text


# --- limits checked before the composer -------------------------------------------------------------


def _diagnostic(path: Path) -> Diagnostic:
    with pytest.raises(SourceError) as info:
        read_source(path)
    (diagnostic,) = info.value.diagnostics
    return diagnostic


def test_read_source_larger_than_the_limit_refused_without_parsing_rt103(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    rule = "  - {id: r, on: input, when: \"text == 'some text to make the rule longer'\"}\n"
    path.write_text("rules:\n" + rule * (MAX_FILE_BYTES // len(rule) + 1), encoding="utf-8")
    diagnostic = _diagnostic(path)
    assert diagnostic.code == "RT103" and "files of at most 4.0 MiB are read" in diagnostic.message
    assert diagnostic.span is not None and diagnostic.span.path == str(path)


@pytest.mark.parametrize(("device", "kind"), [("/dev/zero", "a device"), ("/dev/null", "a device")])
def test_read_source_devices_refused_without_reading(device: str, kind: str) -> None:
    diagnostic = _diagnostic(Path(device))
    assert diagnostic.code == "RT100" and f"{kind}, not a regular file" in diagnostic.message


def test_read_source_fifo_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)  # nobody writes to it: opening it for reading would block forever
    diagnostic = _diagnostic(fifo)
    assert diagnostic.code == "RT100" and "a FIFO, not a regular file" in diagnostic.message


def test_read_source_directory_refused(tmp_path: Path) -> None:
    assert "a directory, not a regular file" in _diagnostic(tmp_path).message


def test_read_source_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.yaml").write_text("a: 1\n", encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "real.yaml")
    assert read_source(tmp_path / "link.yaml").data == {"a": 1}


@pytest.mark.parametrize(("text", "line", "col"), [
    ("a: " + "[" * 50_000 + "]" * 50_000 + "\n", 1, 3 + MAX_DEPTH),
    ("a:\n  " + "- " * 50_000 + "x\n", 2, 3 + 2 * (MAX_DEPTH - 1)),
    ("a: " + "{b: " * 1000 + "1" + "}" * 1000 + "\n", 1, 4 + 4 * (MAX_DEPTH - 1)),
])
def test_parse_source_deep_nesting_located_before_the_composer_rt101(text: str, line: int, col: int) -> None:
    # 50,000 levels crash the C composer (it recurses per level); the event parser does not
    with pytest.raises(SourceError) as info:
        parse_source(text, "p.yaml")
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.code == "RT101" and f"deeper than {MAX_DEPTH} levels" in diagnostic.message
    assert diagnostic.span is not None and (diagnostic.span.line, diagnostic.span.col) == (line, col)


def test_parse_source_deep_nesting_in_a_subprocess_never_crashes(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("rules: " + "[" * 200_000 + "]" * 200_000 + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "router", "lint", str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1 and "[RT101]" in done.stdout and "Traceback" not in done.stderr


def test_parse_source_too_many_values_rt103() -> None:
    text = "a: [" + "1," * (MAX_NODES + 1) + "1]\n"
    with pytest.raises(SourceError) as info:
        parse_source(text, "p.yaml")
    assert info.value.diagnostics[0].code == "RT103"


@pytest.mark.parametrize(("text", "message", "line"), [
    ("base: &b\n  x: 1\n  <<: *b\n", "a merge key (<<) refers to the mapping that contains it", 3),
    ("base: &b\n  x: 1\n  <<: [*b]\n", "a merge key (<<) refers to the mapping that contains it", 3),
    ("a: &a\n  - *a\n", "an alias refers to a node that contains it (a recursive alias)", 1),
    ("a: &a {k: *a}\n", "an alias refers to a node that contains it (a recursive alias)", 1),
    ("a: &a\n  b: &b\n    <<: *a\n", "a merge key (<<) refers to the mapping that contains it", 3),
])
def test_parse_source_self_references_located_not_a_traceback(text: str, message: str, line: int) -> None:
    with pytest.raises(SourceError) as info:
        parse_source(text, "p.yaml")
    found = info.value.diagnostics
    assert [d.message for d in found] == [message] and found[0].span is not None
    assert found[0].span.line == line
