"""One example rule per event type, shown in docs/events.md under its event (a test compiles
each of them against the policy model)."""

from __future__ import annotations

# One example rule per event type (docs/events.md; a test compiles each of them).
EXAMPLES: dict[str, str] = {
    "input": """- id: first-task-tools
  on: input
  match: "source != 'extension' && !state.first_task_seen"
  do:
    - tools: {only: [read, edit, write]}
    - set: {first_task_seen: true}""",
    "before_agent_start": """- id: persona
  on: before_agent_start
  when: "starts_with(lower(model.id), 'deepseek')"
  do:
    - system_append: {text: "## Router\\nWork directly.", marker: "## Router"}""",
    "context": """- id: weak-guidance
  on: context
  when: "state.band == 'weak'"
  do:
    - context_message: {text: "Decide the task type first.", role: custom, position: end}""",
    "route": """- id: route-hard-to-cloud
  on: route
  match: "reason == 'user' && contains(last_user_text, '#hard')"
  do:
    - route: {model: fake/fake-cloud, thinking: medium}""",
    "turn_start": """- id: count-turns
  on: turn_start
  do: [{set: {turns: "{(state.turns or 0) + 1}"}}]""",
    "turn_end": """- id: compact-when-full
  on: turn_end
  when: "usage.percent >= 95"
  do: [{compact: {}}]""",
    "tool_call": """- id: no-force-push
  on: tool_call
  match: "tool.name == 'bash' && contains(tool.input.command, 'push --force')"
  do: [{block: "Force pushes are not allowed here."}]""",
    "tool_result": """- id: restore-tools-after-first-result
  on: tool_result
  when: "state.snapshot != null"
  do: [{tools: {only: "{state.snapshot}"}}, {unset: [snapshot]}]""",
    "model_select": """- id: note-model
  on: model_select
  do: [{notify: "Now on {model.ref} (was {previous_model.ref})"}]""",
    "thinking_level_select": """- id: remember-level
  on: thinking_level_select
  do: [{set: {user_level: "{level}"}}]""",
    "agent_settled": """- id: compact-after-run
  on: agent_settled
  when: "state.compact_pending"
  do: [{compact: {}}, {unset: [compact_pending]}]""",
    "session_start": """- id: greet
  on: session_start
  match: "reason == 'startup'"
  do: [{status: {key: router, text: "router: on"}}]""",
    "session_shutdown": """- id: restore-on-exit
  on: session_shutdown
  when: "state.snapshot != null"
  do: [{tools: {only: "{state.snapshot}"}}]""",
    "compaction_before": """- id: keep-native-compaction-out
  on: compaction_before
  when: "state.compacting and not by_router"
  do: [{cancel: {}}]""",
    "compaction_done": """- id: say-done
  on: compaction_done
  match: "by_router"
  do: [{notify: "Context compaction complete."}]""",
    "compaction_failed": """- id: say-failed
  on: compaction_failed
  do: [{notify: {text: "Context compaction failed: {error}", level: error}}]""",
    "project_trust": """- id: trust-my-projects
  on: project_trust
  match: "starts_with(cwd, '/home/user/code/')"
  do: [{trust: {trusted: 'yes', remember: true}}]""",
    "question": """- id: answer-first-option
  on: question
  do:
    - answer: {text: "Chose {questions[0].options[0].label}", value: "{questions[0].options[0].value}"}""",
    "dialog": """- id: confirm-yes
  on: dialog
  match: "kind == 'confirm'"
  do: [{answer: {value: true}}]""",
    "command": """- id: router-status
  on: command
  match: "name == 'my-router' && args == 'status'"
  do: [{notify: "band={state.band}"}]""",
}
