/**
 * The JSON-lines connection to one sidecar (docs/protocol.md, "Framing"): starting it (a spawned
 * process, or one forked by the warm sidecar: warm.mjs), request ids, deadlines that the engine's
 * `progress` notes extend, cancelling, and failing: on a crash, a line that is not JSON or a line
 * over the limit, every pending request is rejected and `onExit` says why (the lifecycle restarts
 * the sidecar; Pi goes on without it meanwhile).
 */
/**
 * @import { EngineRequest, Link, LinkEvents, Pending, Resolved, StartRequest } from "./types.js"
 */
import { spawn } from "node:child_process";
import * as net from "node:net";
import { resolveServe } from "./resolve.mjs";
import { agentDir, attempt, errorText, isObject, logLine, neutralDir } from "./util.mjs";
import { endWarmServer, startRequest, startWarmServer, usableSocket, warmSocket } from "./warm.mjs";

export const MAX_BUDGET_MS = 600000; // no progress note extends a wait beyond this
export const MAX_LINE_CHARS = 64 * 1024 * 1024; // as the sidecar's own limit (router/runtime/protocol.py)
const KILL_AFTER_MS = 1000;
/** A warm server forks a sidecar in milliseconds: one that says nothing for this long is wedged (stopped). */
export const WARM_ANSWER_MS = Number(process.env.ROUTER_WARM_ANSWER_MS) || 1000;

/** The run was aborted (not a failure of the engine). */
export class AbortError extends Error {
	constructor() {
		super("aborted");
	}
}

/**
 * `router serve` as a child process of Pi.
 * @param {string} program
 * @param {string[]} args
 * @param {NodeJS.ProcessEnv} env
 * @param {string} via
 * @param {LinkEvents} events
 * @returns {Link}
 */
function spawnLink(program, args, env, via, events) {
	// Never run in the project: `python -m` would import a module the repository ships
	// (`argparse.py`, `router/`) before the router's own. The engine gets the project as --cwd.
	const proc = spawn(program, args, { cwd: neutralDir(), stdio: ["pipe", "pipe", "pipe"], env });
	proc.stdout?.setEncoding("utf8");
	proc.stdout?.on("data", /** @param {string} chunk */ (chunk) => events.data(chunk));
	proc.stderr?.on("data", /** @param {Buffer} chunk */ (chunk) => logLine(`sidecar stderr: ${chunk.toString().trimEnd()}`));
	proc.on("error", (error) => events.gone(`sidecar failed to start (${program}, from ${via}): ${error.message}`));
	proc.on("exit", (code, signal) => events.gone(`sidecar exited (code ${code}, signal ${signal})`));
	proc.stdin?.on("error", () => {});
	const kill = () => attempt(() => proc.kill("SIGKILL"), false);
	return {
		warm: false,
		write: (text) => proc.stdin?.write(text),
		kill,
		stop: () => {
			attempt(() => (proc.stdin?.end(), true), false);
			attempt(() => (proc.unref(), proc.stdout?.destroy(), proc.stderr?.destroy(), true), false);
			const killer = setTimeout(kill, KILL_AFTER_MS);
			killer.unref();
			// Pi may exit before the timer fires: a stopped or spinning sidecar must not outlive it
			process.once("exit", kill);
			proc.on("exit", () => {
				clearTimeout(killer);
				process.removeListener("exit", kill);
			});
		},
	};
}

/**
 * A sidecar forked by the warm server: the start request goes first, the protocol's lines wait
 * for its `{"warm": "ok"}`; a refusal, or a socket that fails before it, falls back to `fallback`
 * (a spawned sidecar gets the waiting lines), so the caller never sees the difference.
 * @implements {Link}
 */
class WarmLink {
	/**
	 * @type {net.Socket}
	 * @private
	 * @readonly
	 */
	socket;
	/**
	 * @type {string[] | null}
	 * @private
	 */
	waiting = []; // lines written before the forked sidecar said ok
	/** @private */ head = "";
	/**
	 * @type {Link | null}
	 * @private
	 */
	inner = null;
	/** @private */ pid = 0;
	/** @private */ stopped = false;
	/** @private */ closed = false;
	/**
	 * @type {() => Link}
	 * @private
	 * @readonly
	 */
	fallback;
	/**
	 * @type {LinkEvents}
	 * @private
	 * @readonly
	 */
	events;
	/**
	 * @type {NodeJS.Timeout}
	 * @private
	 * @readonly
	 */
	answerTimer;

