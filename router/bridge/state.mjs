/**
 * The bridge's state: one object per loaded bridge, passed to every module that reads or changes
 * it, and the two ways the bridge tells the user something (a warning, the status line).
 */
/**
 * @import { BridgeState, PiApi, SharedState } from "./types.js"
 */
import { Sidecar } from "./transport.mjs";
import { attempt, logLine } from "./util.mjs";

export const STATUS_KEY = "pi-policy-router";

/** The excerpt size until the hello says what the policy declares (the engine's neutral default, router/events/questions.py). */
export const DEFAULT_EXCERPT_ENTRIES = 10;

/**
 * A new bridge's state, each part written by the module that owns it (types.d.ts: `BridgeState`).
 * @param {PiApi} pi
 * @param {Sidecar} [sidecar]
 * @returns {BridgeState}
 */
export function createState(pi, sidecar = new Sidecar()) {
	return {
		// shared: what every module may read
		pi, sidecar, forward: async () => undefined, ctx: null,
		// lifecycle.mjs
		eventTimeoutMs: 0, shutdownMs: 0, ready: false, outage: false, failures: 0, restartTimer: null, stopping: false, starting: null,
		preloading: false, fromCache: null, cachedStart: false, preloadFailure: null, lastFailure: null,
		shownWarnings: new Set(),
		// declarations.mjs
		subscribed: new Set(), skillPaths: [], excerptEntries: DEFAULT_EXCERPT_ENTRIES,
		registered: { commands: new Set(), tools: new Set(), models: new Set(), busEvents: new Set() },
		// guard.mjs
		failure: null, guardTold: false,
		// dialogs.mjs
		nativeUi: null, pendingCustom: null,
		// panel.mjs
		tuiKit: null, openPanels: new Map(), refreshing: new Set(),
		// apply.mjs
		routerCompaction: false, compactionQueued: null, unknownActions: new Set(),
		// hooks.mjs
		toolActivity: false,
		// trust.mjs
		trustStatus: null, approvedDigest: null, helloAnswered: false,
	};
}

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
