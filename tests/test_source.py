"""router.source: YAML with the 1-based position of every key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.errors import SourceError
from router.source import format_key_path, parse_source, read_source

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
