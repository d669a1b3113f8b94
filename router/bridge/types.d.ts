/**
 * The protocol's message types (docs/protocol.md) and the part of Pi's API the bridge uses.
 *
 * Pi's own types come from the installed `@earendil-works/pi-coding-agent` with `import type`, so
 * nothing here exists at run time. The action parameter types are generated from the pydantic
 * models of `router/actions/` (actions.d.ts, by router/commands/bridge_types.py).
 */
import type {
	ExtensionAPI,
	ExtensionContext,
	ExtensionUIContext,
	ToolDefinition,
	VirtualModelDefinition,
} from "@earendil-works/pi-coding-agent";
import type { Api, Model } from "@earendil-works/pi-ai";
import type { Sidecar } from "./transport.mjs";
import type { ActionName, ActionParams, ContextMessageParams, PanelItem, PanelParams, RouteParams, SectionParams, SystemAppendParams } from "./actions.js";

export type { ExtensionContext, ExtensionUIContext };

/** The bridge's view of Pi's extension API: what it calls, so a test can fake exactly that. */
export type PiApi = Pick<
	ExtensionAPI,
	| "on" | "events" | "registerCommand" | "registerTool" | "registerVirtualModel" | "sendMessage" | "appendEntry"
	| "getActiveTools" | "getAllTools" | "setActiveTools" | "setModel" | "getThinkingLevel" | "setThinkingLevel"
>;

export type PiModel = Model<Api>;
export type ThinkingLevel = Parameters<ExtensionAPI["setThinkingLevel"]>[0];
export type NotifyLevel = "info" | "warning" | "error";
export type ToolSchema = ToolDefinition["parameters"];
export type ThinkingLevels = VirtualModelDefinition["thinkingLevels"];

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A message a notification would show, collected instead (an open panel shows them). */
export interface Notice {
	text: string;
	level: NotifyLevel;
}

// --- bridge → sidecar ---------------------------------------------------------------------------

/** A model as the bridge sends it: a subset of Pi's `Model`, with Pi's field names. */
export interface ModelInfo {
	provider: string;
	id: string;
	name: string;
	api: string;
	contextWindow: number;
	maxTokens: number;
	reasoning: boolean;
	input: PiModel["input"];
	cost: PiModel["cost"];
}

/** Facts about trust the engine decides on (router/trust/store.py). */
export interface TrustFacts {
	approve: boolean;
	noApprove: boolean;
	settings: { defaultProjectTrust: Json };
	approvedDigest: string | null;
	firstHello: boolean;
}

export interface RegistryFacts {
	providers: string[];
	classifiers: string[];
	/** The providers that can discover models at run time (a `refreshModels`). */
	discovering: string[];
}

export interface HelloParams extends TrustFacts {
	protocol: number;
	cwd: string;
	mode: string | null;
	hasUI: boolean;
	state: Json;
	models: ModelInfo[];
	registry?: RegistryFacts;
	preload?: boolean;
	/** At the startup hello: the bridge's key of the declarations cache (startup.mjs), for the engine to write. */
	declarationsKey?: string;
}

/** The context every event carries (`ctx` of an `event` request). */
export interface Snapshot {
	cwd: string | undefined;
	mode: string | undefined;
	hasUI: boolean;
	sessionId: string | null;
	sessionFile: string | null;
	model: ModelInfo | null;
	thinkingLevel: string | null;
	activeTools: string[];
	allTools: string[];
	usage: Json;
}

// --- sidecar → bridge ---------------------------------------------------------------------------

export interface TrustReport {
	state?: "none" | "trusted" | "untrusted" | "changed" | "approved";
	message?: string | null;
	status?: string | null;
	digest?: string | null;
}

export interface Completion {
	value: string;
	label?: string;
	description?: string;
}

export interface CommandDeclaration {
	name: string;
	description?: string;
	completions?: (string | Completion)[];
}

export interface ToolDeclaration {
	name: string;
	label?: string;
	description: string;
	prompt_snippet?: string | null;
	guidelines?: string[] | null;
	parameters: ToolSchema;
	sequential?: boolean;
	/** The tool result when no rule answers (the policy's wording; the engine fills its default). */
	no_answer: string;
}

export interface VirtualModelDeclaration {
	provider: string;
	id: string;
	name?: string | null;
	thinking_levels?: ThinkingLevels;
	context_window?: number | null;
	max_tokens?: number | null;
	/** Where a request no rule routes goes, tried in order (the engine fills its default). */
	fallback: RouteFallback[];
}

export type RouteFallback = "previous" | "first_available";

/** An event-bus protocol the policy answers: a questionnaire announced on `prompt`. */
export interface BusEventDeclaration {
	protocol: string;
	prompt: string;
	blocked?: string | null;
}

