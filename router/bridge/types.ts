/**
 * The protocol's message types (docs/protocol.md) and the part of Pi's API the bridge uses.
 *
 * Pi's own types come from the installed `@earendil-works/pi-coding-agent` with `import type`, so
 * nothing here exists at run time. The action parameter types mirror the pydantic models of
 * `router/actions/` (tests/test_bridge_contract.py compares the two).
 */
import type {
	ExtensionAPI,
	ExtensionContext,
	ExtensionUIContext,
	ToolDefinition,
	VirtualModelDefinition,
} from "@earendil-works/pi-coding-agent";
import type { Api, Model } from "@earendil-works/pi-ai";

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
	/** At the startup hello: the bridge's key of the declarations cache (startup.ts), for the engine to write. */
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

// --- the actions' parameters (router/actions/*.py) ------------------------------------------------

export interface AnswerParams { value: unknown; text: string | null; details: unknown }
export interface BlockParams { reason: string }
export interface RewriteResultParams { text: string; is_error: boolean | null }
export interface TrustParams { trusted: "yes" | "no" | "undecided"; remember: boolean }
export type CancelParams = Record<never, never>;
export interface SectionParams { name: string; text: string }
export interface SystemAppendParams { text: string; marker: string | null }
export interface ContextMessageParams {
	text: string;
	role: "user" | "custom";
	custom_type: string;
	position: "after_user" | "end";
}
export interface InputParams { action: "continue" | "transform" | "handled"; text: string | null }
export interface CompactParams { instructions: string | null; abort: boolean }
export interface FollowUpParams {
	text: string;
	custom_type: string;
	hidden: boolean;
	deliver: "followUp" | "steer" | "nextTurn";
	details: unknown;
}
export interface NotifyParams { text: string; level: NotifyLevel }
export interface StatusParams { key: string; text: string | null }
export interface EntryParams { type: string; data: unknown }
export interface ToolsParams { only: string[] | string | null; add: string[] | string | null; remove: string[] | string | null }
export interface ModelParams { ref: string }
/** `thinking` as it reaches the bridge: the executor has already applied its `ceiling`. */
export interface ThinkingParams { level: ThinkingLevel }
export interface RouteParams { model: string; thinking: ThinkingLevel | null; state: unknown; error: string | null }

export type PanelKind = "text" | "number" | "bool" | "choice" | "list" | "json";
export interface PanelItem {
	key: string;
	label: string | null;
	value: unknown;
	description: string | null;
	kind: PanelKind;
	choices: string[] | null;
	min: number | null;
	max: number | null;
}
export interface PanelParams {
	id: string;
	title: string;
	text: string | null;
	items: PanelItem[];
	command: string;
	args: string;
	refresh: string | null;
}

/** Every action the bridge applies, by name, with its parameters. */
export interface ActionParams {
	answer: AnswerParams;
	block: BlockParams;
	rewrite_result: RewriteResultParams;
	trust: TrustParams;
	cancel: CancelParams;
	section: SectionParams;
	system_append: SystemAppendParams;
	context_message: ContextMessageParams;
	input: InputParams;
	route: RouteParams;
	compact: CompactParams;
	follow_up: FollowUpParams;
	notify: NotifyParams;
	status: StatusParams;
	entry: EntryParams;
	tools: ToolsParams;
	model: ModelParams;
	thinking: ThinkingParams;
	panel: PanelParams;
}
export type ActionName = keyof ActionParams;

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
