/**
 * pi-policy-router bridge: connects Pi to the policy engine (`router serve`).
 *
 * It holds no policy logic. It starts the sidecar in `session_start` and stops it in
 * `session_shutdown`, forwards the events the loaded policy has rules for, applies the actions it
 * gets back, and answers the engine's requests (classify, complete, ask). Every engine call has a
 * timeout; on timeout, crash or protocol error Pi continues with its native behaviour, the user is
 * warned, a status line says so, the failure is logged and the sidecar is restarted with back-off.
 * Protocol: docs/protocol.md (version 1).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const PROTOCOL = 1;
const EVENT_TIMEOUT_MS = Number(process.env.ROUTER_BRIDGE_TIMEOUT_MS) || 1500;
/** The wait for the sidecar's first word on `hello` (its answer, or the progress it sends before loading). */
const HELLO_TIMEOUT_MS = Number(process.env.ROUTER_BRIDGE_HELLO_TIMEOUT_MS) || 2000;
const PRELOAD_LOAD_MS = 5000; // loading at startup delays Pi's start: at most this long
const MAX_BUDGET_MS = 600000; // no progress note extends a wait beyond this
const MAX_LINE_CHARS = 64 * 1024 * 1024; // as the sidecar's own limit (router/runtime/protocol.py)
const MAX_BACKOFF_MS = 30000;
const STATE_ENTRY = "pi-policy-router.state";
const STATUS_KEY = "pi-policy-router";
const EXCERPT_ENTRIES = 12; // only bounds the payload: router/events/questions.py decides what the excerpt holds
const RPIV_PROMPT = "rpiv:ask-user:prompt";
const RPIV_BLOCKED = "rpiv:ask-user:blocked";

type Json = any;
type Ctx = any;
type Pending = { resolve: (v: Json) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; cap: number };
type Notice = { text: string; level: string };

function agentDir(): string {
	const dir = process.env.PI_CODING_AGENT_DIR;
	return dir ? dir.replace(/^~(?=$|\/)/, os.homedir()) : path.join(os.homedir(), ".pi", "agent");
}

/** A line in bridge.log, whole or not at all: one write, cut back after a short write (a full disk). */
function logLine(text: string): void {
	try {
		const file = path.join(agentDir(), "router", "bridge.log");
		fs.mkdirSync(path.dirname(file), { recursive: true });
		const data = Buffer.from(`${new Date().toISOString()} ${text}\n`, "utf8");
		const fd = fs.openSync(file, "a", 0o600);
		try {
			const size = fs.fstatSync(fd).size;
			let written = 0;
			try {
				written = fs.writeSync(fd, data);
			} catch {
				// nothing or a part was written: cut back below
			}
			// cut back only when nobody appended since (Node has no flock; other Pi processes share the file)
			if (written !== data.length && fs.fstatSync(fd).size === size + written) fs.ftruncateSync(fd, size);
		} finally {
			fs.closeSync(fd);
		}
	} catch {
		// logging must never break Pi
	}
}

/** A directory no project controls, for the sidecar's working directory: the agent dir, else home. */
function neutralDir(): string {
	for (const dir of [agentDir(), os.homedir(), os.tmpdir()]) {
		if (attempt(() => fs.statSync(dir).isDirectory(), false)) return dir;
	}
	return "/";
}

function hereDir(): string {
	if (typeof __dirname !== "undefined") return __dirname;
	try {
		return path.dirname(fileURLToPath(import.meta.url));
	} catch {
		return process.cwd();
	}
}

/** The sidecar command: $ROUTER_SERVE (JSON array), router-bridge.json beside this file, else `router serve`. */
function serveCommand(): string[] {
	const fromEnv = process.env.ROUTER_SERVE;
	if (fromEnv) {
		try {
			const parsed = JSON.parse(fromEnv);
			if (Array.isArray(parsed) && parsed.length > 0) return parsed.map(String);
		} catch {
			return fromEnv.split(" ").filter(Boolean);
		}
	}
	try {
		const config = JSON.parse(fs.readFileSync(path.join(hereDir(), "router-bridge.json"), "utf8"));
		if (Array.isArray(config.command) && config.command.length > 0) return config.command.map(String);
	} catch {
		// not installed with `router install`: fall back to PATH
	}
	return ["router", "serve"];
}

function textOf(content: Json): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((block: Json) => block && block.type === "text" && typeof block.text === "string")
		.map((block: Json) => block.text)
		.join("\n");
}

function modelInfo(model: Json): Json {
	if (!model) return null;
	return {
		provider: model.provider, id: model.id, name: model.name, api: model.api,
		contextWindow: model.contextWindow, maxTokens: model.maxTokens, reasoning: !!model.reasoning,
		input: model.input, cost: model.cost,
	};
}

function attempt<T>(fn: () => T, fallback: T): T {
	try {
		return fn();
	} catch {
		return fallback;
	}
}

// --- panel values (the `panel` action's items) --------------------------------------------------

const PANEL_ROWS = 12;

function panelItems(params: Json): Json[] {
	return (Array.isArray(params?.items) ? params.items : []).filter((item: Json) => item && item.key !== undefined && item.key !== null);
}

function itemLabel(item: Json): string {
	return String(item.label ?? item.key);
}

/** A value as the panel shows it: lists comma-separated, other non-strings as JSON. */
function shownValue(item: Json): string {
	const value = item.value;
	if (value === null || value === undefined || value === "") return "(none)";
	if (item.kind === "list" && Array.isArray(value)) return value.length ? value.map(String).join(", ") : "(none)";
	return typeof value === "string" ? value : JSON.stringify(value);
}

/** A value as its inline input starts. */
function editText(item: Json): string {
	const value = item.value;
	if (item.kind === "list") return Array.isArray(value) ? value.map(String).join(", ") : "";
	if (item.kind === "json") return JSON.stringify(value ?? null);
	return value === null || value === undefined ? "" : String(value);
}

/** What an input holds, as the JSON a change sends, or why it cannot be sent. */
function parseEdit(item: Json, text: string): { json: string } | { error: string } {
	const trimmed = text.trim();
	const label = itemLabel(item);
	if (item.kind === "number") {
		const number = Number(trimmed);
		if (trimmed === "" || !Number.isFinite(number)) return { error: `${label}: '${trimmed}' is not a number` };
		if (typeof item.min === "number" && number < item.min) return { error: `${label}: at least ${item.min}` };
		if (typeof item.max === "number" && number > item.max) return { error: `${label}: at most ${item.max}` };
		return { json: JSON.stringify(number) };
	}
	if (item.kind === "list") return { json: JSON.stringify(trimmed.split(",").map((part) => part.trim()).filter(Boolean)) };
	if (item.kind === "json") {
		try {
			return { json: JSON.stringify(JSON.parse(trimmed)) };
		} catch (error: any) {
			return { error: `${label}: not JSON (${error.message})` };
		}
	}
	return { json: JSON.stringify(trimmed) };
}

/** The JSON of the value a bool or choice row cycled to. */
function cycledJson(item: Json, shown: string): string {
	return item.kind === "bool" ? String(shown === "true") : JSON.stringify(shown);
}

/** The run was aborted (not a failure of the engine). */
class AbortError extends Error {
	constructor() {
		super("aborted");
	}
}

