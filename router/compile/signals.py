"""One signal compiled (its source, request templates, transform and fallback), and the check
that signals do not depend on each other in a cycle."""

from __future__ import annotations

from typing import Any

from router.compile.context import Context
from router.compile.ir import (
    ClassifyQuestionSpec,
    CompiledSignal,
)
from router.compile.readable import (
    unused_bindings,
)
from router.compile.rules import Checker, kept_bindings, names_read, rule_bindings, template_expressions
from router.diagnostics.code_names import SIGNAL_CYCLE
from router.diagnostics.diagnostic import Span
from router.events.catalog import EVENT_TYPES
from router.events.fields import scope_tree
from router.lang.expr.expression import (
    Expression,
)
from router.load.loader import PolicyFile
from router.load.model import SIGNAL_KINDS, Signal
from router.load.source import KeyPath
from router.trust.capabilities import (
    is_confined,
)


def compile_signal(name: str, sig: Signal, f: PolicyFile, ctx: Context) -> CompiledSignal | None:
    base: KeyPath = ("signals", name)
    tree = scope_tree(EVENT_TYPES, var_names=ctx.var_names, signal_names=ctx.signal_names)
    reads = ctx.reads.setdefault(("signal", name), [])
    read: set[str] = set()
    bindings = rule_bindings(sig.let, base, tree, f.doc, ctx, None, reads, extra=frozenset({"result"}),
                             read=read)
    local = frozenset(sig.let)
    checker = Checker(ctx, tree, f.doc, None, extra_names=local, reads=reads)
    result_checker = Checker(ctx, tree, f.doc, None, extra_names=local | {"result"}, reads=reads)
    span = f.doc.span(base)
    transform = result_checker.expression(sig.transform, (*base, "transform")) if sig.transform else None
    fallback = checker.expression(sig.fallback, (*base, "fallback")) if sig.fallback else None
    if sig.expr is not None:
        expr = checker.expression(sig.expr, (*base, "expr"))
        _unused_signal_bindings(sig, [expr, transform, fallback], bindings, read, f, ctx)
        return CompiledSignal(name, "expr", span, expr=expr, transform=transform, fallback=fallback,
                              layer=f.layer, sandboxed=is_confined(f.layer), bindings=tuple(bindings))
    kind = next(k for k in SIGNAL_KINDS[1:] if getattr(sig, k) is not None)
    source: Any = getattr(sig, kind)
    raw = source.model_dump(exclude={"questions"} if kind == "classify" else set())
    request = checker.params(raw, (*base, kind))
    questions: tuple[ClassifyQuestionSpec, ...] = ()
    if kind == "classify":
        questions = tuple(
            ClassifyQuestionSpec(qname, q.type, q.instructions, q.criteria,
                                 checker.expression(q.when, (*base, kind, "questions", qname, "when"))
                                 if q.when else None)
            for qname, q in source.questions.items())
    read_by = [transform, fallback, *(q.when for q in questions), *template_expressions(request)]
    _unused_signal_bindings(sig, read_by, bindings, read, f, ctx)
    return CompiledSignal(name, kind, span, request=request, questions=questions,
                          transform=transform, fallback=fallback, layer=f.layer,
                          sandboxed=is_confined(f.layer), bindings=tuple(bindings))


def _unused_signal_bindings(sig: Signal, exprs: list[Expression | None],
                            bindings: list[tuple[str, Expression]], read: set[str], f: PolicyFile,
                            ctx: Context) -> None:
    used = read | names_read(exprs)
    name = next(n for n, s in f.policy.signals.items() if s is sig)
    kept = kept_bindings(sig.let, bindings)
    ctx.diagnostics.extend(unused_bindings(kept, used, f.doc, ("signals", name), None))


def _signal_deps(sig: CompiledSignal) -> set[str]:
    exprs: list[Expression | None] = [sig.expr, sig.fallback, *(q.when for q in sig.questions),
                                      *(e for _, e in sig.bindings)]
    exprs += template_expressions(sig.request)
    return {p[1] for e in exprs if e is not None for p in e.paths if p[0] == "signals" and len(p) > 1}




def check_signal_cycles(signals: dict[str, CompiledSignal | None], ctx: Context) -> None:
    deps = {name: _signal_deps(sig) for name, sig in signals.items() if sig is not None}
    state: dict[str, int] = {}
    for name in sorted(deps):
        _visit(name, [], deps, state, signals, ctx)


def _visit(name: str, chain: list[str], deps: dict[str, set[str]], state: dict[str, int],
           signals: dict[str, CompiledSignal | None], ctx: Context) -> None:
    """Depth first from `name` (state 1: on the path, 2: done); RT310 for each cycle found.

    A function of the module, not a closure that calls itself: such a closure is a reference
    cycle, which kept the compile context alive until the next garbage collection."""
    if state.get(name) == 2 or name not in deps:
        return
    if state.get(name) == 1:
        cycle = [*chain[chain.index(name):], name]
        sig = signals[name]
        ctx.error(SIGNAL_CYCLE, f"signals depend on each other in a cycle: {' -> '.join(cycle)}",
                  sig.span if sig else Span(""), help="break the cycle with a fallback value")
        return
    state[name] = 1
    for dep in sorted(deps[name]):
        _visit(dep, [*chain, name], deps, state, signals, ctx)
    state[name] = 2
