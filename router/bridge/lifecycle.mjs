/**
 * The sidecar's lifecycle: the `hello` at Pi's start (preload) and in `session_start`, restarts
 * with back-off after a failure (the user is told once per outage, and again when it is back), and
 * the shutdown in `session_shutdown`.
 */
/**
 * @import { BridgeState, LifecycleState, ExtensionContext, HelloParams, HelloResult, Json, ModelInfo, RegistryFacts } from "./types.js"
 */
import { declare } from "./declarations.mjs";
import { cachedDeclarations, declarationsKey, declarationsText } from "./startup.mjs";
import { setStatus, warn } from "./state.mjs";
import { outageOver } from "./guard.mjs";
import { helloAnswered, showTrust, trustFacts } from "./trust.mjs";
import { agentDir, attempt, errorText, isObject, logLine, modelInfo } from "./util.mjs";

export const PROTOCOL = 1;
export const EVENT_TIMEOUT_MS = Number(process.env.ROUTER_BRIDGE_TIMEOUT_MS) || 1500;
/** Beyond the deadline the engine announces: the line's way there and back on a loaded machine. */
export const TRANSIT_MARGIN_MS = 1000;
/** The wait for the sidecar's first word on `hello` (its answer, or the progress it sends before loading). */
export const HELLO_TIMEOUT_MS = Number(process.env.ROUTER_BRIDGE_HELLO_TIMEOUT_MS) || 2000;
const PRELOAD_LOAD_MS = 5000; // loading at startup delays Pi's start: at most this long
const MAX_BACKOFF_MS = 30000;
const SHUTDOWN_MS = 500; // without an engine's figure
const MAX_SHUTDOWN_MS = 10_000; // whatever an engine announces, Pi's exit waits no longer
const STATE_ENTRY = "pi-policy-router.state";

/**
 * The transport lost the sidecar (crash, protocol error): restart it, telling the user once.
 * @param {BridgeState} state
 * @param {string} reason
 * @returns {void}
 */
export function handleExit(state, reason) {
	state.lifecycle.ready = false;
	state.lifecycle.lastFailure = reason;
	if (state.lifecycle.preloading) {
		logLine(`router: ${reason} (while loading the policy declarations)`);
		return;
	}
	if (state.lifecycle.stopping) return;
	state.lifecycle.failures += 1;
	if (!state.lifecycle.outage) {
		state.lifecycle.outage = true;
		warn(state, `router: ${reason}; Pi continues without the policy and the router restarts`);
		setStatus(state, "router: offline (restarting)");
	} else {
		logLine(`router: ${reason}`);
	}
	scheduleRestart(state);
}

/**
 * An event failed (timeout, error answer): the sidecar is replaced as after a crash.
 * @param {BridgeState} state
 * @param {string} reason
 * @returns {void}
 */
export function lostEngine(state, reason) {
	if (!state.lifecycle.ready) return;
	state.lifecycle.ready = false;
	state.sidecar.stop();
	handleExit(state, reason);
}

/**
 * @param {BridgeState} state
 * @returns {void}
 */
function scheduleRestart(state) {
	if (state.lifecycle.restartTimer || state.lifecycle.stopping) return;
	const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.max(0, state.lifecycle.failures - 1));
	state.lifecycle.restartTimer = setTimeout(() => {
		state.lifecycle.restartTimer = null;
		void ensureStarted(state, state.ctx);
	}, delay);
	state.lifecycle.restartTimer.unref();
}

/**
 * @param {BridgeState} state
 * @param {ExtensionContext | null} ctx
 * @returns {Promise<boolean>}
 */
export async function ensureStarted(state, ctx) {
	if (state.lifecycle.starting) return state.lifecycle.starting; // a hello in flight (a start, or the session's after a cached start)
	if (state.lifecycle.ready) return true;
	if (state.lifecycle.stopping || !ctx) return false;
	if (!state.lifecycle.starting) state.lifecycle.starting = start(state, ctx).finally(() => (state.lifecycle.starting = null));
	return state.lifecycle.starting;
}

