/**
 * The JSON-lines connection to one sidecar process (docs/protocol.md, "Framing"): spawning it,
 * request ids, deadlines that the engine's `progress` notes extend, cancelling, and failing: on a
 * crash, a line that is not JSON or a line over the limit, every pending request is rejected and
 * `onExit` says why (the lifecycle restarts the sidecar; Pi goes on without it meanwhile).
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { EngineRequest } from "./types.ts";
import { resolveServe, type Resolved } from "./resolve.ts";
import { agentDir, attempt, errorText, isObject, logLine, neutralDir } from "./util.ts";

export const MAX_BUDGET_MS = 600000; // no progress note extends a wait beyond this
export const MAX_LINE_CHARS = 64 * 1024 * 1024; // as the sidecar's own limit (router/runtime/protocol.py)
const KILL_AFTER_MS = 1000;

interface Pending {
	resolve: (value: unknown) => void;
	reject: (error: Error) => void;
	timer: NodeJS.Timeout;
	cap: number;
}

/** The run was aborted (not a failure of the engine). */
export class AbortError extends Error {
	constructor() {
		super("aborted");
	}
}

/**
 * One sidecar process at a time. Its output is decoded as a UTF-8 stream (a character split
 * between two chunks stays whole) into a buffer of at most `maxLineChars`; a longer line, like a
 * line that is not JSON, counts as a protocol error: the sidecar is replaced.
 */
export class Sidecar {
	private proc: ChildProcess | null = null;
	private buffer = "";
	private scanned = 0; // characters of the buffer known to hold no newline
	private nextId = 1;
	private readonly pending = new Map<number, Pending>();
	private readonly resolveCommand: () => Resolved;
	private readonly maxLineChars: number;
	onRequest: (message: EngineRequest) => void = () => {};
	onExit: (reason: string) => void = () => {};

	constructor(options: { resolve?: () => Resolved; maxLineChars?: number } = {}) {
		this.resolveCommand = options.resolve ?? (() => resolveServe());
		this.maxLineChars = options.maxLineChars ?? MAX_LINE_CHARS;
	}

	/** The command that starts the sidecar (resolved anew each time: the user may change it). */
	command(): string[] {
		return this.resolveCommand().command;
	}

	start(cwd: string): void {
		const { command: [program = "router", ...args], via } = this.resolveCommand();
		// Never run in the project: `python -m` would import a module the repository ships
		// (`argparse.py`, `router/`) before the router's own. The engine gets the project as --cwd.
		const proc = spawn(program, [...args, "--cwd", cwd, "--agent-dir", agentDir()], {
			cwd: neutralDir(), stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PYTHONSAFEPATH: "1" },
		});
		this.proc = proc;
		this.buffer = "";
		this.scanned = 0;
		// A replaced process (stopped after a timeout, killed a second later) must not touch its
		// successor: its late output and its exit are ignored.
		const current = () => this.proc === proc;
		proc.stdout?.setEncoding("utf8");
		proc.stdout?.on("data", (chunk: string) => {
			if (current()) this.read(chunk);
		});
		proc.stderr?.on("data", (chunk: Buffer) => logLine(`sidecar stderr: ${chunk.toString().trimEnd()}`));
		proc.on("error", (error) => {
			if (current()) this.fail(`sidecar failed to start (${program}, from ${via}): ${error.message}`);
		});
		proc.on("exit", (code, signal) => {
			if (current()) this.fail(`sidecar exited (code ${code}, signal ${signal})`);
		});
		proc.stdin?.on("error", () => {});
	}

	get running(): boolean {
		return this.proc !== null;
	}

	/** A request; `cap` bounds how far the sidecar's progress notes may extend the wait. */
	call<T = unknown>(method: string, params: unknown, timeoutMs: number, signal?: AbortSignal, cap = MAX_BUDGET_MS): Promise<T> {
		if (!this.proc) return Promise.reject(new Error("sidecar is not running"));
		if (signal?.aborted) return Promise.reject(new AbortError());
		const id = this.nextId++;
		return new Promise<T>((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(id);
				reject(new Error(`no answer to ${method} within ${timeoutMs} ms`));
			}, timeoutMs);
			this.pending.set(id, { resolve: (value) => resolve(value as T), reject, timer, cap });
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

	write(message: object): void {
		try {
			this.proc?.stdin?.write(`${JSON.stringify(message)}\n`);
		} catch (error) {
			this.fail(`cannot write to the sidecar: ${errorText(error)}`);
		}
	}

	stop(): void {
		const proc = this.proc;
		this.proc = null;
		this.rejectAll("sidecar stopped");
		if (!proc) return;
		try {
			proc.stdin?.end();
		} catch {
			// already closed
		}
		// Pi need not wait for a stopped sidecar to exit (it finishes on its own, or is killed below)
		attempt(() => (proc.unref(), proc.stdout?.destroy(), proc.stderr?.destroy(), true), false);
		const kill = () => attempt(() => proc.kill("SIGKILL"), false);
		const killer = setTimeout(kill, KILL_AFTER_MS);
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
			if (line.length > this.maxLineChars) return this.fail(`protocol error: a line of ${line.length} characters (at most ${this.maxLineChars})`);
			if (line.trim()) this.dispatch(line);
			if (!this.proc) return; // the line was refused and the sidecar replaced
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

	private dispatch(line: string): void {
		let message: unknown;
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
			this.onRequest(message as unknown as EngineRequest);
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
		this.pending.delete(message.id as number);
		clearTimeout(entry.timer);
		if (error) entry.reject(new Error(`engine error: ${errorMessage}`));
		else entry.resolve(message.result);
	}

	private fail(reason: string): void {
		if (!this.proc) return;
		const proc = this.proc;
		this.proc = null;
		this.rejectAll(reason);
		attempt(() => proc.kill("SIGKILL"), false);
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
