"""Turn the fault-injection suite's results into docs/reliability.md.

    python3 tests/reliability/report.py --run                # run the suite, then rewrite the doc
    python3 tests/reliability/report.py RESULTS.jsonl        # rewrite the doc from a results file
    python3 tests/reliability/report.py --run RESULTS.jsonl  # both, keeping the results

Run it in the project's virtual environment (the suite starts the sidecar with this interpreter).
The results file has one JSON object per case: {case, group, tries, outcome, recovery_ms, notes,
test, status}; tests/reliability/conftest.py writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
SUITE = "tests/reliability"
COMMAND = "python3 tests/reliability/report.py --run"
GROUPS = {  # section order; the first column's header
    "guard": ("Guards under faults", "Fault"),
    "sidecar": ("The sidecar", "Fault"),
    "logs": ("Logs and the disk", "Fault"),
    "policy": ("The policy file replaced mid-session by", "Content"),
    "expression": ("Rules whose `when` is built to hang or exhaust the engine", "Expression"),
    "protocol": ("Hostile lines into `router serve`", "Line"),
    "fuzz": ("Fuzzing", "Door"),
}
OUTCOME_NAMES = {"held": "held", "lost-nothing": "lost nothing", "recovered": "recovered",
                 "blocked": "blocked, told", "native": "Pi's own behaviour, told"}
Record = dict[str, Any]

INTRO = f"""\
# Reliability

What the router does when things go wrong, measured. Every row below is a case of the
fault-injection suite (`{SUITE}/`): a real Pi 1.6.0 with the bridge against the loopback fake
provider, or the engine's own doors (loader, event path, protocol) under fuzzing. The suite runs
in CI with the rest of the tests; this page is generated from one run of it:

```
{COMMAND}
```

(in the project's virtual environment; it runs `python -m pytest {SUITE}` with
`ROUTER_RELIABILITY_RESULTS` set, then rewrites this file; `report.py RESULTS.jsonl` only rewrites it).

Each case asserts that Pi kept answering (the prompt completed and the fake provider got the
request), that the user was told (a warning notification over RPC, a `[router]` line on stderr in
print mode, or a `router.log` line where that is the documented channel), and that nothing already
logged was lost (`bridge.log`, `router.log` and the audit log only grow, in whole lines).

Outcomes:

- **held**: the engine kept answering; no outage. The time runs from the fault to the engine's
  next answer (a warning, or the turn going on).
- **lost nothing**: something failed (a write, a log), the agent went on, and nothing already
  written was lost or left half-written. The time is the first answer once the fault was lifted.
- **blocked, told**: a guard under a fault (the user's policy blocks `git push -f`; the engine is
  killed, stopped or missing while the model runs it): the command did not run, the model read a
  refusal, the user was warned. The time is what the fault cost the prompt, from the prompt to its
  end. **Pi's own behaviour, told**: a routing event under the same fault went on natively.
- **recovered**: an outage (the sidecar died, hung or spoke garbage): Pi answered natively, the
  user was warned, and the engine came back. The time runs from the fault to the bridge's "policy
  engine is back" (its next successful `hello`); a hang is only found by the next event, so it
  includes that event's deadline (1.5 s, or a signal's own budget).

- **fails today (xfail)**: the case fails on the branch this page was generated from; its mark
  names the work that fixes it (see "Marked xfail" below), and the notes say what happens today.

Times are measured, never asserted; the median is over the tries of a case.
"""


FAIL_CLOSED_ROWS = [  # (case, what the engine does, the test that holds it)
    ("a rule past its own allowance, or whose `match`/`when` fails",
     "that rule fails alone, with a warning naming the rule, `file:line` and RT404 or the error's "
     "code; the rules after it run",
     "tests/engine/test_fail_closed.py::test_a_rule_past_its_own_budget_fails_alone_and_the_block_after_it_"
     "still_runs"),
    ("a guard that fails (its condition, its allowance, its reason's template)",
     "treated as matched: it refuses, with a reason that names the rule, the cause and the way out "
     "(fix it, `router explain`, or `shadow: true`)",
     "tests/engine/test_fail_closed.py::test_a_block_rule_whose_condition_fails_blocks"),
    ("the event's budget used up",
     "every remaining guard refuses unevaluated; the remaining rules that cannot block are skipped, "
     "with one warning",
     "tests/engine/test_fail_closed.py::test_when_the_events_budget_is_used_up_guards_block_and_the_others_"
     "are_skipped"),
    ("a `shadow: true` guard that fails", "never refuses",
     "tests/engine/test_fail_closed.py::test_a_shadow_guard_never_blocks_even_failed"),
    ("`router explain` of a failed guard", "a trace line `rule ID: failed closed, it can block: CAUSE`",
     "tests/engine/test_fail_closed.py::test_router_explain_shows_a_guard_that_failed_closed"),
]


FAIL_CLOSED = """\
## Guards fail closed (issue 22)