/**
 * @param {HelloResult | null} hello
 * @returns {asserts hello is HelloResult}
 */
function checkProtocol(hello) {
	if (hello?.protocol !== PROTOCOL) throw new Error(`engine speaks protocol ${hello?.protocol}, bridge ${PROTOCOL}`);
}

/**
 * @param {BridgeState} state
 * @param {ExtensionContext} ctx
 * @returns {Promise<boolean>}
 */
async function start(state, ctx) {
	if (state.lifecycle.preloadFailure !== null) {
		// the sidecar just failed to say hello at startup: Pi starts without waiting once more
		const reason = state.lifecycle.preloadFailure;
		state.lifecycle.preloadFailure = null;
		return failedStart(state, reason);
	}
	try {
		state.sidecar.start(ctx.cwd ?? process.cwd());
		const hello = await /** @type {Promise<HelloResult | null>} */ (state.sidecar.call("hello", await helloParams(state, ctx), HELLO_TIMEOUT_MS));
		checkProtocol(hello);
		declare(state, hello);
		useDeadline(state, hello);
		state.lifecycle.ready = true;
		state.lifecycle.failures = 0;
		outageOver(state.guard);
		showHelloWarnings(state, hello);
		showTrust(state, hello.trust);
		helloAnswered(state.trust);
		if (state.lifecycle.outage) {
			state.lifecycle.outage = false;
			logLine("router: sidecar back");
			const now = state.ctx;
			if (now?.hasUI) attempt(() => now.ui.notify("router: policy engine is back", "info"), undefined);
			setStatus(state, undefined);
		}
		return true;
	} catch (error) {
		state.sidecar.stop();
		return failedStart(state, errorText(error));
	}
}

/**
 * @param {BridgeState} state
 * @param {string} reason
 * @returns {false}
 */
function failedStart(state, reason) {
	state.lifecycle.ready = false;
	state.lifecycle.lastFailure = `the policy engine did not start: ${reason}`;
	state.lifecycle.failures += 1;
	if (!state.lifecycle.outage) {
		state.lifecycle.outage = true;
		warn(state, `router: the policy engine did not start (${reason}); Pi continues without it`);
		setStatus(state, "router: offline (restarting)");
	}
	scheduleRestart(state);
	return false;
}

/**
 * The event deadline: the figure the engine announced (it decides within it, whatever the machine's
 * load: router/runtime/server.py) plus the transit margin, unless the user set ROUTER_BRIDGE_TIMEOUT_MS;
 * and the wait for `shutdown`'s answer it announced (its telemetry is sent before it answers).
 * @param {BridgeState} state
 * @param {HelloResult} hello
 * @returns {void}
 */
function useDeadline(state, hello) {
	const announced = hello.event_deadline_ms;
	const explicit = Number(process.env.ROUTER_BRIDGE_TIMEOUT_MS) > 0;
	if (!explicit && typeof announced === "number" && announced > 0) state.lifecycle.eventTimeoutMs = announced + TRANSIT_MARGIN_MS;
	const shutdownMs = hello.shutdown_ms;
	if (typeof shutdownMs === "number" && shutdownMs > 0) state.lifecycle.shutdownMs = Math.min(shutdownMs, MAX_SHUTDOWN_MS);
}

/**
 * Warnings of a `hello` answer, each shown once (a second hello repeats them).
 * @param {BridgeState} state
 * @param {HelloResult} hello
 * @returns {void}
 */
function showHelloWarnings(state, hello) {
	for (const text of hello.warnings ?? []) {
		if (state.lifecycle.shownWarnings.has(text)) continue;
		state.lifecycle.shownWarnings.add(text);
		warn(state, `router: ${text}`);
	}
}

