/**
 * The bridge's state: one object per loaded bridge, passed to every module that reads or changes
 * it, and the two ways the bridge tells the user something (a warning, the status line).
 */
import type { ExtensionContext, ExtensionUIContext, Notice, PanelParams, PiApi } from "./types.ts";
import type { Replies } from "./apply.ts";
import { Sidecar } from "./transport.ts";
import { attempt, logLine } from "./util.ts";

export const STATUS_KEY = "pi-policy-router";

/** Pi's own dialogs, kept when `ctx.ui` is patched (the engine's `ask` and fallbacks use them). */
export type NativeUi = Pick<ExtensionUIContext, "select" | "confirm" | "input" | "editor"> & {
	custom: ExtensionUIContext["custom"] | null;
};

/** What `@earendil-works/pi-tui` offers the panel (imported when a panel first opens in the TUI). */
export type TuiKit = typeof import("@earendil-works/pi-tui");

export interface ForwardOptions {
	signal?: AbortSignal | undefined;
	/** Collect the result's notifications here instead of showing them (an open panel shows them). */
	notices?: Notice[] | undefined;
}

/** Send one event to the engine; undefined: no decision (Pi keeps its native behaviour). */
export type Forward = (type: string, payload: object, ctx: ExtensionContext | null, options?: ForwardOptions) => Promise<Replies | undefined>;

/** The excerpt size until the policy declares one (the engine's default, router/events/questions.py). */
export const DEFAULT_EXCERPT_ENTRIES = 12;

export interface BridgeState {
	readonly pi: PiApi;
	readonly sidecar: Sidecar;
	/** forward.ts's `forward`, bound to this state (here so that a module that forwards need not import it: no cycles). */
	forward: Forward;
	/** The latest context Pi gave a hook. */
	ctx: ExtensionContext | null;
	/** The event types the policy has rules for: only those are forwarded. */
	subscribed: Set<string>;
	/** Per event type, `open` or `closed` when the engine cannot answer (guard.ts); null before any declaration. */
	failure: Record<string, "open" | "closed"> | null;
	/** A refused guarded event was told during this outage. */
	guardTold: boolean;
	/** How long an event may wait for the engine: the deadline it announced plus the transit margin. */
	eventTimeoutMs: number;
	skillPaths: string[];
	ready: boolean;
	/** The engine failed and the user was told; cleared when it is back. */
	outage: boolean;
	failures: number;
	restartTimer: NodeJS.Timeout | null;
	stopping: boolean;
	starting: Promise<boolean> | null;
	preloading: boolean;
	/** The declarations registered from the cache (declarationsText), until the engine's hello confirms them. */
	fromCache: string | null;
	/** The factory registered from the cache: hellos run in the background (events wait for them). */
	cachedStart: boolean;
	/** Why the engine last failed to start or answer (guard.ts names it in a refusal). */
	lastFailure: string | null;
	/** Why the startup hello failed, until session_start reports it. */
	preloadFailure: string | null;
	registered: { commands: Set<string>; tools: Set<string>; models: Set<string>; busEvents: Set<string> };
	/** The excerpt size the policy declares (`excerpt_entries`). */
	excerptEntries: number;
	nativeUi: NativeUi | null;
	toolActivity: boolean;
	/** A compaction a `compact` action started is running. */
	routerCompaction: boolean;
	/** A `compact` action waiting for the agent to be idle. */
	compactionQueued: (() => void) | null;
	/** The answer the next `ctx.ui.custom` returns (an rpiv questionnaire a rule answered). */
	pendingCustom: Promise<unknown> | null;
	tuiKit: Promise<TuiKit | null> | null;
	/** Panel id → update of the open panel. */
	openPanels: Map<string, (params: PanelParams) => void>;
	/** Panels whose refresh is in flight. */
	refreshing: Set<string>;
	shownWarnings: Set<string>;
	/** Unknown actions already reported (once each). */
	unknownActions: Set<string>;
	trustStatus: string | null;
	approvedDigest: string | null;
	/** After the first hello, --approve covers only the content approved then. */
	helloAnswered: boolean;
}

export function createState(pi: PiApi, sidecar: Sidecar = new Sidecar()): BridgeState {
	return {
		pi, sidecar, forward: async () => undefined, ctx: null, subscribed: new Set(), failure: null, guardTold: false,
		eventTimeoutMs: 0, skillPaths: [],
		ready: false, outage: false, failures: 0, restartTimer: null, stopping: false, starting: null,
		preloading: false, fromCache: null, cachedStart: false, preloadFailure: null, lastFailure: null,
		registered: { commands: new Set(), tools: new Set(), models: new Set(), busEvents: new Set() },
		excerptEntries: DEFAULT_EXCERPT_ENTRIES,
		nativeUi: null, toolActivity: false, routerCompaction: false, compactionQueued: null,
		pendingCustom: null, tuiKit: null, openPanels: new Map(), refreshing: new Set(),
		shownWarnings: new Set(), unknownActions: new Set(), trustStatus: null, approvedDigest: null,
		helloAnswered: false,
	};
}

/** A warning: in the log, and shown (a notification, or stderr without a UI). */
export function warn(state: BridgeState, text: string): void {
	logLine(text);
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.notify(text, "warning"), undefined);
	else process.stderr.write(`[router] ${text}\n`);
}

export function setStatus(state: BridgeState, text: string | undefined): void {
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.setStatus(STATUS_KEY, text), undefined);
}
