/**
 * Forwarding one event: the snapshot of Pi's context, the `event` request, and what its result
 * asks for (stored state, new declarations, trust, warnings, the actions). Any failure means "no
 * decision": the hook returns nothing and Pi keeps its native behaviour; the lifecycle restarts
 * the sidecar.
 */
import type { EventResult, ExtensionContext, Snapshot } from "./types.ts";
import { applyActions, emptyReplies, type Replies } from "./apply.ts";
import { declare } from "./declarations.ts";
import { ensureStarted, EVENT_TIMEOUT_MS, lostEngine } from "./lifecycle.ts";
import { type BridgeState, type ForwardOptions, warn } from "./state.ts";
import { AbortError } from "./transport.ts";
import { showTrust } from "./trust.ts";
import { attempt, errorText, logLine, modelInfo } from "./util.ts";

export const STATE_ENTRY = "pi-policy-router.state";

export function snapshot(state: BridgeState, ctx: ExtensionContext | null): Snapshot {
	const { pi } = state;
	const sm = ctx?.sessionManager;
	return {
		cwd: ctx?.cwd, mode: ctx?.mode, hasUI: !!ctx?.hasUI,
		sessionId: attempt(() => sm?.getSessionId() ?? null, null), sessionFile: attempt(() => sm?.getSessionFile() ?? null, null),
		model: modelInfo(attempt(() => ctx?.model, undefined)), thinkingLevel: attempt(() => pi.getThinkingLevel(), null),
		activeTools: attempt(() => pi.getActiveTools(), []),
		allTools: attempt(() => pi.getAllTools().map((t) => t.name), []),
		usage: attempt(() => (ctx?.getContextUsage?.() ?? null) as Snapshot["usage"], null),
	};
}

/** Send one event and apply its result; the event's replies, or undefined for "no decision". */
export async function forward(state: BridgeState, type: string, payload: object, ctx: ExtensionContext | null,
	options: ForwardOptions = {}): Promise<Replies | undefined> {
	if (ctx) state.ctx = ctx;
	if (!state.subscribed.has(type) || !(await ensureStarted(state, state.ctx))) return undefined;
	try {
		const result = await state.sidecar.call<EventResult | null>("event", { type, payload, ctx: snapshot(state, state.ctx) },
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