/**
 * Pi resolves `--model`, `defaultModel` and a resumed session's model before `session_start`,
 * and it only knows the virtual models registered while the factories run. So the factory
 * registers the policy's declarations from the cache the last sidecar wrote (startup.mjs) and says
 * hello in the background while Pi goes on starting; without a valid cache entry it waits for the
 * hello (no UI yet; the engine decides whether the project layer applies). `session_start` says
 * hello again with the real context.
 * @param {BridgeState} state
 * @returns {Promise<void>}
 */
export async function preload(state) {
	const cwd = process.cwd();
	const key = attempt(() => declarationsKey(cwd, agentDir(), state.sidecar.command(), trustFacts(state)), null);
	const cached = key ? attempt(() => cachedDeclarations(agentDir(), key), null) : null;
	if (!cached) {
		await preloadHello(state, cwd, key);
		return;
	}
	declare(state, cached);
	state.lifecycle.fromCache = declarationsText(cached);
	state.lifecycle.cachedStart = true;
	const started = preloadHello(state, cwd, key);
	state.lifecycle.starting = started;
	void started.finally(() => {
		if (state.lifecycle.starting === started) state.lifecycle.starting = null;
	});
}

/**
 * The startup hello; true when the engine answered.
 * @param {BridgeState} state
 * @param {string} cwd
 * @param {string | null} key
 * @returns {Promise<boolean>}
 */
async function preloadHello(state, cwd, key) {
	state.lifecycle.preloading = true;
	try {
		state.sidecar.start(cwd);
		/** @type {HelloParams} */
		const params = {
			protocol: PROTOCOL, cwd, mode: null, hasUI: false, state: null, models: [], preload: true, ...trustFacts(state),
			...(key ? { declarationsKey: key } : {}),
		};
		const hello = await /** @type {Promise<HelloResult | null>} */ (state.sidecar.call("hello", params, HELLO_TIMEOUT_MS, undefined, PRELOAD_LOAD_MS));
		checkProtocol(hello);
		reconcile(state, hello);
		useDeadline(state, hello);
		helloAnswered(state.trust, hello.trust);
		state.lifecycle.ready = true;
		return true;
	} catch (error) {
		logLine(`router: could not load the policy declarations at startup: ${errorText(error)}`);
		state.lifecycle.preloadFailure = errorText(error);
		state.lifecycle.ready = false;
		state.sidecar.stop();
		return false;
	} finally {
		state.lifecycle.preloading = false;
	}
}

/**
 * The engine's declarations, authoritative, registered; a difference from the cached ones is logged (bridge.log).
 * @param {BridgeState} state
 * @param {HelloResult} hello
 * @returns {void}
 */
function reconcile(state, hello) {
	const cached = state.lifecycle.fromCache;
	state.lifecycle.fromCache = null;
	declare(state, hello);
	if (cached === null || cached === declarationsText(hello)) return;
	logLine("router: the engine's declarations differ from the cached ones; registered the engine's");
}

/**
 * `session_start`: hello again with the real context (or start the sidecar); false when it is not running.
 * @param {BridgeState} state
 * @param {ExtensionContext} ctx
 * @returns {Promise<boolean>}
 */
export async function sessionStart(state, ctx) {
	state.ctx = ctx;
	state.lifecycle.stopping = false;
	if (state.lifecycle.cachedStart) {
		// Pi goes on: this hello follows the startup hello (if still in flight), and events wait for both
		const before = state.lifecycle.starting ?? Promise.resolve(true);
		const after = before.then(() => (state.lifecycle.stopping ? false : sessionHello(state, ctx, true)));
		state.lifecycle.starting = after;
		void after.finally(() => {
			if (state.lifecycle.starting === after) state.lifecycle.starting = null;
		});
		return true;
	}
	return sessionHello(state, ctx, false);
}

/**
 * @param {BridgeState} state
 * @param {ExtensionContext} ctx
 * @param {boolean} chained
 * @returns {Promise<boolean>}
 */