	/**
	 * @param {string} socketPath
	 * @param {StartRequest} request
	 * @param {() => Link} fallback
	 * @param {LinkEvents} events
	 */
	constructor(socketPath, request, fallback, events) {
		this.fallback = fallback;
		this.events = events;
		this.socket = net.createConnection(socketPath);
		this.socket.setEncoding("utf8");
		this.socket.write(`${JSON.stringify(request)}\n`);
		// a stopped or wedged server accepts (the kernel does) and never answers: replace it at once
		this.answerTimer = setTimeout(() => this.wedged(socketPath), WARM_ANSWER_MS);
		this.answerTimer.unref();
		this.socket.on("data", /** @param {string} chunk */ (chunk) => this.data(chunk));
		this.socket.on("error", (error) => this.lost(error.message));
		this.socket.on("close", () => {
			this.closed = true; // the forked sidecar's end: its pid may be another process's from now on
			this.lost("the connection closed");
		});
	}

	/** @returns {boolean} */ get warm() {
		return this.inner === null;
	}

	/**
	 * @param {string} text
	 * @returns {void}
	 */
	write(text) {
		if (this.inner) this.inner.write(text);
		else if (this.waiting) this.waiting.push(text);
		else this.socket.write(text);
	}

	/**
	 * @returns {void}
	 */
	stop() {
		this.stopped = true;
		if (this.inner) return this.inner.stop();
		attempt(() => (this.socket.end(), this.socket.unref(), true), false);
		const killer = setTimeout(() => this.kill(), KILL_AFTER_MS);
		killer.unref();
		// Pi may exit first: a stopped or spinning sidecar must not outlive it (unless it ended)
		process.once("exit", () => this.kill());
	}

	/**
	 * SIGKILL the forked sidecar while its connection is open (after that its pid is not ours).
	 * @returns {void}
	 */
	kill() {
		this.stopped = true;
		if (this.inner) return this.inner.kill();
		if (this.pid && !this.closed) attempt(() => process.kill(this.pid, "SIGKILL"), false);
		attempt(() => (this.socket.destroy(), true), false);
	}

	/**
	 * @param {string} chunk
	 * @returns {void}
	 * @private
	 */
	data(chunk) {
		if (!this.waiting) return this.events.data(chunk);
		this.head += chunk;
		const newline = this.head.indexOf("\n");
		if (newline < 0) {
			if (this.head.length > 4096) this.refused("no start answer");
			return;
		}
		const first = attempt(() => /** @type {unknown} */ (JSON.parse(this.head.slice(0, newline))), null);
		const rest = this.head.slice(newline + 1);
		if (!isObject(first) || first.warm !== "ok" || typeof first.pid !== "number") {
			return this.refused(isObject(first) && typeof first.reason === "string" ? first.reason : "an answer that is not ok");
		}
		this.pid = first.pid;
		clearTimeout(this.answerTimer);
		const waiting = this.waiting;
		this.waiting = null;
		for (const line of waiting) this.socket.write(line);
		if (rest) this.events.data(rest);
	}

	/**
	 * @param {string} reason
	 * @returns {void}
	 * @private
	 */
	lost(reason) {
		if (this.inner || this.stopped) return;
		if (this.waiting) return this.refused(reason);
		this.events.gone(`sidecar connection ended (warm sidecar, pid ${this.pid}): ${reason}`);
	}

	/**
	 * No start answer in time: the server is stopped or wedged; it is ended and this run spawns its sidecar.
	 * @param {string} socketPath
	 * @returns {void}
	 * @private
	 */
	wedged(socketPath) {
		if (!this.waiting || this.inner || this.stopped) return;
		endWarmServer(socketPath);
		this.refused(`no start answer within ${WARM_ANSWER_MS} ms: the warm server is stopped or wedged and was ended`);
	}

	/**
	 * @param {string} reason
	 * @returns {void}
	 * @private
	 */
	refused(reason) {
		if (this.inner || this.stopped) return;
		clearTimeout(this.answerTimer);
		logLine(`router: the warm sidecar did not serve this run (${reason}); starting the sidecar`);
		attempt(() => (this.socket.destroy(), true), false);
		/** @type {string[]} */
		const waiting = this.waiting ?? [];
		this.waiting = null;
		this.inner = this.fallback();
		for (const line of waiting) this.inner.write(line);
		this.events.fellBack();
	}
}