A guard is a rule that can refuse what the event asks for: its actions include one the action
registry declares `refuses` (`block` on `tool_call`, `cancel` on `compaction_before`). Every rule
is evaluated with its own allowance of the event's budget, the smaller of the per-rule limits
(250 ms and 20,000,000 characters and items built) and what the event has left; time is wall
time. What happens when a rule cannot be checked:

| Case | What the engine does | Test |
|---|---|---|
"""  + "".join(
    f"| {case} | {what} | {test} |\n" for case, what, test in FAIL_CLOSED_ROWS) + """\

The engine answers each event within `event_deadline_ms` (1,500 ms, announced in the `hello`
result) of reading its line; its evaluation budget is that deadline less 500 ms for everything
else, less what the line waited. A line that waited past it gets its guards' refusals at once
(tests/runtime/test_deadline.py::test_a_guard_whose_line_waited_too_long_blocks_instead_of_running_late).

"""


OUTRO = FAIL_CLOSED + """\
## Fuzzers elsewhere in the suite

Arbitrary text and policy-shaped documents through `compile_files` (tests/lint/test_corpus.py), the
normalizer alone (tests/events/test_normalize.py), expressions (tests/lang/test_expr_compiler.py), JMESPath
queries (tests/lang/test_query.py), protocol framing (tests/runtime/test_protocol.py) and one robust policy
through the interpreter (tests/engine/test_interpreter.py). The fuzzers here reuse the normalizer's
payload strategies and add what those do not reach: YAML's own alphabet, the built-in packs, and
a running sidecar.

## Layers that fail apart (engine tests)

Held by engine-level tests outside this suite, not timed here:

- An untrusted project policy is never parsed: the trust decision hashes the files the trust
  record lists before any YAML is read, so 6.9 KB of 200 chained merge keys (which took the
  sidecar 9.2 s, past its start budget, and the user's rules with it) leaves the user's block
  rule in force
  (tests/runtime/test_server.py::test_an_untrusted_merge_key_bomb_is_not_parsed_and_the_users_guard_holds).
- Merge keys count like aliases: each merged mapping and each value it brings counts towards the
  10,000 values from aliases, and merges nest at most 64 deep, so the same bomb in `router trust`
  is a located RT101 in a fraction of a second
  (tests/trust/test_trust.py::test_merge_key_bomb_through_router_trust_is_a_clear_bounded_error).
- A trusted project layer that does not load (errors, too big, a file longer than 3 s to read)
  leaves the user's, the managed and the built-in layers in force with a note naming why
  (tests/trust/test_trust.py::test_a_trusted_project_that_does_not_load_leaves_the_users_layer); a
  broken user layer leaves the managed and built-in ones
  (tests/runtime/test_server.py::test_hello_broken_user_policy_warns_and_the_built_in_layers_stay).
- A reload mid-session parses for at most 3 s: a huge valid edit keeps the policy in force with
  a notice instead of holding the prompt
  (tests/runtime/test_server.py::test_a_huge_edit_of_the_users_policy_mid_session_keeps_the_policy_in_force).
- A trusted `.pi/router.yaml` deleted mid-session stays in force until the session ends, with a
  notice
  (tests/runtime/test_server.py::test_a_trusted_policy_deleted_mid_session_stays_in_force_with_a_notice).
- A compiled policy built while a git source was missing is not cached, and a git source missing
  from the cache says `router lint`, not `router trust`
  (tests/compile/test_policy_cache.py::test_a_new_machine_opening_pi_before_lint_and_trust_then_after_them).

## How the faults are made

- Sidecar faults signal the real `router serve` child of Pi (found through /proc, pinned by a
  pidfd). A garbage-speaking sidecar is `tests/reliability/fake_sidecar.py`, started by the
  bridge through `ROUTER_SERVE`.
- The hostile expressions run in the real sidecar under a 1.5 GiB address-space limit
  (`fake_sidecar.py limited`), so a runaway cannot take the machine's memory.
- The full disk is a 64 KiB tmpfs mounted on `<agent dir>/router` and filled to the last byte;
  the read-only case remounts it read-only mid-session. Both are skipped where `mount` is not
  permitted.
- Eight `pi -p` processes share one agent dir and write lines of about 1 KB to the same
  `router.log` and audit log at once; their time is the wall time of all eight runs.

## Seen, not asserted

- A failed write to `bridge.log` (the bridge's own log) is never reported; `router.log`'s are
  (the "router.log is …" cases).
- A sidecar line without a newline is buffered by the bridge until it ends or the event's
  deadline passes: the 72 MiB case notes how much Pi's memory grew meanwhile.
"""


def load(path: Path) -> list[Record]:
    """The records of a results file; a case seen twice keeps its last record."""
    records: dict[str, Record] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            records[str(record.get("test") or record["case"])] = record
    return list(records.values())


def cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def timing(values: list[float]) -> str:
    """Median, and the range when there is more than one try."""
    if not values:
        return ""
    median = round(statistics.median(values))
    if len(values) == 1:
        return f"{median} ms"
    return f"{median} ms ({round(min(values))}–{round(max(values))})"


def outcome(record: Record) -> str:
    """The outcome's name as the page shows it."""
    status, result = record.get("status"), str(record.get("outcome"))
    if status == "xfail":
        return "fails today (xfail)"
    if status == "failed":
        return "FAILED"
    if status == "skipped":
        return "skipped"
    name = OUTCOME_NAMES.get(result, result)
    return f"{name} (xpass)" if status == "xpass" else name


MACHINE_PATH = re.compile(r"(?:/[^\s/'\"()\[\]]+)+/")


def notes(record: Record, limit: int = 220) -> str:
    """The notes, without this machine's directories, shortened."""
    text = MACHINE_PATH.sub("…/", str(record.get("notes") or ""))
    return cell(text if len(text) <= limit else text[: limit - 1] + "…")


def table(records: list[Record], first: str) -> list[str]:
    lines = [f"| {first} | Tries | Outcome | Time (median) | Notes |", "|---|---:|---|---:|---|"]
    for record in records:
        lines.append(f"| {cell(record['case'])} | {record.get('tries', 0)} | {outcome(record)} | "
                     f"{timing(record.get('recovery_ms') or [])} | {notes(record)} |")
    return lines


def totals(records: list[Record]) -> list[str]:
    counts = Counter(outcome(r) for r in records)
    tries = sum(int(r.get("tries") or 0) for r in records)
    parts = [f"{n} {name}" for name, n in sorted(counts.items(), key=lambda item: -item[1])]
    recovered = [value for r in records
                 if r.get("outcome") == "recovered" and r.get("status") in ("passed", "xpass")
                 for value in r.get("recovery_ms") or []]
    lines = [f"**Totals**: {len(records)} cases, {tries} tries: {', '.join(parts)}."]
    if recovered:
        lines.append(f"Recovery over all recovered tries: median {round(statistics.median(recovered))} ms, "
                     f"slowest {round(max(recovered))} ms.")
    return lines


def pending(records: list[Record]) -> list[str]:
    """The cases marked xfail on this run, by the reason of their mark."""
    waiting = [r for r in records if r.get("xfail")]
    if not waiting:
        return ["No case is marked xfail."]
    lines = [f"{len(waiting)} cases are marked `xfail(strict=False)` because they fail on the branch "
             "this page was generated from; once the work a mark names is merged, remove the mark and "
             "regenerate this page."]
    for reason in dict.fromkeys(str(r["xfail"]) for r in waiting):
        lines += ["", f"{reason[0].upper()}{reason[1:]}:", ""]
        for record in (r for r in waiting if r["xfail"] == reason):
            title = GROUPS.get(str(record.get("group")), ("Other", ""))[0]
            state = "" if record.get("status") == "xfail" else f" ({record.get('status')})"
            lines.append(f"- {title}: {record['case']}{state} ({record.get('test', '')})")
    return lines


def environment() -> str:
    return (f"Generated {datetime.now(UTC).strftime('%Y-%m-%d')} on {platform.system()} "
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, Pi 1.6.0.")


def render(records: list[Record]) -> str:
    """The whole page."""
    out = [INTRO]
    for group, (title, first) in GROUPS.items():
        rows = [r for r in records if r.get("group") == group]
        if rows:
            out += [f"## {title}", "", *table(rows, first), ""]
    others = [r for r in records if r.get("group") not in GROUPS]
    if others:
        out += ["## Other cases", "", *table(others, "Case"), ""]
    out += ["## Totals", "", *totals(records), ""]
    out += ["## Marked xfail", "", *pending(records), ""]
    out += [OUTRO, environment(), ""]
    return "\n".join(out)


def run_suite(results: Path) -> int:
    """Run the suite with the results path set; return pytest's exit code."""
    env = {**os.environ, "ROUTER_RELIABILITY_RESULTS": str(results)}
    # one test at a time (-n 0): the recovery times it prints are measured without a second worker
    command = [sys.executable, "-m", "pytest", SUITE, "-q", "-n", "0",
               "-p", "no:randomly", "-p", "no:cacheprovider"]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/reliability.md from the fault-injection suite.")
    parser.add_argument("results", nargs="?", type=Path,
                        help="a results file (JSON lines); with --run, where to keep this run's")
    parser.add_argument("--run", action="store_true", help="run the suite first")
    parser.add_argument("--out", type=Path, default=DOC, help=f"the page to write (default {DOC})")
    args = parser.parse_args(argv)
    if not args.run and args.results is None:
        parser.error("give --run, a results file, or both")
    code = 0
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        results = args.results or Path(scratch) / "results.jsonl"
        if args.run:
            results.unlink(missing_ok=True)
            code = run_suite(results)
        if not results.is_file():
            print(f"error: no results in {results}", file=sys.stderr)
            return 1
        args.out.write_text(render(load(results)), encoding="utf-8")
    print(f"wrote {args.out}" + (f" (pytest exited {code})" if code else ""))
    return code


if __name__ == "__main__":
    sys.exit(main())
