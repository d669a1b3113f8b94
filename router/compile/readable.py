"""The readability forms of the policy language: `command:` shorthand, `let:` bindings, `defaults:`.

`command:` expands to a JMESPath match (and-ed with the rule's own `match`); `let:` bindings are
compiled in order, each seeing the ones above it; `defaults:` fills the parameters an action of
the file leaves out. Errors are located at the key that causes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from router.diagnostics.code_names import (
    BAD_LET_BINDING,
    INVALID_ACTION_PARAMS,
    INVALID_COMMAND_SHORTHAND,
    UNDECLARED_COMMAND,
    UNKNOWN_ACTION,
    UNUSED_LET_BINDING,
)
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.diagnostics.suggest import did_you_mean
from router.lang.expr.expression import Expression
from router.lang.expr.syntax import CONSTANTS
from router.load.model import CommandSpec
from router.load.source import KeyPath, SourceDoc

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMMAND_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


# --- command: ---------------------------------------------------------------------------------


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _count(words: int, args: int | None, min_args: int | None) -> str | None:
    if args is not None:
        return f"length(argv) == `{words + args}`"
    if min_args is not None and words + min_args > 0:
        return f"length(argv) >= `{words + min_args}`"
    return None


def _alternative(name: str, sub: list[str] | None, args: int | None, min_args: int | None) -> str:
    parts = [f"name == {_literal(name)}"]
    if sub is None:
        count = _count(0, args, min_args)
        return " && ".join(parts + ([count] if count else []))
    options = []
    for entry in sub:
        words = entry.split()
        conditions = [f"argv[{i}] == {_literal(w)}" for i, w in enumerate(words)]
        count = _count(len(words), args, min_args) or ("length(argv) == `0`" if not words else None)
        conditions += [count] if count else []
        options.append(" && ".join(conditions))
    joined = " || ".join(f"({o})" if len(options) > 1 and " && " in o else o for o in options)
    return " && ".join([*parts, f"({joined})" if len(options) > 1 else joined])


def command_specs(raw: Any) -> list[CommandSpec | str]:
    return list(raw) if isinstance(raw, list) else [raw]


def command_name(spec: CommandSpec | str) -> str:
    return spec.split()[0] if isinstance(spec, str) and spec.split() else spec.name \
        if isinstance(spec, CommandSpec) else ""


def command_match(raw: Any) -> str:
    """The JMESPath match of a `command:` shorthand (one spec or a list of alternatives)."""
    alternatives = []
    for spec in command_specs(raw):
        if isinstance(spec, str):
            words = spec.split()
            alternatives.append(_alternative(words[0], [" ".join(words[1:])] if len(words) > 1 else None,
                                             None, None))
        else:
            sub = [spec.sub] if isinstance(spec.sub, str) else spec.sub
            alternatives.append(_alternative(spec.name, sub, spec.args, spec.min_args))
    if len(alternatives) == 1:
        return alternatives[0]
    return " || ".join(f"({a})" for a in alternatives)


def command_problems(raw: Any, on: list[str], declared: set[str], doc: SourceDoc, base: KeyPath,
                     rule_id: str) -> list[Diagnostic]:
    """RT333 for a `command:` that cannot work, RT334 for a command no file declares."""
    span = doc.span((*base, "command"))
    found: list[Diagnostic] = []
    if on != ["command"]:
        found.append(Diagnostic(INVALID_COMMAND_SHORTHAND,
                                f"`command:` matches command events, but rule '{rule_id}' is "
                                f"on {', '.join(on)}", doc.span((*base, "on")), rule_id=rule_id,
                                help="write `on: command` (and nothing else) with `command:`"))
    for index, spec in enumerate(command_specs(raw)):
        name = command_name(spec)
        where = doc.span((*base, "command", index)) if isinstance(raw, list) else span
        if isinstance(spec, str) and not _COMMAND_NAME.match(name):
            found.append(Diagnostic(
                INVALID_COMMAND_SHORTHAND,
                f"`command: {spec}` must start with a command name (lower-case letters, digits, "
                "- and _, without /)", where, rule_id=rule_id,
                help="write `command: cuttle` or `command: cuttle config set`"))
            continue
        if declared and name not in declared:
            found.append(Diagnostic(
                UNDECLARED_COMMAND, f"rule '{rule_id}' is for /{name}, which no policy file declares under "
                "`provides.commands:`", where, Severity.WARNING, rule_id=rule_id,
                help=did_you_mean(name, declared)
                or "declare it under `provides.commands:` so Pi registers it"))
    return found


# --- let: -------------------------------------------------------------------------------------


Compile = Callable[[str, KeyPath, frozenset[str]], "Expression | None"]


def compile_bindings(let: Mapping[str, str], base: KeyPath, taken: Mapping[str, str], doc: SourceDoc,
                     compile_one: Compile, rule_id: str | None, read: set[str] | None = None,
                     ) -> tuple[list[tuple[str, Expression]], list[Diagnostic]]:
    """Compile `let:` in order. `taken` maps names a binding may not use to what they are; `read`
    collects the names every binding reads (also the rejected ones), for the unused check."""
    found: list[Diagnostic] = []
    read = set() if read is None else read
    names = list(let)
    compiled: list[tuple[str, Expression]] = []
    for index, (name, source) in enumerate(let.items()):
        key_path = (*base, "let", name)
        problem = _bad_name(name, taken)
        if problem is not None:
            found.append(Diagnostic(BAD_LET_BINDING, f"let name '{name}' {problem}",
                                    doc.span(key_path, key=True),
                                    rule_id=rule_id, help="choose another name (bindings never hide "
                                    "event fields, vars, state, signals or env)"))
            continue
        if not isinstance(source, str):
            found.append(Diagnostic(BAD_LET_BINDING, f"let {name} must be an expression (a string)",
                                    doc.span(key_path), rule_id=rule_id,
                                    help=f"write `{name}: \"...\"`; a literal value goes in `vars:`"))
            continue
        expr = compile_one(source, key_path, frozenset(names))
        if expr is None:
            continue
        read.update(expr.names)
        later = sorted(expr.names & set(names[index:]))
        for other in later:
            cycle = other == name or name in _reach(other, let, names)
            what = "refers to itself" if other == name else \
                (f"and '{other}' depend on each other (a cycle)" if cycle else
                 f"uses '{other}', which is defined below it")
            found.append(Diagnostic(BAD_LET_BINDING, f"let {name} {what}", doc.span(key_path),
                                    rule_id=rule_id,
                                    help="a binding sees the bindings above it: reorder them, or "
                                    "break the cycle"))
        if not later:
            compiled.append((name, expr))
    return compiled, found


def _reach(start: str, let: Mapping[str, str], names: list[str]) -> set[str]:
    """The binding names `start` reads, transitively (by a cheap name scan, for the cycle message)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        source = let.get(todo.pop())
        if not isinstance(source, str):
            continue
        for other in names:
            if other not in seen and re.search(rf"\b{re.escape(other)}\b", source):
                seen.add(other)
                todo.append(other)
    return seen


