"""load.model's `provides.prices`: a policy's price of a model, or that it is local; located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.compile.compiler import compile_files
from router.diagnostics.code_names import INVALID_VALUE, UNKNOWN_KEY
from tests.helpers import compile_ok, compile_text, write


def test_prices_compile_per_model_with_local_and_only_what_is_given(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
        version: 1
        provides:
          prices:
            openai/gpt-5: {input: 1.25, output: 10, cache_read: 0.125}
            ollama/qwen3:8b: {local: true}
    """)
    assert policy.prices == {
        "openai/gpt-5": {"input": 1.25, "output": 10.0, "cache_read": 0.125, "local": False},
        "ollama/qwen3:8b": {"local": True}}


def test_a_later_layer_replaces_a_models_price(tmp_path: Path) -> None:
    base = "version: 1\nprovides:\n  prices:\n    a/x: {input: 1}\n    a/y: {input: 2}\n"
    write(tmp_path, base, "base.yaml")
    top = write(tmp_path, "version: 1\nuse: [./base.yaml]\nprovides:\n  prices:\n    a/x: {local: true}\n",
                "top.yaml")
    policy, diagnostics = compile_files([("file", top)])
    assert policy is not None, diagnostics
    assert policy.prices == {"a/x": {"local": True}, "a/y": {"input": 2.0, "local": False}}


@pytest.mark.parametrize(("entry", "code", "where", "says"), [
    ("a/x: {input: -1}", INVALID_VALUE, (4, 18), "greater than or equal to 0"),
    ("a/x: {output: '2'}", INVALID_VALUE, (4, 19), "a valid number; got '2'"),
    ("a/x: {input: true}", INVALID_VALUE, (4, 18), "a valid number"),
    ("a/x: {cache_reed: 1}", UNKNOWN_KEY, (4, 11), "did you mean 'cache_read'?"),
    ("a/x: {}", INVALID_VALUE, (4, 10), "a price needs at least one of input, output, cache_read, "
     "cache_write (USD per million tokens), or `local: true`"),
    ("gpt-5: {input: 1}", INVALID_VALUE, (4, 5), "'gpt-5' is not a model reference (provider/id"),
])
def test_a_bad_price_is_a_located_error(tmp_path: Path, entry: str, code: str, where: tuple[int, int],
                                        says: str) -> None:
    policy, diagnostics = compile_text(tmp_path, f"version: 1\nprovides:\n  prices:\n    {entry}\n")
    assert policy is None
    [found] = [d for d in diagnostics if d.code == code]
    assert found.span is not None and (found.span.line, found.span.col) == where
    assert says in found.message + " " + (found.help or "")
