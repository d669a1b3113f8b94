/**
 * Forwarding one event: the snapshot of Pi's context, the `event` request, and what its result
 * asks for (stored state, new declarations, trust, warnings, the actions). Any failure means "no
 * decision": the hook returns nothing and Pi keeps its native behaviour; the lifecycle restarts
 * the sidecar.
 */
                                                                          
import { applyActions, emptyReplies,              } from "./apply.mjs";
import { declare } from "./declarations.mjs";
import { ensureStarted, EVENT_TIMEOUT_MS, lostEngine } from "./lifecycle.mjs";
import {                                        warn } from "./state.mjs";
import { AbortError } from "./transport.mjs";
import { showTrust } from "./trust.mjs";
import { attempt, errorText, logLine, modelInfo } from "./util.mjs";

export const STATE_ENTRY = "pi-policy-router.state";

export function snapshot(state             , ctx                         )           {
	const { pi } = state;
	const sm = ctx?.sessionManager;
	return {
		cwd: ctx?.cwd, mode: ctx?.mode, hasUI: !!ctx?.hasUI,
		sessionId: attempt(() => sm?.getSessionId() ?? null, null), sessionFile: attempt(() => sm?.getSessionFile() ?? null, null),
		model: modelInfo(attempt(() => ctx?.model, undefined)), thinkingLevel: attempt(() => pi.getThinkingLevel(), null),
		activeTools: attempt(() => pi.getActiveTools(), []),
		allTools: attempt(() => pi.getAllTools().map((t) => t.name), []),
		usage: attempt(() => (ctx?.getContextUsage?.() ?? null)                     , null),
	};
}

/** Send one event and apply its result; the event's replies, or undefined for "no decision". */
export async function forward(state             , type        , payload        , ctx                         ,
	options                 = {})                               {
	if (ctx) state.ctx = ctx;
	if (!state.subscribed.has(type) || !(await ensureStarted(state, state.ctx))) return undefined;
	try {
		const result = await state.sidecar.call                    ("event", { type, payload, ctx: snapshot(state, state.ctx) },
			EVENT_TIMEOUT_MS, options.signal);
		if (result?.state !== undefined && result.state !== null) {
			const stored = result.state;
			attempt(() => state.pi.appendEntry(STATE_ENTRY, { state: stored }), undefined);
		}
		if (result?.declarations) declare(state, result.declarations);
		if (result?.trust) showTrust(state, result.trust);
		for (const text of result?.warnings ?? []) warn(state, `router: ${text}`);
		const replies = emptyReplies();
		await applyActions(result?.actions ?? [], { state, ctx: state.ctx, replies, notices: options.notices });
		return replies;
	} catch (error) {
		if (error instanceof AbortError) return undefined;
		logLine(`event ${type} failed: ${errorText(error)}`);
		lostEngine(state, errorText(error));
		return undefined;
	}
}

// Generated from forward.ts by tests/bridge_js.py (types erased): edit the .ts, then run it.