def _bad_name(name: str, taken: Mapping[str, str]) -> str | None:
    if not NAME.match(name) or name.startswith("__"):
        return "is not a name (letters, digits and _, not starting with a digit or __)"
    if name in CONSTANTS:
        return "is a constant (true, false, null)"
    if name in taken:
        return f"is already {taken[name]}"
    return None


def unused_bindings(let: Mapping[str, str], used: set[str], doc: SourceDoc, base: KeyPath,
                    rule_id: str | None) -> list[Diagnostic]:
    """RT331 for each binding nothing reads."""
    return [Diagnostic(UNUSED_LET_BINDING, f"let {name} is never used",
                       doc.span((*base, "let", name), key=True),
                       Severity.WARNING, rule_id=rule_id, help=f"remove it, or read it as {name}")
            for name in let if name not in used]


def binding_paths(names: set[str], bindings: list[tuple[str, Expression]]) -> tuple[tuple[str, ...], ...]:
    """The field paths the bindings `names` read, through the bindings they read in turn."""
    table = dict(bindings)
    paths: list[tuple[str, ...]] = []
    seen: set[str] = set()
    todo = [n for n in names if n in table]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        paths += table[name].paths
        todo += [n for n in table[name].names if n in table]
    return tuple(paths)


# --- defaults: --------------------------------------------------------------------------------


def with_defaults(params: Any, defaults: Mapping[str, Any] | None) -> tuple[Any, frozenset[str]]:
    """The action's parameters with the file's defaults for what they leave out, and those keys."""
    if not defaults or not isinstance(params, dict):
        return params, frozenset()
    added = frozenset(k for k in defaults if k not in params)
    return {**{k: defaults[k] for k in added}, **params}, added


def defaults_problems(defaults: Mapping[str, Any], doc: SourceDoc,
                      actions: Mapping[str, Any]) -> list[Diagnostic]:
    """RT206 for a default of an unknown action, RT207 for a parameter the action does not have."""
    found: list[Diagnostic] = []
    for name, params in defaults.items():
        spec = actions.get(name)
        if spec is None:
            found.append(Diagnostic(UNKNOWN_ACTION, f"defaults for unknown action '{name}'",
                                    doc.span(("defaults", name), key=True),
                                    help=did_you_mean(name, actions) or
                                    f"expected one of: {', '.join(sorted(actions))}"))
            continue
        fields = {f.alias or k for k, f in spec.params.model_fields.items()}
        for key in params:
            if key not in fields:
                found.append(Diagnostic(INVALID_ACTION_PARAMS,
                                        f"action '{name}' has no parameter '{key}' (defaults)",
                                        doc.span(("defaults", name, key), key=True),
                                        help=did_you_mean(key, fields) or
                                        f"its parameters: {', '.join(sorted(fields))}"))
    return found