/**
 * One sidecar at a time. Its output is decoded as a UTF-8 stream (a character split between two
 * chunks stays whole) into a buffer of at most `maxLineChars`; a longer line, like a line that is
 * not JSON, counts as a protocol error: the sidecar is replaced.
 */
export class Sidecar {
	/**
	 * @type {Link | null}
	 * @private
	 */
	link = null;
	/** @private */ buffer = "";
	/** @private */ scanned = 0; // characters of the buffer known to hold no newline
	/** @private */ nextId = 1;
	/**
	 * @private
	 * @readonly
	 */
	pending = /** @type {Map<number, Pending>} */ (new Map());
	/**
	 * @type {() => Resolved}
	 * @private
	 * @readonly
	 */
	resolveCommand;
	/**
	 * @type {number}
	 * @private
	 * @readonly
	 */
	maxLineChars;
	/**
	 * @type {boolean}
	 * @private
	 * @readonly
	 */
	useWarm;
	/**
	 * @type {{ command: string[]; socket: string } | null}
	 * @private
	 */
	warmToStart = null;
	/** @type {(message: EngineRequest) => void} */ onRequest = () => {};
	/** @type {(reason: string) => void} */ onExit = () => {};

	/**
	 * @param {{ resolve?: () => Resolved; maxLineChars?: number; warm?: boolean }} [options]
	 */
	constructor(options = {}) {
		this.resolveCommand = options.resolve ?? (() => resolveServe());
		this.maxLineChars = options.maxLineChars ?? MAX_LINE_CHARS;
		this.useWarm = options.warm ?? true;
	}

	/**
	 * The command that starts the sidecar (resolved anew each time: the user may change it).
	 * @returns {string[]}
	 */
	command() {
		return this.resolveCommand().command;
	}

	/**
	 * @param {string} cwd
	 * @returns {void}
	 */
	start(cwd) {
		const { command, via } = this.resolveCommand();
		const [program = "router", ...args] = command;
		const argv = [...args, "--cwd", cwd, "--agent-dir", agentDir()];
		const env = { ...process.env, PYTHONSAFEPATH: "1" };
		this.buffer = "";
		this.scanned = 0;
		// A replaced sidecar (stopped after a timeout, killed a second later) must not touch its
		// successor: its late output and its end are ignored.
		/** @type {Link | null} */
		let link = null;
		const current = () => this.link !== null && this.link === link;
		/** @type {LinkEvents} */
		const events = {
			data: (chunk) => {
				if (current()) this.read(chunk);
			},
			gone: (reason) => {
				if (current()) this.fail(reason);
			},
			fellBack: () => {
				if (current()) for (const entry of this.pending.values()) entry.rearm();
			},
		};
		const spawned = () => spawnLink(program, argv, env, via, events);
		const socket = this.useWarm ? warmSocket(command) : null; // only for `… serve [options]`
		const serve = args.indexOf("serve");
		this.warmToStart = socket !== null ? { command, socket } : null;
		link = socket !== null && usableSocket(socket)
			? new WarmLink(socket, startRequest(argv.slice(serve + 1), env), spawned, events)
			: spawned();
		this.link = link;
	}

	/** @returns {boolean} */ get running() {
		return this.link !== null;
	}

	/**
	 * A request; `cap` bounds how far the sidecar's progress notes may extend the wait.
	 * @template [T=unknown]
	 * @param {string} method
	 * @param {unknown} params
	 * @param {number} timeoutMs
	 * @param {AbortSignal} [signal]
	 * @returns {Promise<T>}
	 */
	call(method, params, timeoutMs, signal, cap = MAX_BUDGET_MS) {
		if (!this.link) return Promise.reject(new Error("sidecar is not running"));
		if (signal?.aborted) return Promise.reject(new AbortError());
		const id = this.nextId++;
		return /** @type {Promise<T>} */ (new Promise((resolve, reject) => {
			const expire = () => {
				this.pending.delete(id);
				reject(new Error(`no answer to ${method} within ${timeoutMs} ms`));
			};
			/** @type {Pending} */
			const entry = {
				resolve: (value) => resolve(/** @type {T} */ (value)), reject, timer: setTimeout(expire, timeoutMs), cap,
				rearm: () => {
					clearTimeout(entry.timer);
					entry.timer = setTimeout(expire, timeoutMs);
				},
			};
			this.pending.set(id, entry);
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
		}));
	}