/** The policy's declarations: the `hello` result, and an event result's `declarations`. */
export interface Declarations {
	events?: string[];
	commands?: CommandDeclaration[];
	tools?: ToolDeclaration[];
	virtual_models?: VirtualModelDeclaration[];
	skills?: string[];
	bus_events?: BusEventDeclaration[];
	/** How many of the branch's last messages a question's or dialog's excerpt carries. */
	excerpt_entries?: number;
	/** Per event type, what holds when the engine cannot answer (router/compile/failure.py). */
	failure?: Record<string, "open" | "closed">;
}

export interface HelloResult extends Declarations {
	protocol: number;
	/** The engine answers an event within this many milliseconds of reading it (the bridge adds its margin). */
	event_deadline_ms?: number;
	/** How long the bridge waits for `shutdown`'s answer (the engine's telemetry flush comes before it). */
	shutdown_ms?: number;
	engine?: string;
	warnings?: string[];
	files?: string[];
	trust?: TrustReport | null;
}

/** One action the engine asks the bridge to apply. */
export interface Action {
	action: string;
	params: unknown;
	rule?: string;
}

export interface EventResult {
	actions?: Action[];
	fired?: string[];
	warnings?: string[];
	state?: Json;
	declarations?: Declarations | null;
	trust?: TrustReport | null;
}

// --- the actions' parameters: generated from the Python registry (actions.d.ts) ------------------

export type * from "./actions.js";

// --- requests from the engine -------------------------------------------------------------------

export interface ClassifyParams {
	model?: string;
	questions?: Record<string, unknown>;
	state?: Record<string, unknown>;
	timeoutMs?: number;
	maxRetries?: number;
}
export interface CompleteParams { model?: string | null; systemPrompt?: string | null; prompt?: string; timeoutMs?: number }
export interface AskParams {
	select?: string[] | string | null;
	confirm?: boolean;
	title?: string;
	message?: string;
	placeholder?: string | null;
}
export interface ProgressParams { id: number; budget_ms?: number; signal?: string }

/** A request or notification the sidecar sends. */
export interface EngineRequest {
	id?: string | number;
	method: string;
	params?: unknown;
}

// --- apply.mjs --------------------------------------------------------------------------------

/** An action's parameters as they arrive: any field may be missing (its default) or null. */
export type Wire<P> = { readonly [K in keyof P]?: P[K] | null };

/** What the actions of one event leave for the hook that answers Pi (the first of each kind counts). */
export interface Replies {
	answer?: Wire<ActionParams["answer"]>;
	block?: Wire<ActionParams["block"]>;
	rewrite_result?: Wire<ActionParams["rewrite_result"]>;
	trust?: Wire<ActionParams["trust"]>;
	cancel?: Wire<ActionParams["cancel"]>;
	input?: Wire<ActionParams["input"]>;
	route?: Wire<RouteParams>;
	section: Wire<SectionParams>[];
	system_append: Wire<SystemAppendParams>[];
	context_message: Wire<ContextMessageParams>[];
}

export interface ApplyEnv {
	state: BridgeState;
	ctx: ExtensionContext | null;
	replies: Replies;
	notices?: Notice[] | undefined;
}

export interface Entry<P> {
	/** Every field of the action's parameters, each one this entry reads. */
	fields: Record<keyof P, true>;
	apply(params: Wire<P>, env: ApplyEnv): void | Promise<void>;
}

export type Table = { [K in ActionName]: Entry<ActionParams[K]> };

/** A context message as the hook inserts it. */
export interface ContextMessage {
	role: string;
	customType?: string | undefined;
	routerType?: string | undefined;
	content?: unknown;
	[key: string]: unknown;
}

// --- branch.mjs --------------------------------------------------------------------------------

export interface MessageEntry {
	type: "message";
	message: { role?: string; content?: unknown };
}

// --- dialogs.mjs --------------------------------------------------------------------------------

export type PatchedUi = ExtensionUIContext & { __routerPatched?: boolean };

// --- guard.mjs --------------------------------------------------------------------------------

export type FailureMode = "open" | "closed";

// --- index.mjs --------------------------------------------------------------------------------

export interface Owner {
	pi: PiApi;
	dir: string;
}

// --- panel.mjs --------------------------------------------------------------------------------

export type Params = Wire<PanelParams>;

export type Item = Wire<PanelItem> & { key: string };

// --- resolve.mjs --------------------------------------------------------------------------------

/** The command and the step of the resolution that gave it (`via`, for the log and doctor). */
export interface Resolved {
	command: string[];
	via: "ROUTER_SERVE" | "ROUTER_PYTHON" | "user install" | "router on PATH" | "python3 on PATH" | "default";
}

export type Env = Record<string, string | undefined>;

// --- state.mjs --------------------------------------------------------------------------------

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

