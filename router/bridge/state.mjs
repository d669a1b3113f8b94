/**
 * The two ways the bridge tells the user something (a warning, the status line). The bridge's
 * state is one part per module that keeps state, each created and written by its module
 * (index.mjs's `createState` puts them together; types.d.ts: `BridgeState`).
 */
/**
 * @import { SharedState } from "./types.js"
 */
import { attempt, logLine } from "./util.mjs";

export const STATUS_KEY = "pi-policy-router";

/**
 * A warning: in the log, and shown (a notification, or stderr without a UI).
 * @param {Pick<SharedState, "ctx">} state
 * @param {string} text
 * @returns {void}
 */
export function warn(state, text) {
	logLine(text);
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.notify(text, "warning"), undefined);
	else process.stderr.write(`[router] ${text}\n`);
}

/**
 * @param {Pick<SharedState, "ctx">} state
 * @param {string | undefined} text
 * @returns {void}
 */
export function setStatus(state, text) {
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.setStatus(STATUS_KEY, text), undefined);
}
