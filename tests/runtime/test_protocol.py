"""router.runtime.protocol: one JSON object per line, split on `\\n` only; non-objects are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.runtime import protocol

# JSON-like values as the bridge sends them (text without lone surrogates: those are tested below).
SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20) | st.floats(
    allow_nan=False, allow_infinity=False)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
MESSAGES = st.dictionaries(st.text(max_size=8), VALUES, max_size=5)


@settings(max_examples=100, deadline=None)
@given(MESSAGES)
def test_encode_decode_any_object_round_trips_as_one_line(message: dict[str, Any]) -> None:
    line = protocol.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert protocol.decode(line) == message


def test_encode_line_separators_inside_strings_stay_raw_and_survive() -> None:
    message = {"id": 1, "method": "event", "params": {"text": "a\u2028b\u2029c\nd"}}
    line = protocol.encode(message)
    assert "\u2028".encode() in line and "\u2029".encode() in line
    assert line.split(b"\n")[1:] == [b""]  # the only `\n` is the terminator; the string's one is escaped
    assert protocol.decode(line.split(b"\n")[0]) == message


def test_encode_is_compact_utf8() -> None:
    assert protocol.encode({"a": [1, "é"]}) == '{"a":[1,"é"]}\n'.encode()


def test_encode_unknown_objects_as_strings() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert protocol.decode(protocol.encode({"x": Thing()})) == {"x": "thing"}


@pytest.mark.parametrize("line", [b"[]", b"[1, 2]", b"3", b'"text"', b"null", b"true"])
def test_decode_non_object_line_refused(line: bytes) -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        protocol.decode(line)


@pytest.mark.parametrize("line", [b"", b"{", b"not json", b'{"a": 1} trailing', b"\xff\xfe{}"])
def test_decode_invalid_line_raises_value_error(line: bytes) -> None:
    with pytest.raises(ValueError):
        protocol.decode(line)


def test_decode_accepts_crlf_and_escaped_lone_surrogate() -> None:
    assert protocol.decode(b'{"a": 1}\r\n') == {"a": 1}
    assert protocol.decode(b'{"t": "\\ud800"}') == {"t": "\ud800"}


def test_result_and_error_shapes() -> None:
    assert protocol.result(7, {"actions": []}) == {"id": 7, "result": {"actions": []}}
    assert protocol.error("s1", "internal", "boom") == {"id": "s1", "error": {"code": "internal",
                                                                               "message": "boom"}}


def test_constants_match_docs() -> None:
    assert protocol.PROTOCOL_VERSION == 1
    assert protocol.MAX_LINE_BYTES == 64 * 1024 * 1024
    methods = {protocol.HELLO, protocol.EVENT, protocol.SHUTDOWN, protocol.CLASSIFY, protocol.COMPLETE,
               protocol.ASK, protocol.PROGRESS, protocol.LOG}
    assert methods == {"hello", "event", "shutdown", "classify", "complete", "ask", "progress", "log"}


def test_encode_lone_surrogate_from_the_bridge_round_trips() -> None:
    message = protocol.decode(b'{"id": 1, "result": {"text": "cut emoji \\ud83d"}}')
    assert protocol.decode(protocol.encode(message)) == message
    json.loads(protocol.encode(message))  # and the line stays valid JSON for the bridge