/** What every module may read: Pi, the sidecar, the forwarder, the latest context (state.mjs). */
export interface SharedState {
	readonly pi: PiApi;
	readonly sidecar: Sidecar;
	/** forward.mjs's `forward`, bound to this state (here so that a module that forwards need not import it: no cycles). */
	forward: Forward;
	/** The latest context Pi gave a hook. */
	ctx: ExtensionContext | null;
}

/** The sidecar's life: starting, ready, lost, restarting, stopping (lifecycle.mjs; forward.mjs reads the deadline and the last failure). */
export interface LifecycleState {
	/** How long an event may wait for the engine: the deadline it announced plus the transit margin. */
	eventTimeoutMs: number;
	/** The wait for `shutdown`'s answer the engine announced (0: the bridge's own). */
	shutdownMs: number;
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
	/** Why the engine last failed to start or answer (guard.mjs names it in a refusal). */
	lastFailure: string | null;
	/** Why the startup hello failed, until session_start reports it. */
	preloadFailure: string | null;
	shownWarnings: Set<string>;
}

/** What the policy declared, and what of it is registered with Pi (declarations.mjs). */
export interface DeclarationsState {
	/** The event types the policy has rules for: only those are forwarded. */
	subscribed: Set<string>;
	skillPaths: string[];
	registered: { commands: Set<string>; tools: Set<string>; models: Set<string> };
	/** The excerpt size the policy declares (`excerpt_entries`). */
	excerptEntries: number;
	/** Per event type, `open` or `closed` when the engine cannot answer (guard.mjs reads it); null before any declaration. */
	failure: Record<string, "open" | "closed"> | null;
}

/** What fails closed when the engine cannot answer (guard.mjs). */
export interface GuardState {
	/** A refused guarded event was told during this outage. */
	guardTold: boolean;
}

/** Pi's own dialogs and a rule's answer to the next custom one (dialogs.mjs). */
export interface DialogsState {
	nativeUi: NativeUi | null;
	/** The answer the next `ctx.ui.custom` returns (an rpiv questionnaire a rule answered). */
	pendingCustom: Promise<unknown> | null;
	/** The bus events a declared question or blocked event is listened on (once each). */
	busEvents: Set<string>;
}

/** The open panels (panel.mjs). */
export interface PanelState {
	tuiKit: Promise<TuiKit | null> | null;
	/** Panel id → update of the open panel. */
	openPanels: Map<string, (params: PanelParams) => void>;
	/** Panels whose refresh is in flight. */
	refreshing: Set<string>;
}

/** What the actions leave behind between events (apply.mjs). */
export interface ApplyState {
	/** A compaction a `compact` action started is running. */
	routerCompaction: boolean;
	/** A `compact` action waiting for the agent to be idle. */
	compactionQueued: (() => void) | null;
	/** Unknown actions already reported (once each). */
	unknownActions: Set<string>;
}

/** What the hooks carry from one event to the next (hooks.mjs). */
export interface HooksState {
	toolActivity: boolean;
}

/** Pi's project trust as the engine reported it (trust.mjs; lifecycle.mjs sends it in each hello). */
export interface TrustState {
	trustStatus: string | null;
	approvedDigest: string | null;
	/** After the first hello, --approve covers only the content approved then. */
	helloAnswered: boolean;
}

/**
 * The bridge's state: what every module may read, and one part per module that keeps state, which
 * that module creates and alone writes (the others read it, or call the owner's functions).
 */
export interface BridgeState extends SharedState {
	readonly lifecycle: LifecycleState;
	readonly declarations: DeclarationsState;
	readonly guard: GuardState;
	readonly dialogs: DialogsState;
	readonly panel: PanelState;
	readonly apply: ApplyState;
	readonly hooks: HooksState;
	readonly trust: TrustState;
}

// --- transport.mjs -------------------------------------------------------------------------------

export interface Pending {
	resolve: (value: unknown) => void;
	reject: (error: Error) => void;
	timer: NodeJS.Timeout;
	cap: number;
	/** The wait for the first word, armed again when a warm start falls back to a spawned sidecar. */
	rearm: () => void;
}

/** What a link reports: the sidecar's output, and its end (a crash, an exit, a closed socket). */
export interface LinkEvents {
	data: (chunk: string) => void;
	gone: (reason: string) => void;
	/** A warm start fell back to a spawned sidecar: the waits start again for it. */
	fellBack: () => void;
}

/** One way to a running sidecar: a child process's pipes, or a socket to a forked one. */
export interface Link {
	readonly warm: boolean;
	write(text: string): void;
	/** Close the sidecar's input so it finishes; killed if still there after KILL_AFTER_MS. Pi need not wait. */
	stop(): void;
	kill(): void;
}

// --- warm.mjs --------------------------------------------------------------------------------

/** The start request's first line: what the forked sidecar runs with. */
export interface StartRequest {
	warm: 1;
	argv: string[];
	env: Record<string, string>;
	cwd: string;
}