/**
 * The JSON-lines connection to one sidecar process. Its output is decoded as a UTF-8 stream (a
 * character split between two chunks stays whole) into a buffer of at most MAX_LINE_CHARS; a longer
 * line, like a line that is not JSON, counts as a protocol error: the sidecar is replaced.
 */
class Sidecar {
	private proc: ChildProcess | null = null;
	private buffer = "";
	private scanned = 0; // characters of the buffer known to hold no newline
	private nextId = 1;
	private pending = new Map<number, Pending>();
	onRequest: (message: Json) => void = () => {};
	onExit: (reason: string) => void = () => {};

	start(cwd: string): void {
		const [command, ...args] = serveCommand();
		// Never run in the project: `python -m` would import a module the repository ships
		// (`argparse.py`, `router/`) before the router's own. The engine gets the project as --cwd.
		const proc = spawn(command, [...args, "--cwd", cwd, "--agent-dir", agentDir()], {
			cwd: neutralDir(), stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PYTHONSAFEPATH: "1" },
		});
		this.proc = proc;
		this.buffer = "";
		this.scanned = 0;
		// A replaced process (stopped after a timeout, killed a second later) must not touch its
		// successor: its late output and its exit are ignored.
		const current = () => this.proc === proc;
		proc.stdout!.setEncoding("utf8");
		proc.stdout!.on("data", (chunk: string) => {
			if (current()) this.read(chunk);
		});
		proc.stderr!.on("data", (chunk: Buffer) => logLine(`sidecar stderr: ${chunk.toString().trimEnd()}`));
		proc.on("error", (error) => {
			if (current()) this.fail(`sidecar failed to start (${command}): ${error.message}`);
		});
		proc.on("exit", (code, signal) => {
			if (current()) this.fail(`sidecar exited (code ${code}, signal ${signal})`);
		});
		proc.stdin!.on("error", () => {});
	}

	get running(): boolean {
		return this.proc !== null;
	}

	/** A request; `cap` bounds how far the sidecar's progress notes may extend the wait. */
	call(method: string, params: Json, timeoutMs: number, signal?: AbortSignal, cap = MAX_BUDGET_MS): Promise<Json> {
		if (!this.proc) return Promise.reject(new Error("sidecar is not running"));
		if (signal?.aborted) return Promise.reject(new AbortError());
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(id);
				reject(new Error(`no answer to ${method} within ${timeoutMs} ms`));
			}, timeoutMs);
			this.pending.set(id, { resolve, reject, timer, cap });
			this.write({ id, method, params });
			// an aborted tool run cancels its request: the engine stops its child process or call
			signal?.addEventListener("abort", () => {
				const entry = this.pending.get(id);
				if (!entry) return;
				this.pending.delete(id);
				clearTimeout(entry.timer);
				this.write({ method: "cancel", params: { id } });
				entry.reject(new AbortError());
			}, { once: true });
		});
	}

	/**
	 * The engine is working on request `id` (loading the policy, a classifier or child call): wait up
	 * to `budgetMs` from now, and no longer, whatever happens to the sidecar (a stopped one sends
	 * nothing more).
	 */
	extend(id: number, budgetMs: number): void {
		const entry = this.pending.get(id);
		if (!entry) return;
		const wait = Math.min(Math.max(budgetMs, 1), entry.cap);
		clearTimeout(entry.timer);
		entry.timer = setTimeout(() => {
			this.pending.delete(id);
			entry.reject(new Error(`no answer within the budget of ${wait} ms the engine announced`));
		}, wait);
	}

	write(message: Json): void {
		try {
			this.proc?.stdin?.write(`${JSON.stringify(message)}\n`);
		} catch (error: any) {
			this.fail(`cannot write to the sidecar: ${error.message}`);
		}
	}

	stop(): void {
		const proc = this.proc;
		this.proc = null;
		this.rejectAll("sidecar stopped");
		if (!proc) return;
		try {
			proc.stdin?.end();
		} catch {}
		const kill = () => attempt(() => proc.kill("SIGKILL"), false);
		const killer = setTimeout(kill, 1000);
		killer.unref();
		// Pi may exit before the timer fires: a stopped or spinning sidecar must not outlive it
		process.once("exit", kill);
		proc.on("exit", () => {
			clearTimeout(killer);
			process.removeListener("exit", kill);
		});
	}

	private read(chunk: string): void {
		this.buffer += chunk;
		let newline = this.buffer.indexOf("\n", this.scanned);
		while (newline >= 0) {
			const line = this.buffer.slice(0, newline);
			this.buffer = this.buffer.slice(newline + 1);
			this.scanned = 0;
			if (line.length > MAX_LINE_CHARS) return this.fail(`protocol error: a line of ${line.length} characters (at most ${MAX_LINE_CHARS})`);
			if (line.trim()) this.dispatch(line);
			if (!this.proc) return; // the line was refused and the sidecar replaced
			newline = this.buffer.indexOf("\n");
		}
		this.scanned = this.buffer.length;
		if (this.buffer.length > MAX_LINE_CHARS) {
			const size = this.buffer.length;
			this.buffer = "";
			this.scanned = 0;
			this.fail(`protocol error: a line of more than ${size} characters without a newline (at most ${MAX_LINE_CHARS})`);
		}
	}

	private dispatch(line: string): void {
		let message: Json;
		try {
			message = JSON.parse(line);
		} catch {
			this.fail(`protocol error: not JSON: ${line.slice(0, 200)}`);
			return;
		}
		if (message && typeof message.method === "string") {
			this.onRequest(message);
			return;
		}
		const entry = this.pending.get(message?.id);
		if (!entry) {
			// an error for no request of ours: the sidecar refused a line (id null); say it in the log
			if (message?.error) logLine(`sidecar error: ${String(message.error.message ?? message.error).slice(0, 500)}`);
			return;
		}
		this.pending.delete(message.id);
		clearTimeout(entry.timer);
		if (message.error) entry.reject(new Error(`engine error: ${message.error.message ?? message.error}`));
		else entry.resolve(message.result);
	}

	private fail(reason: string): void {
		if (!this.proc) return;
		const proc = this.proc;
		this.proc = null;
		this.rejectAll(reason);
		try {
			proc.kill("SIGKILL");
		} catch {}
		this.onExit(reason);
	}

	private rejectAll(reason: string): void {
		for (const [id, entry] of this.pending) {
			clearTimeout(entry.timer);
			entry.reject(new Error(reason));
			this.pending.delete(id);
		}
	}
}

const OWNER = Symbol.for("pi-policy-router.bridge");

/**
 * Whether this copy of the bridge runs. Installed for the user and for the project, both copies
 * load into one Pi process: the first one loaded owns it and a later copy does nothing (one log
 * line), so nothing is registered, forwarded or shown twice. Pi invalidates the extension API of
 * a reloaded or replaced session, so an owner whose API throws is gone and its place is free.
 */
function claimProcess(pi: any): boolean {
	const slot = globalThis as any;
	const owner = slot[OWNER];
	if (owner && owner.pi !== pi && attempt(() => (owner.pi.events.emit("pi-policy-router:owner", null), true), false)) {
		logLine(`router: the bridge in ${hereDir()} is a second copy; the one in ${owner.dir} runs, this one does nothing`);
		return false;
	}
	slot[OWNER] = { pi, dir: hereDir() };
	return true;
}

