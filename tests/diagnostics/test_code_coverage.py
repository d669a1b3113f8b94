"""Every catalogued code is produced by at least one test: the registry below says which.

A code in router/diagnostics/codes.py with no entry here fails `test_every_code_has_a_producer`:
add a test (or a corpus file) that makes the router emit it and asserts that code, and name it
here; or remove the code from the catalogue. Each entry is checked for evidence:

- `corpus`: a file of tests/corpus/broken/ declares the code (`# expect: …`), and
  tests/lint/test_corpus.py asserts that the file produces exactly its declared codes;
- `tests/FILE.py::FUNCTION`: the test function exists and checks the code: the code is in a
  string of one of its `assert` statements, comparisons, calls or decorators (a parametrize
  table), not merely in a comment or an assignment;
- `tests/snapshots/…`: a committed snapshot (tests/testing/test_snapshots.py, tests/lint/test_lint.py compare
  the output with it) shows the code as `[RT402]`.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from router.diagnostics.codes import CODES
from tests.lint.test_corpus import corpus_codes

ROOT = Path(__file__).resolve().parent.parent.parent

PRODUCED_BY: dict[str, str] = {
    "RT100": "corpus",
    "RT101": "corpus",
    "RT102": "corpus",
    "RT103": ("tests/compile/test_compile.py::"
              "test_policy_over_the_rule_limit_fails_fast_naming_the_limit_rt103"),
    "RT104": ("tests/runtime/test_confinement.py::"
              "test_read_text_refuses_kernel_files_and_links_out_of_a_directory"),
    "RT110": "corpus",
    "RT111": "corpus",
    "RT112": "corpus",
    "RT113": "corpus",
    "RT120": "corpus",
    "RT121": "corpus",
    "RT122": "tests/compile/test_compile.py::test_compile_unknown_rule_in_disable_rt122_warning",
    "RT123": "corpus",
    "RT124": "tests/trust/test_trust.py::test_project_layer_may_not_set_user_vars",
    "RT130": "tests/events/test_event_docs.py::test_complete_event_non_mapping_rt130",
    "RT131": "tests/events/test_event_docs.py::test_complete_event_unknown_field_located_at_its_key",
    "RT201": "corpus",
    "RT202": "corpus",
    "RT203": "corpus",
    "RT204": "corpus",
    "RT205": "corpus",
    "RT206": "corpus",
    "RT207": "corpus",
    "RT208": "corpus",
    "RT209": "corpus",
    "RT210": "corpus",
    "RT301": "corpus",
    "RT302": "corpus",
    "RT303": "corpus",
    "RT304": "corpus",
    "RT305": "corpus",
    "RT306": "tests/lint/test_lint.py::test_unreachable_rule_rt306_names_the_blocker",
    "RT307": "tests/lint/test_lint.py::test_catastrophic_regex_rt307",
    "RT308": "tests/lint/test_lint.py::test_failing_example_rt308_located_at_the_example",
    "RT309": "corpus",
    "RT310": "corpus",
    "RT311": "tests/snapshots/lint_small.txt",
    "RT312": "tests/snapshots/lint_small.txt",
    "RT313": "tests/snapshots/lint_small.txt",
    "RT314": "tests/snapshots/lint_small.txt",
    "RT315": "tests/lint/test_lint.py::test_rt315_patterns_computed_from_data_warn_rt307_checks_var_patterns",
    "RT316": "tests/trust/test_trust.py::test_project_layer_may_not_set_user_vars",
    "RT317": ("tests/lint/test_lint_mistakes.py::"
              "test_an_object_compared_with_a_text_names_the_field_to_compare"),
    "RT318": "tests/lint/test_lint_mistakes.py::test_a_file_that_sets_nothing_is_a_warning",
    "RT401": "tests/snapshots/cli/explain_errors.out",
    "RT402": "tests/snapshots/cli/explain_errors.out",
    "RT403": "tests/snapshots/cli/explain_errors.out",
    "RT404": "tests/snapshots/cli/explain_errors.out",
    "RT501": "tests/runtime/test_server.py::test_no_environment_value_reaches_a_log",
    "RT502": "tests/runtime/test_server.py::test_event_failed_signal_uses_fallback_and_logs",
    "RT503": "tests/runtime/test_server.py::test_reload_that_raises_keeps_the_last_good_policy",
    "RT601": "tests/compile/test_capabilities.py::test_confined_path_refused",
    "RT602": ("tests/compile/test_capabilities.py::"
              "test_read_signals_outside_the_project_refuse_the_signal_and_its_readers"),
    "RT603": "tests/compile/test_capabilities.py::test_env_reads_need_the_users_grant",
    "RT604": "tests/compile/test_capabilities.py::test_a_project_which_signal_is_refused",
    "RT605": "tests/compile/test_capabilities.py::test_use_outside_the_project_is_refused_and_never_read",
    "RT606": ("tests/compile/test_capabilities.py::"
              "test_project_env_in_the_project_file_is_refused_and_ignored"),
    "RT607": "tests/compile/test_capabilities.py::test_a_planted_link_is_never_followed",
    "RT608": ("tests/compile/test_capabilities.py::"
              "test_a_project_rule_answering_the_trust_prompt_is_refused_rt608"),
    "RT125": ("tests/load/test_gitsrc.py::"
              "test_the_sidecar_never_fetches_a_missing_entry_is_a_refusal_naming_the_command"),
    "RT126": "tests/load/test_gitsrc.py::test_a_tampered_cache_is_refused_naming_the_source_and_the_file",
    "RT330": "tests/compile/test_readable.py::test_let_problems_are_located",
    "RT331": "tests/compile/test_readable.py::test_let_cycle_and_unused_binding",
    "RT332": "tests/compile/test_readable.py::test_over_long_expressions_warn_with_a_hint",
    "RT333": "tests/compile/test_readable.py::test_command_shorthand_mistakes_are_located",
    "RT334": "tests/compile/test_readable.py::test_command_shorthand_mistakes_are_located",
    "RT335": ("tests/compile/test_pack_declarations.py::"
              "test_the_old_top_level_keys_load_as_provides_and_lint_says_where_each_goes"),
    "RT609": ("tests/load/test_managed.py::"
              "test_a_project_cannot_disable_override_or_jump_ahead_of_a_locked_rule"),
    "RT620": "tests/compile/test_failure_policy.py::test_a_project_may_close_but_never_open_the_users_guard",
}


def test_every_code_has_a_producer() -> None:
    missing = sorted(set(CODES) - set(PRODUCED_BY))
    stale = sorted(set(PRODUCED_BY) - set(CODES))
    assert not missing, f"codes no test produces (add a test and name it in PRODUCED_BY): {missing}"
    assert not stale, f"PRODUCED_BY names codes the catalogue does not have: {stale}"


_CHECKS = (ast.Assert, ast.Compare, ast.Call)


@cache
def _asserted(path: Path) -> dict[str, str]:
    """For each top-level function of a file, the string constants of its `assert` statements,
    comparisons (`d.code == "RT308"`), calls (`only(found, "RT122")`) and decorators (parametrize
    tables): where a test checks a code, not where it only mentions one."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots = [*node.decorator_list, *(n for n in ast.walk(node) if isinstance(n, _CHECKS))]
            found[node.name] = "\n".join(c.value for root in roots for c in ast.walk(root)
                                         if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return found


def test_asserted_reads_asserts_and_decorators_only(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text('import pytest\n\n@pytest.mark.parametrize("c", ["RT999"])\ndef test_a(c):\n'
                    '    note = "RT997"\n    assert c\n\ndef test_b(x):\n    assert "[RT998]" in x\n',
                    encoding="utf-8")
    asserted = _asserted(path)
    assert "RT999" in asserted["test_a"] and "RT997" not in asserted["test_a"]
    assert "RT998" in asserted["test_b"]


@pytest.mark.parametrize("code", sorted(PRODUCED_BY))
def test_the_named_producer_shows_the_code(code: str) -> None:
    producer = PRODUCED_BY[code]
    if producer == "corpus":
        assert code in corpus_codes(), f"no corpus file declares {code}"
        return
    file, _, function = producer.partition("::")
    path = ROOT / file
    assert path.is_file(), f"{code}: {file} does not exist"
    if not function:
        assert f"[{code}]" in path.read_text(encoding="utf-8"), f"{file} does not show [{code}]"
        return
    asserted = _asserted(path)
    assert function in asserted and function.startswith("test"), f"{code}: {file} has no test {function}"
    assert code in asserted[function], f"{producer} asserts nothing about {code}"
