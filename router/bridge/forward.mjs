/**
 * Forwarding one event: the snapshot of Pi's context, the `event` request, and what its result
 * asks for (stored state, new declarations, trust, warnings, the actions). Any failure means "no
 * decision": the hook returns nothing and Pi keeps its native behaviour; the lifecycle restarts
 * the sidecar.
 */
/**
 * @import { BridgeState, EventResult, ExtensionContext, ForwardOptions, Replies, Snapshot } from "./types.js"
 */
import { applyActions, emptyReplies } from "./apply.mjs";
import { declare } from "./declarations.mjs";
import { ensureStarted, EVENT_TIMEOUT_MS, lostEngine } from "./lifecycle.mjs";
import { warn } from "./state.mjs";
import { AbortError } from "./transport.mjs";
import { showTrust } from "./trust.mjs";
import { attempt, errorText, logLine, modelInfo } from "./util.mjs";

export const STATE_ENTRY = "pi-policy-router.state";

/**
 * @param {BridgeState} state
 * @param {ExtensionContext | null} ctx
 * @returns {Snapshot}
 */
export function snapshot(state, ctx) {
	const { pi } = state;
	const sm = ctx?.sessionManager;
	return {
		cwd: ctx?.cwd, mode: ctx?.mode, hasUI: !!ctx?.hasUI,
		sessionId: attempt(() => sm?.getSessionId() ?? null, null), sessionFile: attempt(() => sm?.getSessionFile() ?? null, null),
		model: modelInfo(attempt(() => ctx?.model, undefined)), thinkingLevel: attempt(() => pi.getThinkingLevel(), null),
		activeTools: attempt(() => pi.getActiveTools(), []),
		allTools: attempt(() => pi.getAllTools().map((t) => t.name), []),
		usage: attempt(() => /** @type {Snapshot["usage"]} */ ((ctx?.getContextUsage?.() ?? null)), null),
	};
}

/**
 * Send one event and apply its result; the event's replies, or undefined for "no decision".
 * @param {BridgeState} state
 * @param {string} type
 * @param {object} payload
 * @param {ExtensionContext | null} ctx
 * @param {ForwardOptions} [options]
 * @returns {Promise<Replies | undefined>}
 */
export async function forward(state, type, payload, ctx,
	options = {}) {
	const outcome = await decide(state, type, payload, ctx, options);
	return "failed" in outcome ? undefined : outcome.replies;
}

/**
 * What became of one event: the replies (undefined: nothing to decide, the policy has no rule for
 * it, or Pi aborted it), or why the engine could not answer (`failed`: not started, timed out,
 * crashed, refused the event), for a hook whose event may fail closed (guard.mjs).
 * @param {BridgeState} state
 * @param {string} type
 * @param {object} payload
 * @param {ExtensionContext | null} ctx
 * @param {ForwardOptions} [options]
 * @returns {Promise<{ replies: Replies | undefined } | { failed: string }>}
 */
export async function decide(state, type, payload, ctx,
	options = {}) {
	if (ctx) state.ctx = ctx;
	// before anything is declared the engine must be asked: a rule might refuse this event
	if (state.declarations.failure !== null && !state.declarations.subscribed.has(type)) return { replies: undefined };
	if (!(await ensureStarted(state, state.ctx))) return { failed: state.lifecycle.lastFailure ?? "the policy engine is not running" };
	if (!state.declarations.subscribed.has(type)) return { replies: undefined };
	try {
		const result = await /** @type {Promise<EventResult | null>} */ (state.sidecar.call("event", { type, payload, ctx: snapshot(state, state.ctx) },
			state.lifecycle.eventTimeoutMs || EVENT_TIMEOUT_MS, options.signal));
		if (result?.state !== undefined && result.state !== null) {
			const stored = result.state;
			attempt(() => state.pi.appendEntry(STATE_ENTRY, { state: stored }), undefined);
		}
		if (result?.declarations) declare(state, result.declarations);
		if (result?.trust) showTrust(state, result.trust);
		for (const text of result?.warnings ?? []) warn(state, `router: ${text}`);
		const replies = emptyReplies();
		await applyActions(result?.actions ?? [], { state, ctx: state.ctx, replies, notices: options.notices });
		return { replies };
	} catch (error) {
		if (error instanceof AbortError) return { replies: undefined };
		logLine(`event ${type} failed: ${errorText(error)}`);
		lostEngine(state, errorText(error));
		return { failed: errorText(error) };
	}
}