export default async function (pi: any) {
	if (!claimProcess(pi)) return;
	const sidecar = new Sidecar();
	let ctxRef: Ctx = null;
	let subscribed = new Set<string>();
	let skillPaths: string[] = [];
	let ready = false;
	let outage = false;
	let failures = 0;
	let restartTimer: NodeJS.Timeout | null = null;
	let stopping = false;
	let registered = { commands: new Set<string>(), tools: new Set<string>(), models: new Set<string>() };
	let nativeUi: Json = null;
	let toolActivity = false;
	let routerCompaction = false;
	let compactionQueued: Json = null;
	let starting: Promise<boolean> | null = null;
	let preloading = false;
	let preloadFailure: string | null = null; // why the startup hello failed, until session_start reports it
	let pendingCustom: Promise<Json> | null = null;
	let tuiKit: Promise<Json> | null = null;
	const openPanels = new Map<string, (params: Json) => void>(); // panel id → update of the open panel
	const refreshing = new Set<string>(); // panels whose refresh is in flight
	const shownWarnings = new Set<string>();
	let trustStatus: string | null = null;
	let approvedDigest: string | null = null;
	let helloAnswered = false; // after the first hello, --approve covers only the content approved then

	// --- lifecycle ----------------------------------------------------------------------------

	function warn(text: string): void {
		logLine(text);
		const ctx = ctxRef;
		if (ctx?.hasUI) attempt(() => ctx.ui.notify(text, "warning"), undefined);
		else process.stderr.write(`[router] ${text}\n`);
	}

	function setStatus(text: string | undefined): void {
		const ctx = ctxRef;
		if (ctx?.hasUI) attempt(() => ctx.ui.setStatus(STATUS_KEY, text), undefined);
	}

	sidecar.onExit = (reason: string) => {
		ready = false;
		if (preloading) {
			logLine(`router: ${reason} (while loading the policy declarations)`);
			return;
		}
		if (stopping) return;
		failures += 1;
		if (!outage) {
			outage = true;
			warn(`router: ${reason}; Pi continues without the policy and the router restarts`);
			setStatus("router: offline (restarting)");
		} else {
			logLine(`router: ${reason}`);
		}
		scheduleRestart();
	};
	sidecar.onRequest = (message: Json) => void answerEngine(message);

	function scheduleRestart(): void {
		if (restartTimer || stopping) return;
		const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.max(0, failures - 1));
		restartTimer = setTimeout(() => {
			restartTimer = null;
			void ensureStarted(ctxRef);
		}, delay);
		restartTimer.unref();
	}

	async function ensureStarted(ctx: Ctx): Promise<boolean> {
		if (ready) return true;
		if (stopping || !ctx) return false;
		if (!starting) starting = start(ctx).finally(() => (starting = null));
		return starting;
	}

	async function start(ctx: Ctx): Promise<boolean> {
		if (preloadFailure !== null) {
			// the sidecar just failed to say hello at startup: Pi starts without waiting once more
			const reason = preloadFailure;
			preloadFailure = null;
			return failedStart(reason);
		}
		try {
			sidecar.start(ctx.cwd ?? process.cwd());
			const hello = await sidecar.call("hello", await helloParams(ctx), HELLO_TIMEOUT_MS);
			if (hello?.protocol !== PROTOCOL) throw new Error(`engine speaks protocol ${hello?.protocol}, bridge ${PROTOCOL}`);
			declare(hello);
			ready = true;
			failures = 0;
			showHelloWarnings(hello);
			showTrust(hello.trust);
			helloAnswered = true;
			if (outage) {
				outage = false;
				logLine("router: sidecar back");
				if (ctxRef?.hasUI) attempt(() => ctxRef.ui.notify("router: policy engine is back", "info"), undefined);
				setStatus(undefined);
			}
			return true;
		} catch (error: any) {
			sidecar.stop();
			return failedStart(error.message);
		}
	}

	function failedStart(reason: string): false {
		ready = false;
		failures += 1;
		if (!outage) {
			outage = true;
			warn(`router: the policy engine did not start (${reason}); Pi continues without it`);
			setStatus("router: offline (restarting)");
		}
		scheduleRestart();
		return false;
	}

	/** Warnings of a `hello` answer, each shown once (a second hello repeats them). */
	function showHelloWarnings(hello: Json): void {
		for (const text of hello?.warnings ?? []) {
			if (shownWarnings.has(text)) continue;
			shownWarnings.add(text);
			warn(`router: ${text}`);
		}
	}

	/**
	 * Pi resolves `--model`, `defaultModel` and a resumed session's model before `session_start`,
	 * and it only knows the virtual models registered while the factories run. So the factory starts
	 * the sidecar and says hello (no UI yet; the engine decides whether the project layer applies)
	 * to register the policy's declarations in time. `session_start` says hello again with the real context.
	 */
	async function preload(): Promise<void> {
		const cwd = process.cwd();
		preloading = true;
		try {
			sidecar.start(cwd);
			const hello = await sidecar.call("hello", {
				protocol: PROTOCOL, cwd, mode: null, hasUI: false, state: null, models: [], preload: true, ...trustFacts(),
			}, HELLO_TIMEOUT_MS, undefined, PRELOAD_LOAD_MS);
			if (hello?.protocol !== PROTOCOL) throw new Error(`engine speaks protocol ${hello?.protocol}, bridge ${PROTOCOL}`);
			declare(hello);
			if (hello.trust?.state === "approved") approvedDigest = hello.trust.digest ?? null;
			helloAnswered = true;
			ready = true;
		} catch (error: any) {
			logLine(`router: could not load the policy declarations at startup: ${error.message}`);
			preloadFailure = error.message;
			ready = false;
			sidecar.stop();
		} finally {
			preloading = false;
		}
	}

	async function helloParams(ctx: Ctx): Promise<Json> {
		return {
			protocol: PROTOCOL, cwd: ctx.cwd, mode: ctx.mode, hasUI: !!ctx.hasUI,
			state: restoredState(ctx), models: availableModels(ctx), registry: await registryFacts(ctx), ...trustFacts(),
		};
	}

	/**
	 * What Pi's registry knows beyond the available chat models, for the engine to check refs
	 * against: the provider ids and the classifier models it lists (a provider that discovers its
	 * models at run time, such as llama.cpp, lists none until asked).
	 */
	async function registryFacts(ctx: Ctx): Promise<Json> {
		const registry = ctx?.modelRegistry;
		const ref = (m: Json) => `${m.provider}/${m.id}`;
		const providers = new Set<string>(attempt(() => registry.getRegisteredProviderIds(), []) as string[]);
		for (const m of attempt(() => registry.getAll(), []) as Json[]) providers.add(String(m.provider));
		let classifiers: string[] = [];
		try {
			classifiers = ((await registry.getModelsOfType("classifier")) ?? []).map(ref);
		} catch {
			// an older Pi without model types: nothing to check against
		}
		return { providers: [...providers], classifiers };
	}

	/**
	 * What Pi says about trust, for the engine to decide on (router/trust/store.py): `--approve` or
	 * `--no-approve` on Pi's command line, and `defaultProjectTrust` from the user's own
	 * `<agent dir>/settings.json` (never the merged settings: a project's `.pi/settings.json` must
	 * not vouch for itself). `approvedDigest` is the content the engine approved for this run at
	 * its first hello; a later hello (new session, restarted sidecar) approves only that content,
	 * never what the files hold by then. The bridge decides nothing.
	 */
	function trustFacts(): Json {
		const argv = process.argv.slice(2);
		let userSettings: Json = null;
		try {
			userSettings = JSON.parse(fs.readFileSync(path.join(agentDir(), "settings.json"), "utf8"));
		} catch {
			userSettings = null;
		}
		return {
			approve: argv.includes("--approve") || argv.includes("-a"),
			noApprove: argv.includes("--no-approve") || argv.includes("-na"),
			settings: { defaultProjectTrust: userSettings?.defaultProjectTrust ?? null },
			approvedDigest, firstHello: !helloAnswered,
		};
	}

	/** The `--model` value Pi was started with (`--model X` or `--model=X`), null without one. */
	function modelFlag(): string | null {
		const argv = process.argv.slice(2);
		for (let i = 0; i < argv.length; i++) {
			if (argv[i] === "--model" && i + 1 < argv.length) return argv[i + 1];
			if (argv[i].startsWith("--model=")) return argv[i].slice("--model=".length);
		}
		return null;
	}

	/** The engine's trust report: its status-line text, set when it changes (the message comes as a warning). */
	function showTrust(trust: Json): void {
		if (trust?.state === "approved" && approvedDigest === null) approvedDigest = trust.digest ?? null;
		const next: string | null = trust && typeof trust === "object" ? (trust.status ?? null) : null;
		if (next === trustStatus) return;
		trustStatus = next;
		setStatus(next ?? undefined);
	}

	function restoredState(ctx: Ctx): Json {
		const branch = attempt(() => ctx.sessionManager.getBranch(), []) as Json[];
		for (let i = branch.length - 1; i >= 0; i--) {
			const entry = branch[i];
			if (entry?.type === "custom" && entry.customType === STATE_ENTRY) return entry.data?.state ?? null;
		}
		return null;
	}

	function availableModels(ctx: Ctx): Json[] {
		return attempt(() => ctx.modelRegistry.getAvailable(), []).map(modelInfo);
	}

	function declare(hello: Json): void {
		subscribed = new Set<string>(hello.events ?? []);
		for (const command of hello.commands ?? []) registerCommand(command);
		for (const tool of hello.tools ?? []) registerTool(tool);
		for (const model of hello.virtual_models ?? []) registerVirtualModel(model);
		skillPaths = (hello.skills ?? []).map(String);
		if (subscribed.has("dialog")) patchUi(ctxRef);
	}

	// --- forwarding ---------------------------------------------------------------------------

	function snapshot(ctx: Ctx): Json {
		const sm = ctx?.sessionManager;
		return {
			cwd: ctx?.cwd, mode: ctx?.mode, hasUI: !!ctx?.hasUI,
			sessionId: attempt(() => sm?.getSessionId(), null), sessionFile: attempt(() => sm?.getSessionFile(), null),
			model: modelInfo(attempt(() => ctx?.model, null)), thinkingLevel: attempt(() => pi.getThinkingLevel(), null),
			activeTools: attempt(() => pi.getActiveTools(), []),
			allTools: attempt(() => pi.getAllTools().map((t: Json) => t.name), []),
			usage: attempt(() => ctx?.getContextUsage?.() ?? null, null),
		};
	}

	/**
	 * Send one event; undefined means "no decision": Pi keeps its native behaviour. With `notices`,
	 * the result's notifications are collected there instead of shown (an open panel shows them).
	 */
	async function forward(type: string, payload: Json, ctx: Ctx, signal?: AbortSignal, notices?: Notice[]): Promise<Json | undefined> {
		if (ctx) ctxRef = ctx;
		if (!subscribed.has(type) || !(await ensureStarted(ctxRef))) return undefined;
		try {
			const result = await sidecar.call("event", { type, payload, ctx: snapshot(ctxRef) }, EVENT_TIMEOUT_MS, signal);
			if (result?.state !== undefined && result.state !== null) {
				attempt(() => pi.appendEntry(STATE_ENTRY, { state: result.state }), undefined);
			}
			if (result?.declarations) declare(result.declarations);
			if (result?.trust) showTrust(result.trust);
			for (const text of result?.warnings ?? []) warn(`router: ${text}`);
			await applyCommon(result?.actions ?? [], ctxRef, notices);
			return result;
		} catch (error: any) {
			if (error instanceof AbortError) return undefined;
			logLine(`event ${type} failed: ${error.message}`);
			if (ready) {
				ready = false;
				sidecar.stop();
				sidecar.onExit(error.message);
			}
			return undefined;
		}
	}

	function actions(result: Json, name: string): Json[] {
		return (result?.actions ?? []).filter((a: Json) => a.action === name).map((a: Json) => a.params);
	}

	function findModel(ctx: Ctx, ref: string): Json {
		const slash = ref.indexOf("/");
		if (slash < 0) return undefined;
		return attempt(() => ctx.modelRegistry.find(ref.slice(0, slash), ref.slice(slash + 1)), undefined);
	}

	async function applyCommon(list: Json[], ctx: Ctx, notices?: Notice[]): Promise<void> {
		for (const { action, params } of list) {
			try {
				if (action === "tools") applyTools(params);
				else if (action === "model") {
					const model = findModel(ctx, String(params.ref));
					if (!model || !(await pi.setModel(model))) warn(`router: model ${params.ref} is not available`);
				} else if (action === "thinking") pi.setThinkingLevel(params.level);
				else if (action === "notify") {
					// without a UI (print and json modes) the action says: stderr
					if (notices) notices.push({ text: String(params.text), level: params.level ?? "info" });
					else if (ctx?.hasUI) ctx.ui.notify(String(params.text), params.level ?? "info");
					else process.stderr.write(`[router] ${params.level && params.level !== "info" ? `${params.level}: ` : ""}${params.text}\n`);
				} else if (action === "status") {
					if (ctx?.hasUI) ctx.ui.setStatus(String(params.key), params.text ?? undefined);
				} else if (action === "follow_up") {
					pi.sendMessage(
						{ customType: params.custom_type, content: String(params.text), display: !params.hidden, details: params.details },
						{ deliverAs: params.deliver ?? "followUp", triggerTurn: true },
					);
				} else if (action === "compact") compact(params, ctx);
				else if (action === "entry") pi.appendEntry(String(params.type), params.data ?? undefined);
				else if (action === "panel") await showPanel(params, ctx);
			} catch (error: any) {
				warn(`router: action ${action} failed: ${error.message}`);
			}
		}
	}

	function applyTools(params: Json): void {
		const known = new Set<string>(pi.getAllTools().map((t: Json) => t.name));
		const active: string[] = pi.getActiveTools();
		const list = (value: Json) => (Array.isArray(value) ? value : [value]).map(String);
		let next: string[];
		if (params.only !== undefined && params.only !== null) next = list(params.only).filter((n) => known.has(n));
		else if (params.add !== undefined && params.add !== null)
			next = [...active, ...list(params.add).filter((n) => known.has(n) && !active.includes(n))];
		else next = active.filter((n) => !list(params.remove).includes(n));
		if (next.length !== active.length || next.some((n, i) => n !== active[i])) pi.setActiveTools(next);
	}

	/**
	 * Whether a compaction is the one a `compact` action started: `ctx.compact()` reports reason
	 * "manual". Pi's own threshold or overflow compaction can start in the gap while the aborted
	 * run winds down; it is not the router's, and it does not clear the flag.
	 */
	function isRouters(reason: string): boolean {
		return routerCompaction && reason === "manual";
	}

	function compact(params: Json, ctx: Ctx): void {
		const run = () => {
			routerCompaction = true;
			try {
				ctx.compact({
					customInstructions: params.instructions ?? undefined,
					onComplete: () => (routerCompaction = false),
					onError: () => (routerCompaction = false),
				});
			} catch (error: any) {
				// a synchronous throw never reaches session_compact_failed: report it the same way
				routerCompaction = false;
				logLine(`ctx.compact failed: ${error?.message ?? error}`);
				void forward("compaction_failed", { reason: "manual", byRouter: true, error: String(error?.message ?? error), aborted: false }, ctx);
			}
		};
		if (params.abort || attempt(() => ctx.isIdle(), false)) run();
		else compactionQueued = run;
	}

	// --- hooks --------------------------------------------------------------------------------

	pi.on("project_trust", async (event: Json, ctx: Ctx) => {
		const result = await forward("project_trust", { cwd: event.cwd }, ctx);
		const [trust] = actions(result, "trust");
		// no rule decided: Pi 1.6 reads `.trusted` of every answer, so say "undecided" (never undefined)
		return trust ? { trusted: trust.trusted, remember: !!trust.remember } : { trusted: "undecided" };
	});

	pi.on("session_start", async (event: Json, ctx: Ctx) => {
		ctxRef = ctx;
		stopping = false;
		if (ready) {
			const hello = await sidecar.call("hello", await helloParams(ctx), HELLO_TIMEOUT_MS).catch(() => null);
			if (hello) {
				declare(hello);
				showHelloWarnings(hello);
				showTrust(hello.trust);
				helloAnswered = true;
			}
		} else if (!(await ensureStarted(ctx))) return;
		await forward("session_start", {
			reason: event.reason, previousSessionFile: event.previousSessionFile, history: history(ctx), modelFlag: modelFlag(),
		}, ctx);
	});

	// skills the policy ships (`skills:`): Pi asks after session_start, when hello has declared them
	pi.on("resources_discover", async () => (skillPaths.length > 0 ? { skillPaths } : undefined));

	pi.on("session_shutdown", async (event: Json, ctx: Ctx) => {
		await forward("session_shutdown", { reason: event.reason }, ctx);
		stopping = true;
		if (restartTimer) clearTimeout(restartTimer);
		if (ready) await sidecar.call("shutdown", {}, 500).catch(() => undefined);
		ready = false;
		sidecar.stop();
	});

	pi.on("input", async (event: Json, ctx: Ctx) => {
		const result = await forward("input", {
			text: event.text, source: event.source, images: event.images?.length ?? 0, streamingBehavior: event.streamingBehavior,
		}, ctx);
		const [reply] = actions(result, "input");
		if (reply?.action === "transform") return { action: "transform", text: String(reply.text ?? event.text) };
		if (reply?.action === "handled") return { action: "handled" };
		return undefined;
	});

	pi.on("before_agent_start", async (event: Json, ctx: Ctx) => {
		const options = event.systemPromptOptions ?? {};
		const result = await forward("before_agent_start", {
			prompt: event.prompt, messageType: event.messageType, systemPrompt: event.systemPrompt,
			sections: Object.keys(options.sections ?? {}),
		}, ctx);
		for (const section of actions(result, "section")) {
			options.sections = options.sections ?? {};
			options.sections[String(section.name)] = String(section.text);
		}
		let prompt: string = event.systemPrompt;
		for (const append of actions(result, "system_append")) {
			if (!append.marker || !prompt.includes(String(append.marker))) prompt = `${prompt}\n\n${append.text}`;
		}
		return prompt !== event.systemPrompt ? { systemPrompt: prompt } : undefined;
	});

	pi.on("context", async (event: Json, ctx: Ctx) => {
		if (!subscribed.has("context")) return undefined;
		const messages: Json[] = event.messages ?? [];
		const result = await forward("context", {
			messages: messages.map((m: Json) => ({ role: m.role, text: textOf(m.content), customType: m.customType, toolName: m.toolName })),
		}, ctx);
		const additions = actions(result, "context_message");
		if (additions.length === 0) return undefined;
		let next = [...messages];
		for (const add of additions) {
			const message =
				add.role === "custom"
					? { role: "custom", customType: add.custom_type, content: String(add.text), display: false, timestamp: Date.now() }
					: { role: "user", content: [{ type: "text", text: String(add.text) }], timestamp: Date.now(), routerType: add.custom_type };
			if (add.custom_type) next = next.filter((m: Json) => m.customType !== add.custom_type && m.routerType !== add.custom_type);
			let at = next.length;
			if (add.position !== "end") {
				for (let i = next.length - 1; i >= 0; i--) if (next[i].role === "user") { at = i + 1; break; }
			}
			next.splice(at, 0, message);
		}
		return { messages: next };
	});

	pi.on("turn_start", async (event: Json, ctx: Ctx) => {
		await forward("turn_start", { turnIndex: event.turnIndex }, ctx);
	});

	pi.on("agent_start", async () => {
		toolActivity = false;
	});

	pi.on("turn_end", async (event: Json, ctx: Ctx) => {
		const calls = (event.message?.content ?? []).filter((b: Json) => b?.type === "toolCall").length;
		const results = event.toolResults?.length ?? 0;
		if (calls || results) toolActivity = true;
		const message = event.message ?? {};
		await forward("turn_end", {
			turnIndex: event.turnIndex, outcome: event.outcome, toolCalls: calls, toolResults: results,
			stopReason: message.stopReason, usage: message.usage ?? null,
			answeredBy: message.provider && message.model ? `${message.provider}/${message.model}` : null,
		}, ctx);
	});

	pi.on("agent_settled", async (event: Json, ctx: Ctx) => {
		await forward("agent_settled", { aborted: !!event.aborted, hadToolActivity: toolActivity }, ctx);
		if (compactionQueued) {
			const run = compactionQueued;
			compactionQueued = null;
			attempt(run, undefined);
		}
	});

	pi.on("tool_call", async (event: Json, ctx: Ctx) => {
		if (subscribed.has("dialog")) patchUi(ctx);
		const result = await forward("tool_call", { toolName: event.toolName, toolCallId: event.toolCallId, input: event.input }, ctx);
		const [block] = actions(result, "block");
		return block ? { block: true, reason: String(block.reason) } : undefined;
	});

	pi.on("tool_result", async (event: Json, ctx: Ctx) => {
		const result = await forward("tool_result", {
			toolName: event.toolName, toolCallId: event.toolCallId, input: event.input, text: textOf(event.content), isError: !!event.isError,
		}, ctx);
		const [rewrite] = actions(result, "rewrite_result");
		if (!rewrite) return undefined;
		const patch: Json = { content: [{ type: "text", text: String(rewrite.text) }] };
		if (typeof rewrite.is_error === "boolean") patch.isError = rewrite.is_error;
		return patch;
	});

	pi.on("model_select", async (event: Json, ctx: Ctx) => {
		await forward("model_select", { source: event.source, previousModel: modelInfo(event.previousModel) }, ctx);
	});

	pi.on("thinking_level_select", async (event: Json, ctx: Ctx) => {
		await forward("thinking_level_select", { level: event.level, previousLevel: event.previousLevel }, ctx);
	});

	pi.on("session_before_compact", async (event: Json, ctx: Ctx) => {
		const result = await forward("compaction_before", {
			reason: event.reason, tokensBefore: event.preparation?.tokensBefore, byRouter: isRouters(event.reason),
		}, ctx);
		return actions(result, "cancel").length > 0 ? { cancel: true } : undefined;
	});

	pi.on("session_compact", async (event: Json, ctx: Ctx) => {
		const byRouter = isRouters(event.reason);
		if (byRouter) routerCompaction = false;
		await forward("compaction_done", { reason: event.reason, byRouter, tokensBefore: event.compactionEntry?.tokensBefore }, ctx);
	});

	pi.on("session_compact_failed", async (event: Json, ctx: Ctx) => {
		const byRouter = isRouters(event.reason);
		if (byRouter) routerCompaction = false;
		await forward("compaction_failed", { reason: event.reason, byRouter, error: event.errorMessage, aborted: !!event.aborted }, ctx);
	});

	// --- registrations declared by the policy ---------------------------------------------------

	function history(ctx: Ctx): Json {
		const texts = (attempt(() => ctx.sessionManager.getBranch(), []) as Json[])
			.filter((e: Json) => e?.type === "message" && e.message?.role === "user")
			.map((e: Json) => textOf(e.message.content));
		return { userMessages: texts.length, firstUserText: texts[0] ?? null, lastUserText: texts[texts.length - 1] ?? null };
	}

	function excerpt(ctx: Ctx): Json[] {
		const entries = (attempt(() => ctx.sessionManager.getBranch(), []) as Json[]).filter((e: Json) => e?.type === "message");
		return entries.slice(-EXCERPT_ENTRIES).map((e: Json) => ({ role: e.message?.role, text: textOf(e.message?.content) }));
	}

	function registerCommand(command: Json): void {
		if (registered.commands.has(command.name)) return;
		registered.commands.add(command.name);
		const items = (command.completions ?? []).map((c: Json) =>
			typeof c === "string" ? { value: c, label: c } : { value: String(c.value), label: String(c.label ?? c.value), description: c.description },
		);
		pi.registerCommand(command.name, {
			description: command.description,
			getArgumentCompletions: items.length
				? (prefix: string) => {
						const found = items.filter((i: Json) => i.value.startsWith(prefix));
						return found.length ? found : null;
					}
				: undefined,
			handler: async (args: string, ctx: Ctx) => {
				await forward("command", { name: command.name, args: args ?? "" }, ctx);
			},
		});
	}

	function registerTool(tool: Json): void {
		if (registered.tools.has(tool.name)) return;
		registered.tools.add(tool.name);
		pi.registerTool({
			name: tool.name, label: tool.label ?? tool.name, description: tool.description,
			promptSnippet: tool.prompt_snippet ?? undefined, promptGuidelines: tool.guidelines ?? [],
			parameters: tool.parameters, executionMode: tool.sequential ? "sequential" : "parallel",
			async execute(_id: string, params: Json, signal: AbortSignal | undefined, _update: Json, ctx: Ctx) {
				const result = await forward("question", { toolName: tool.name, source: "tool", input: params, excerpt: excerpt(ctx) }, ctx, signal);
				if (signal?.aborted) return { content: [{ type: "text", text: "aborted" }], details: {}, isError: true };
				const [answer] = actions(result, "answer");
				if (!answer) {
					return { content: [{ type: "text", text: "No automated answer is available; decide yourself or ask the user." }], details: {}, isError: true };
				}
				const text = answer.text ?? (typeof answer.value === "string" ? answer.value : JSON.stringify(answer.value));
				return { content: [{ type: "text", text: String(text) }], details: answer.details ?? {} };
			},
		});
	}

	function registerVirtualModel(model: Json): void {
		const ref = `${model.provider}/${model.id}`;
		if (registered.models.has(ref)) return;
		registered.models.add(ref);
		pi.registerVirtualModel({
			provider: model.provider, id: model.id, name: model.name ?? ref, thinkingLevels: model.thinking_levels,
			contextWindow: model.context_window ?? undefined, maxTokens: model.max_tokens ?? undefined,
			route: async (request: Json) => {
				const messages: Json[] = request.messages ?? [];
				const users = messages.filter((m: Json) => m.role === "user");
				const result = await forward("route", {
					reason: request.reason, virtual: { provider: model.provider, id: model.id }, thinkingLevel: request.thinkingLevel,
					previous: request.previous ? { provider: request.previous.model?.provider, id: request.previous.model?.id, thinkingLevel: request.previous.thinkingLevel } : null,
					failed: request.failed ? {
						provider: request.failed.model?.provider, id: request.failed.model?.id, thinkingLevel: request.failed.thinkingLevel,
						stopReason: request.failed.message?.stopReason, errorMessage: request.failed.message?.errorMessage,
					} : null,
					state: request.state ?? null, lastUserText: users.length ? textOf(users[users.length - 1].content) : null,
					lastIsToolResult: messages.length > 0 && messages[messages.length - 1].role === "toolResult", messageCount: messages.length,
				}, ctxRef, request.signal);
				// an aborted run cancels the routing (a classifier call, a wait for a slot): no model for it
				if (request.signal?.aborted) throw new Error("aborted");
				const [route] = actions(result, "route");
				if (route?.error) throw new Error(String(route.error));
				const chosen = route ? findModel(ctxRef, String(route.model)) : undefined;
				if (chosen) return { model: chosen, thinkingLevel: route.thinking ?? request.thinkingLevel, state: route.state ?? undefined };
				if (route) warn(`router: route to unknown model ${route.model}; using a fallback`);
				const fallback = request.previous?.model ?? firstPhysical();
				if (!fallback) throw new Error(`router: no model to route ${ref} to`);
				return { model: fallback, thinkingLevel: request.previous?.thinkingLevel ?? request.thinkingLevel };
			},
		});
	}

	function firstPhysical(): Json {
		return attempt(() => ctxRef.modelRegistry.getAvailable(), []).find((m: Json) => m.api !== "pi-virtual");
	}

	// --- dialogs ------------------------------------------------------------------------------

	function patchUi(ctx: Ctx): void {
		const ui = ctx?.ui;
		if (!ui || ui.__routerPatched) return;
		nativeUi = { select: ui.select.bind(ui), confirm: ui.confirm.bind(ui), input: ui.input.bind(ui), editor: ui.editor.bind(ui), custom: ui.custom?.bind(ui) };
		const native = nativeUi;
		const ask = async (kind: string, payload: Json, fallback: () => Promise<Json>) => {
			const result = await forward("dialog", { kind, ...payload, excerpt: excerpt(ctxRef) }, ctxRef);
			const [answer] = actions(result, "answer");
			return answer && answer.value !== undefined && answer.value !== null ? answer.value : fallback();
		};
		try {
			ui.select = (title: string, options: string[], opts?: Json) =>
				ask("select", { title, options }, () => native.select(title, options, opts));
			ui.confirm = async (title: string, message: string, opts?: Json) =>
				Boolean(await ask("confirm", { title, message }, () => native.confirm(title, message, opts)));
			ui.input = (title: string, placeholder?: string, opts?: Json) =>
				ask("input", { title, placeholder }, () => native.input(title, placeholder, opts));
			ui.editor = (title: string, prefill?: string) => ask("editor", { title, prefill }, () => native.editor(title, prefill));
			if (native.custom) {
				ui.custom = async (factory: Json, opts?: Json) => {
					const decided = pendingCustom;
					pendingCustom = null;
					const value = decided ? await decided : undefined;
					return value !== undefined && value !== null ? value : native.custom(factory, opts);
				};
			}
			ui.__routerPatched = true;
		} catch (error: any) {
			logLine(`cannot patch ctx.ui: ${error.message}`);
		}
	}

	/**
	 * The rpiv questionnaire protocol, as the original pi-decision-router answers it: an extension
	 * emits `rpiv:ask-user:prompt` with a questionnaire on Pi's event bus, then opens
	 * `ctx.ui.custom`. The questionnaire is sent as a `question` event (source "event"); the
	 * answer a rule gives is what that `custom` call returns, and without one Pi's own `custom` runs. When the engine fails (no result at all), `custom`
	 * returns the protocol's cancelled answer, as the original does when its decision throws.
	 * `rpiv:ask-user:blocked` with `active: false` drops a pending answer.
	 */
	function listenToQuestionnaires(): void {
		const cancelled = () => ({ answers: [], cancelled: true });
		attempt(() => pi.events.on(RPIV_PROMPT, (payload: Json) => {
			if (!subscribed.has("question")) return;
			pendingCustom = forward("question", {
				toolName: RPIV_PROMPT, source: "event", input: payload, excerpt: excerpt(ctxRef),
			}, ctxRef)
				.then((result) => (result === undefined ? cancelled() : (actions(result, "answer")[0]?.value ?? null)))
				.catch(cancelled);
		}), undefined);
		attempt(() => pi.events.on(RPIV_BLOCKED, (payload: Json) => {
			if (payload?.active === false) pendingCustom = null;
		}), undefined);
	}

	// --- the settings panel (`panel` action) ----------------------------------------------------

	/**
	 * A `panel` action. In Pi's TUI: a searchable settings list through `ctx.ui.custom`, built from
	 * pi-tui's SettingsList and Input (Pi makes `@earendil-works/pi-tui` importable for extensions;
	 * nothing is installed). Each change runs the policy's command (`<args> KEY VALUE`, VALUE as
	 * JSON), then its refresh, whose `panel` action with the same id updates the open panel in place.
	 * Without the TUI the panel is shown as text. The promise ends when the panel is closed.
	 */
	async function showPanel(params: Json, ctx: Ctx): Promise<void> {
		const id = String(params.id);
		const open = openPanels.get(id);
		if (open) return open(params);
		if (refreshing.has(id)) return; // the answer to a refresh of a panel closed meanwhile
		const custom = nativeUi?.custom ?? (typeof ctx?.ui?.custom === "function" ? ctx.ui.custom.bind(ctx.ui) : null);
		const kit = ctx?.mode === "tui" && custom ? await loadTuiKit() : null;
		if (!kit) return showPanelText(params, ctx);
		try {
			await custom((tui: Json, theme: Json, _keys: Json, done: (value: Json) => void) => {
				const panel = panelView(kit, params, tui, theme, () => done(undefined));
				openPanels.set(id, panel.update);
				return panel.component;
			});
		} catch (error: any) {
			logLine(`router: panel ${id} failed (${error?.message ?? error}); shown as text`);
			showPanelText(params, ctx);
		} finally {
			openPanels.delete(id);
		}
	}

	function loadTuiKit(): Promise<Json> {
		tuiKit ??= import("@earendil-works/pi-tui")
			.then((kit: Json) => (kit?.SettingsList && kit?.Input ? kit : null))
			.catch((error: any) => {
				logLine(`router: @earendil-works/pi-tui cannot be imported (${error?.message ?? error}); panels are shown as text`);
				return null;
			});
		return tuiKit;
	}

	function showPanelText(params: Json, ctx: Ctx): void {
		const lines = [String(params.title ?? "")];
		if (params.text) lines.push(String(params.text));
		for (const item of panelItems(params)) lines.push(`${itemLabel(item)}: ${shownValue(item)}`);
		const text = lines.join("\n");
		if (ctx?.hasUI) ctx.ui.notify(text, "info");
		else process.stderr.write(`[router] ${text}\n`);
	}

	/** The panel's component and the function that updates it from a later `panel` action. */
	function panelView(kit: Json, params: Json, tui: Json, theme: Json, close: () => void): { component: Json; update: (next: Json) => void } {
		let current = params;
		let message: Notice | null = null;
		let queue: Promise<void> = Promise.resolve();
		const items = new Map<string, Json>(panelItems(params).map((item: Json) => [String(item.key), item]));
		const pending = new Map<string, string>(); // key → the JSON an input submitted
		const rows = [...items.keys()].map((key: string) =>
			settingItem(kit, () => items.get(key), theme, tui, (json) => pending.set(key, json)));
		const listTheme = {
			label: (text: string, selected: boolean) => (selected ? theme.fg("accent", text) : text),
			value: (text: string, selected: boolean) => (selected ? theme.fg("accent", text) : theme.fg("muted", text)),
			description: (text: string) => theme.fg("dim", text),
			cursor: theme.fg("accent", "→ "),
			hint: (text: string) => theme.fg("dim", text),
		};
		const list = new kit.SettingsList(rows, Math.min(rows.length, PANEL_ROWS), listTheme,
			(key: string, shown: string) => {
				const item = items.get(key);
				if (!item) return;
				const json = pending.get(key) ?? cycledJson(item, shown);
				pending.delete(key);
				queue = queue.then(() => applyChange(item, json)).catch((error: any) => say(`router: ${error?.message ?? error}`, "error"));
			},
			close, { enableSearch: true });

		function say(text: string, level: string): void {
			message = { text, level };
			attempt(() => tui.requestRender(), undefined);
		}

		async function applyChange(item: Json, json: string): Promise<void> {
			const name = String(current.command);
			const notices: Notice[] = [];
			say(`${itemLabel(item)}: saving…`, "info");
			const args = [String(current.args ?? ""), String(item.key), json].filter(Boolean).join(" ");
			const result = await forward("command", { name, args }, ctxRef, undefined, notices);
			if (result === undefined) notices.push({ text: `router: ${itemLabel(item)} was not changed: the policy engine did not answer`, level: "error" });
			if (current.refresh !== null && current.refresh !== undefined) {
				refreshing.add(String(current.id));
				try {
					await forward("command", { name, args: String(current.refresh) }, ctxRef, undefined, notices);
				} finally {
					refreshing.delete(String(current.id));
				}
			}
			const worst = notices.find((n) => n.level === "error") ?? notices.find((n) => n.level === "warning");
			const text = notices.map((n) => n.text).join(" · ") || `${itemLabel(item)} = ${json}`;
			say(text, worst?.level ?? "info");
		}

		function update(next: Json): void {
			current = next;
			for (const item of panelItems(next)) {
				const key = String(item.key);
				if (!items.has(key)) continue; // the set of items is the one the panel opened with
				items.set(key, item);
				list.updateValue(key, shownValue(item));
				const row = rows.find((r: Json) => r.id === key);
				if (row) row.description = item.description ?? undefined;
			}
			attempt(() => tui.requestRender(), undefined);
		}

		const component = {
			render(width: number): string[] {
				const inner = Math.max(1, width - 2);
				const wrap = (text: string) => kit.wrapTextWithAnsi(text, inner).map((line: string) => ` ${line}`);
				const border = theme.fg("border", "─".repeat(Math.max(1, width)));
				const lines = [border, ` ${theme.bold(theme.fg("accent", String(current.title ?? "")))}`];
				if (current.text) lines.push(...wrap(theme.fg("muted", String(current.text))));
				if (message) lines.push(...wrap(theme.fg(message.level === "info" ? "success" : message.level, message.text)));
				lines.push("", ...list.render(width), border);
				return lines.map((line: string) => kit.truncateToWidth(line, width));
			},
			handleInput(data: string): void {
				list.handleInput(data);
				attempt(() => tui.requestRender(), undefined);
			},
			invalidate(): void {
				list.invalidate();
			},
		};
		return { component, update };
	}

	/** One row of the SettingsList (`latest`: the item as the last refresh gave it): bool and choice cycle, the other kinds open an input. */
	function settingItem(kit: Json, latest: () => Json, theme: Json, tui: Json, submit: (json: string) => void): Json {
		const item = latest();
		const row: Json = { id: String(item.key), label: itemLabel(item), description: item.description ?? undefined, currentValue: shownValue(item) };
		if (item.kind === "bool") row.values = ["true", "false"];
		else if (item.kind === "choice") row.values = (item.choices ?? []).map(String);
		else row.submenu = (_shown: string, finish: (shown?: string) => void) => inputView(kit, latest(), theme, tui, submit, finish);
		return row;
	}

	/** The inline input of a text, number, list or json item; a value that does not fit stays open. */
	function inputView(kit: Json, item: Json, theme: Json, tui: Json, submit: (json: string) => void, finish: (shown?: string) => void): Json {
		const input = new kit.Input();
		let problem = "";
		input.focused = true;
		input.handleInput(`\x1b[200~${editText(item)}\x1b[201~`); // as a paste: the cursor ends after it
		input.onSubmit = (text: string) => {
			const parsed = parseEdit(item, text);
			if ("error" in parsed) {
				problem = parsed.error;
				attempt(() => tui.requestRender(), undefined);
				return;
			}
			submit(parsed.json);
			finish(shownValue({ ...item, value: JSON.parse(parsed.json) }));
		};
		input.onEscape = () => finish(undefined);
		return {
			render(width: number): string[] {
				const lines = [`  ${theme.fg("accent", itemLabel(item))}${item.kind === "list" ? theme.fg("dim", " (comma-separated)") : ""}`,
					...input.render(Math.max(1, width - 2)).map((line: string) => `  ${line}`)];
				if (problem) lines.push(`  ${theme.fg("error", problem)}`);
				lines.push("", theme.fg("dim", "  Enter to save · Esc to cancel"));
				return lines.map((line: string) => kit.truncateToWidth(line, width));
			},
			handleInput(data: string): void {
				problem = "";
				input.handleInput(data);
			},
			invalidate(): void {
				input.invalidate();
			},
		};
	}

	// --- requests from the engine ---------------------------------------------------------------

	async function answerEngine(message: Json): Promise<void> {
		const { id, method, params } = message;
		if (method === "progress") {
			sidecar.extend(params.id, Number(params.budget_ms) || EVENT_TIMEOUT_MS);
			return;
		}
		if (method === "log") {
			logLine(String(params?.text ?? ""));
			return;
		}
		let result: Json;
		try {
			if (method === "classify") result = await classify(params);
			else if (method === "complete") result = await complete(params);
			else if (method === "ask") result = await askUser(params);
			else throw new Error(`unknown request ${method}`);
		} catch (error: any) {
			result = { error: error.message };
		}
		if (id !== undefined) sidecar.write({ id, result });
	}

	async function classify(params: Json): Promise<Json> {
		const registry = ctxRef?.modelRegistry;
		const ref = String(params.model ?? "");
		const slash = ref.indexOf("/");
		if (!registry || slash < 0) return { stopReason: "error", errorMessage: `invalid classifier model ${ref}` };
		const [provider, id] = [ref.slice(0, slash), ref.slice(slash + 1)];
		let model = attempt(() => registry.findOfType("classifier", provider, id), undefined);
		if (!model) {
			await registry.refresh({ providers: [provider], allowNetwork: true }).catch(() => undefined);
			model = attempt(() => registry.findOfType("classifier", provider, id), undefined);
		}
		if (!model) return { stopReason: "error", errorMessage: `classifier model not found: ${ref}` };
		const timeoutMs = Number(params.timeoutMs) || 4000;
		// Pi's own per-try timeout reports "Request timed out after …ms"; the signal is the last resort
		const deadline = AbortSignal.timeout(timeoutMs + 500);
		const reply = await registry.classify(model, { state: params.state ?? {}, questions: params.questions ?? {} }, {
			signal: deadline, timeoutMs, maxRetries: Number(params.maxRetries) || 0,
		});
		const errorMessage = reply.stopReason === "aborted" && deadline.aborted ? `Request timed out after ${timeoutMs}ms` : reply.errorMessage;
		return { answers: reply.answers ?? {}, stopReason: reply.stopReason, errorMessage };
	}

	async function complete(params: Json): Promise<Json> {
		const model = params.model ? findModel(ctxRef, String(params.model)) : ctxRef?.model;
		if (!model) return { error: `model not found: ${params.model}` };
		const reply = await ctxRef.modelRegistry.complete(model, {
			systemPrompt: params.systemPrompt ?? undefined,
			messages: [{ role: "user", content: [{ type: "text", text: String(params.prompt ?? "") }], timestamp: Date.now() }],
		}, { signal: AbortSignal.timeout(Number(params.timeoutMs) || 45000) });
		if (reply.stopReason === "error" || reply.stopReason === "aborted") return { error: reply.errorMessage ?? reply.stopReason };
		return { text: textOf(reply.content) };
	}

	async function askUser(params: Json): Promise<Json> {
		const ui = nativeUi ?? ctxRef?.ui;
		if (!ctxRef?.hasUI || !ui) return { value: null };
		if (params.confirm) return { value: (await ui.confirm(String(params.title ?? ""), String(params.message ?? ""))) === true };
		if (params.select) {
			const options = Array.isArray(params.select) ? params.select.map(String) : [String(params.select)];
			return { value: (await ui.select(String(params.title ?? ""), options)) ?? null };
		}
		return { value: (await ui.input(String(params.title ?? ""), params.placeholder ?? undefined)) ?? null };
	}

	listenToQuestionnaires();
	await preload();
}
