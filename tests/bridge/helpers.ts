/** Fakes for the bridge's unit tests: a `pi` that records what the bridge calls, a context, a sidecar. */
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { PiApi, ExtensionContext, PiModel } from "../../router/bridge/types.js";
import { Sidecar } from "../../router/bridge/transport.mjs";
import type { BridgeState } from "../../router/bridge/types.js";
import { connect, createState } from "../../router/bridge/index.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
export const FAKE_SIDECAR = path.join(here, "fake_sidecar.mjs");

/** A sidecar that runs fake_sidecar.mjs in `mode`. */
export function fakeSidecar(mode: string, maxLineChars?: number): Sidecar {
	return new Sidecar({ resolve: () => ({ command: [process.execPath, FAKE_SIDECAR, mode], via: "ROUTER_SERVE" }), ...(maxLineChars ? { maxLineChars } : {}) });
}

export type Call = [string, ...unknown[]];

export interface FakePi {
	pi: PiApi;
	calls: Call[];
	active: string[];
	handlers: Map<string, (event: unknown, ctx: unknown) => unknown>;
}

export function model(provider: string, id: string, api = "openai-completions"): PiModel {
	return { provider, id, name: id, api, contextWindow: 1000, maxTokens: 100, reasoning: false, input: ["text"],
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } } as unknown as PiModel;
}

/** A `pi` with the tools read, bash, edit (read and bash active) that records every call. */
export function fakePi(setModelWorks = true): FakePi {
	const calls: Call[] = [];
	const handlers = new Map<string, (event: unknown, ctx: unknown) => unknown>();
	const fake: FakePi = { pi: undefined as unknown as PiApi, calls, active: ["read", "bash"], handlers };
	const pi = {
		on: (name: string, handler: (event: unknown, ctx: unknown) => unknown) => void handlers.set(name, handler),
		events: { on: () => () => {}, emit: () => {} },
		registerCommand: (...args: unknown[]) => void calls.push(["registerCommand", ...args]),
		registerTool: (...args: unknown[]) => void calls.push(["registerTool", ...args]),
		registerVirtualModel: (...args: unknown[]) => void calls.push(["registerVirtualModel", ...args]),
		sendMessage: (...args: unknown[]) => void calls.push(["sendMessage", ...args]),
		appendEntry: (...args: unknown[]) => void calls.push(["appendEntry", ...args]),
		getActiveTools: () => [...fake.active],
		getAllTools: () => ["read", "bash", "edit"].map((name) => ({ name })),
		setActiveTools: (names: string[]) => {
			calls.push(["setActiveTools", names]);
			fake.active = names;
		},
		setModel: async (m: PiModel) => {
			calls.push(["setModel", `${m.provider}/${m.id}`]);
			return setModelWorks;
		},
		getThinkingLevel: () => "off",
		setThinkingLevel: (level: string) => void calls.push(["setThinkingLevel", level]),
	};
	fake.pi = pi as unknown as PiApi;
	return fake;
}

export interface FakeCtx {
	ctx: ExtensionContext;
	notices: [string, string | undefined][];
	statuses: [string, string | undefined][];
	widgets: [string, string[] | undefined, unknown][];
	compacts: unknown[];
	idle: boolean;
}

/** A context with a UI (`hasUI`) that records notifications, statuses and compactions. */
export function fakeCtx(options: { hasUI?: boolean; idle?: boolean; compactThrows?: boolean } = {}): FakeCtx {
	const fake: FakeCtx = { ctx: undefined as unknown as ExtensionContext, notices: [], statuses: [], widgets: [], compacts: [], idle: options.idle ?? true };
	const models = [model("fake", "local"), model("fake", "cloud")];
	fake.ctx = {
		cwd: process.cwd(), mode: "rpc", hasUI: options.hasUI ?? true,
		ui: {
			notify: (text: string, level?: string) => void fake.notices.push([text, level]),
			setStatus: (key: string, text: string | undefined) => void fake.statuses.push([key, text]),
			setWidget: (key: string, lines: string[] | undefined, options: unknown) => void fake.widgets.push([key, lines, options]),
		},
		modelRegistry: { find: (provider: string, id: string) => models.find((m) => m.provider === provider && m.id === id), getAvailable: () => models },
		sessionManager: { getBranch: () => [], getSessionId: () => "s1", getSessionFile: () => undefined },
		isIdle: () => fake.idle,
		compact: (opts: unknown) => {
			if (options.compactThrows) throw new Error("no model to compact with");
			fake.compacts.push(opts);
		},
		getContextUsage: () => undefined,
	} as unknown as ExtensionContext;
	return fake;
}

/** A connected bridge state over `pi` and a fake sidecar in `mode` (nothing started yet). */
export function bridge(pi: PiApi, mode: string): BridgeState {
	const state = connect(pi, fakeSidecar(mode));
	return state;
}

/** A state for applying actions only (its sidecar never starts). */
export function applyState(pi: PiApi, ctx: ExtensionContext | null): BridgeState {
	const state = createState(pi);
	state.ctx = ctx;
	return state;
}

/** Stop a state's sidecar and restarts (every test ends with this: no process outlives it). */
export function stop(state: BridgeState): void {
	state.lifecycle.stopping = true;
	if (state.lifecycle.restartTimer) clearTimeout(state.lifecycle.restartTimer);
	state.sidecar.stop();
}