	/**
	 * The engine is working on request `id` (loading the policy, a classifier or child call): wait up
	 * to `budgetMs` from now, and no longer, whatever happens to the sidecar (a stopped one sends
	 * nothing more).
	 * @param {number} id
	 * @param {number} budgetMs
	 * @returns {void}
	 */
	extend(id, budgetMs) {
		const entry = this.pending.get(id);
		if (!entry) return;
		const wait = Math.min(Math.max(budgetMs, 1), entry.cap);
		clearTimeout(entry.timer);
		entry.timer = setTimeout(() => {
			this.pending.delete(id);
			entry.reject(new Error(`no answer within the budget of ${wait} ms the engine announced`));
		}, wait);
	}

	/**
	 * @param {object} message
	 * @returns {void}
	 */
	write(message) {
		try {
			this.link?.write(`${JSON.stringify(message)}\n`);
		} catch (error) {
			this.fail(`cannot write to the sidecar: ${errorText(error)}`);
		}
	}

	/**
	 * @returns {void}
	 */
	stop() {
		const link = this.link;
		this.link = null;
		this.rejectAll("sidecar stopped");
		link?.stop();
	}

	/**
	 * @param {string} chunk
	 * @returns {void}
	 * @private
	 */
	read(chunk) {
		this.buffer += chunk;
		let newline = this.buffer.indexOf("\n", this.scanned);
		while (newline >= 0) {
			const line = this.buffer.slice(0, newline);
			this.buffer = this.buffer.slice(newline + 1);
			this.scanned = 0;
			if (line.length > this.maxLineChars) return this.fail(`protocol error: a line of ${line.length} characters (at most ${this.maxLineChars})`);
			if (line.trim()) this.dispatch(line);
			if (!this.link) return; // the line was refused and the sidecar replaced
			newline = this.buffer.indexOf("\n");
		}
		this.scanned = this.buffer.length;
		if (this.buffer.length > this.maxLineChars) {
			const size = this.buffer.length;
			this.buffer = "";
			this.scanned = 0;
			this.fail(`protocol error: a line of more than ${size} characters without a newline (at most ${this.maxLineChars})`);
		}
	}

	/**
	 * @param {string} line
	 * @returns {void}
	 * @private
	 */
	dispatch(line) {
		/** @type {unknown} */
		let message;
		try {
			message = JSON.parse(line);
		} catch {
			this.fail(`protocol error: not JSON: ${line.slice(0, 200)}`);
			return;
		}
		if (!isObject(message)) {
			logLine(`sidecar line ignored (not an object): ${line.slice(0, 200)}`);
			return;
		}
		if (typeof message.method === "string") {
			this.onRequest(/** @type {EngineRequest} */ (/** @type {unknown} */ (message)));
			return;
		}
		const entry = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
		const error = message.error;
		const errorMessage = isObject(error) && error.message !== undefined ? String(error.message) : String(error);
		if (!entry) {
			// an error for no request of ours: the sidecar refused a line (id null); say it in the log
			if (error) logLine(`sidecar error: ${errorMessage.slice(0, 500)}`);
			return;
		}
		this.pending.delete(/** @type {number} */ (message.id));
		clearTimeout(entry.timer);
		this.startWarmServer();
		if (error) entry.reject(new Error(`engine error: ${errorMessage}`));
		else entry.resolve(message.result);
	}

	/**
	 * After the first answer of a sidecar that was not forked warm: a warm server for the next run.
	 * @returns {void}
	 * @private
	 */
	startWarmServer() {
		const wanted = this.warmToStart;
		this.warmToStart = null;
		if (wanted && this.link && !this.link.warm) startWarmServer(wanted.command, wanted.socket, process.env);
	}

	/**
	 * @param {string} reason
	 * @returns {void}
	 * @private
	 */
	fail(reason) {
		if (!this.link) return;
		const link = this.link;
		this.link = null;
		this.rejectAll(reason);
		link.kill();
		this.onExit(reason);
	}

	/**
	 * @param {string} reason
	 * @returns {void}
	 * @private
	 */
	rejectAll(reason) {
		for (const [id, entry] of this.pending) {
			clearTimeout(entry.timer);
			entry.reject(new Error(reason));
			this.pending.delete(id);
		}
	}
}
