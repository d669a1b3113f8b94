/**
 * Guards when the engine cannot answer (docs/security.md, "Failure policy"). For each event type
 * the policy declares `open` or `closed` (router/compile/failure.py; the bridge keeps it with the
 * declarations, from the cache or the last hello). When the engine is missing, slow, crashed or
 * refuses an event, a `closed` event is refused here, with the cause and the way out: the tool
 * call blocked, the tool result withheld. An `open` one goes on natively (the outage is told once
 * by the lifecycle). Before anything is declared (no cache entry, no answer yet) a tool call is
 * closed: a rule could have blocked it. The user's `ROUTER_FAIL_OPEN=1` opens everything.
 */
/**
 * @import { BridgeState, GuardState, FailureMode } from "./types.js"
 */
import { warn } from "./state.mjs";

/**
 * What holds before the engine or the cache declared anything.
 * @type {Readonly<Record<string, FailureMode>>}
 */
export const SAFE_DEFAULT = { tool_call: "closed" };

const WAY_OUT = "The engine restarts by itself: try again, or see /policy status and `router doctor`. "
	+ "To run without the policy, start Pi with ROUTER_FAIL_OPEN=1.";

/**
 * What was refused and why (the first sentence of the refusal, and of the user's warning).
 * @param {string} type
 * @param {string} cause
 * @returns {string}
 */
function refused(type, cause) {
	const what = type === "tool_result" ? "this tool result is withheld" : "this tool call is refused";
	return `router: the policy engine could not decide (${cause}); ${what} because the policy's guards fail closed.`;
}

/**
 * How a refused event is told to the model (the block reason, the withheld result).
 * @param {string} type
 * @param {string} cause
 * @returns {string}
 */
export function refusalText(type, cause) {
	return `${refused(type, cause)} ${WAY_OUT}`;
}

/**
 * @param {BridgeState} state
 * @param {string} type
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {FailureMode}
 */
export function failureMode(state, type, env = process.env) {
	if (/^(1|true|yes)$/i.test(env.ROUTER_FAIL_OPEN ?? "")) return "open";
	const declared = state.declarations.failure ?? SAFE_DEFAULT;
	return declared[type] === "closed" ? "closed" : "open";
}

/**
 * The refusal for a failed `type` event when it fails closed (the user told once per outage), else null.
 * @param {BridgeState} state
 * @param {string} type
 * @param {string} cause
 * @returns {string | null}
 */
export function refuseIfClosed(state, type, cause) {
	if (failureMode(state, type) !== "closed") return null;
	const text = refusalText(type, cause);
	if (!state.guard.guardTold) {
		state.guard.guardTold = true;
		warn(state, `${refused(type, cause)} Guarded events are refused until the engine is back.`);
	}
	return text;
}

/**
 * No refusal told yet (the guard part of the bridge's state).
 * @returns {GuardState}
 */
export function guardState() {
	return { guardTold: false };
}

/**
 * The engine answers again: the next outage's first refusal is told again.
 * @param {GuardState} guard
 * @returns {void}
 */
export function outageOver(guard) {
	guard.guardTold = false;
}