async function sessionHello(state, ctx, chained) {
	if (!state.lifecycle.ready) return chained ? start(state, ctx) : ensureStarted(state, ctx);
	const hello = await /** @type {Promise<HelloResult | null>} */ (state.sidecar.call("hello", await helloParams(state, ctx), HELLO_TIMEOUT_MS)).catch(() => null);
	if (hello) {
		declare(state, hello);
		useDeadline(state, hello);
		showHelloWarnings(state, hello);
		showTrust(state, hello.trust);
		helloAnswered(state.trust);
	}
	return true;
}

/**
 * `session_shutdown`: no restarts any more; the sidecar is asked to finish, then stopped.
 * @param {BridgeState} state
 * @returns {Promise<void>}
 */
export async function shutdown(state) {
	state.lifecycle.stopping = true;
	if (state.lifecycle.restartTimer) clearTimeout(state.lifecycle.restartTimer);
	if (state.lifecycle.ready) await state.sidecar.call("shutdown", {}, state.lifecycle.shutdownMs || SHUTDOWN_MS).catch(() => undefined);
	state.lifecycle.ready = false;
	state.sidecar.stop();
}

/**
 * @param {BridgeState} state
 * @param {ExtensionContext} ctx
 * @returns {Promise<HelloParams>}
 */
async function helloParams(state, ctx) {
	return {
		protocol: PROTOCOL, cwd: ctx.cwd, mode: ctx.mode, hasUI: !!ctx.hasUI,
		state: restoredState(ctx), models: availableModels(ctx), registry: await registryFacts(ctx), ...trustFacts(state),
	};
}

/**
 * What Pi's registry knows beyond the available chat models, for the engine to check refs
 * against: the provider ids, the classifier models it lists (a provider that discovers its
 * models at run time, such as llama.cpp, lists none until asked) and the providers that can discover.
 * @param {ExtensionContext} ctx
 * @returns {Promise<RegistryFacts>}
 */
async function registryFacts(ctx) {
	const registry = ctx?.modelRegistry;
	const providers = /** @type {Set<string>} */ (new Set(attempt(() => registry.getRegisteredProviderIds(), [])));
	for (const m of attempt(() => registry.getAll(), [])) providers.add(String(m.provider));
	/** @type {string[]} */
	let classifiers = [];
	try {
		classifiers = ((await registry.getModelsOfType("classifier")) ?? []).map((m) => `${m.provider}/${m.id}`);
	} catch {
		// an older Pi without model types: nothing to check against
	}
	// a provider with refreshModels can discover models at run time (llama.cpp, the cloud catalogs);
	// a models.json provider cannot: its classifiers are the ones it lists
	const discovering = [...providers].filter((p) => typeof attempt(() => registry.getProvider(p)?.refreshModels, undefined) === "function");
	return { providers: [...providers], classifiers, discovering };
}

/**
 * The per-session state stored on the branch (the last `pi-policy-router.state` entry), or null.
 * @param {ExtensionContext} ctx
 * @returns {Json}
 */
function restoredState(ctx) {
	const branch = attempt(() => ctx.sessionManager.getBranch(), []);
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i];
		if (entry?.type === "custom" && entry.customType === STATE_ENTRY) {
			/** @type {unknown} */
			const data = entry.data;
			return isObject(data) && data.state !== undefined ? (/** @type {Json} */ (data.state)) : null;
		}
	}
	return null;
}

/**
 * @param {ExtensionContext} ctx
 * @returns {ModelInfo[]}
 */
function availableModels(ctx) {
	return attempt(() => ctx.modelRegistry.getAvailable(), []).map(modelInfo).filter(/** @returns {m is ModelInfo} */ (m) => m !== null);
}

/**
 * The sidecar's life before the first start (the lifecycle part of the bridge's state).
 * @returns {LifecycleState}
 */
export function lifecycleState() {
	return {
		eventTimeoutMs: 0, shutdownMs: 0, ready: false, outage: false, failures: 0, restartTimer: null, stopping: false, starting: null,
		preloading: false, fromCache: null, cachedStart: false, preloadFailure: null, lastFailure: null, shownWarnings: new Set(),
	};
}
