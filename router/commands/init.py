"""`router init`: write a commented starter `.pi/router.yaml` (and its schema for editors)."""

from __future__ import annotations

from pathlib import Path

from router.commands import schema
from router.commands.project_paths import refusal

STARTER = """\
# yaml-language-server: $schema=./router.schema.json
#
# Project policy for pi-policy-router (see docs/guide.md in the router's repository).
# Layers: the built-in `default` pack, then ~/.pi/agent/router.yaml, then this file. A rule here
# with the id of an earlier rule replaces it; `disable: [id]` switches one off.
# Check it with `router lint`, try an event with `router explain --event event.json`,
# and run its examples with `router test`. Pi applies it only once you trusted this exact
# content: `router trust` (again after every change), or /policy trust inside Pi.
version: 1

# Built-in packs to switch on for this project:
#   decision - answer the agent's questions and dialogs unattended (seed: pi-decision-router)
#   deepseek - first-turn tool subset and persona for DeepSeek models (pi-deepseek-router)
#   cuttle   - per-turn local/cloud routing by a classifier (pi-cuttle)
use: []

vars:
  warn_percent: 80          # warn when the context is this full

rules:
  # Rules are tried in order for each event; in a group the first match decides
  # (unless it says `continue: true`).
  - id: warn-when-context-is-full
    description: Tell the user when the context passes vars.warn_percent.
    on: turn_end
    when: "usage.percent != null and usage.percent >= vars.warn_percent"
    do:
      - notify: {text: "Context is {usage.percent:.0f}% full.", level: warning}
    examples:
      - event: {type: turn_end, usage: {percent: 85}}
        expect: {fires: true}
      - event: {type: turn_end, usage: {percent: 10}}
        expect: {fires: false}
"""


def run(cwd: Path, *, force: bool = False) -> tuple[int, str]:
    """Write `.pi/router.yaml` and `.pi/router.schema.json`; refuse to overwrite without force."""
    target = cwd / ".pi" / "router.yaml"
    if refused := refusal([target, target.parent / "router.schema.json"], cwd, "router init"):
        return 1, refused
    if target.exists() and not force:
        return 1, f"{target} already exists; use --force to overwrite it"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(STARTER, encoding="utf-8")
    (target.parent / "router.schema.json").write_text(schema.render("policy"), encoding="utf-8")
    return 0, (f"wrote {target} and {target.parent / 'router.schema.json'}\n"
               "next: router lint, then router trust (Pi applies a project policy only once you trust it)")
