/**
 * The warm sidecar (router/runtime/warm.py): a `router serve --warm SOCKET` the bridge leaves
 * running after a run, so the next run's sidecar is forked from a process that has the engine
 * loaded already instead of starting Python afresh (docs/protocol.md, "Warm start").
 *
 * The socket lives in a private directory (the user's, mode 0700: `$ROUTER_WARM_DIR`, else
 * `$XDG_RUNTIME_DIR/pi-policy-router`, else `<tmp>/pi-policy-router-<uid>`), named by a digest of
 * the sidecar command, so another command (another Python, another install) has its own. Anything
 * unusual (no such directory, one of another user, a socket that refuses, `ROUTER_WARM=0`, not
 * Linux) means the bridge spawns the sidecar as without it; the warm server is started then, in the
 * background, once that sidecar has answered.
 */
/**
 * @import { Env, StartRequest } from "./types.js"
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { attempt, logLine, neutralDir } from "./util.mjs";

const MAX_SOCKET_PATH = 100; // a Unix socket path is at most 107 bytes on Linux

/**
 * Where the warm sidecar for `command` listens, or null when there is to be none (only the
 * router's `… serve [options]` goes warm: another program is spawned as given).
 * @param {readonly string[]} command
 * @param {Env} [env]
 * @returns {string | null}
 */
export function warmSocket(command, env = process.env) {
	if (env.ROUTER_WARM === "0" || process.platform !== "linux" || typeof process.getuid !== "function") return null;
	if (!command.slice(1).includes("serve")) return null;
	const base = env.ROUTER_WARM_DIR
		|| (env.XDG_RUNTIME_DIR ? path.join(env.XDG_RUNTIME_DIR, "pi-policy-router") : path.join(os.tmpdir(), `pi-policy-router-${process.getuid()}`));
	const name = createHash("sha256").update(JSON.stringify(command), "utf8").digest("hex").slice(0, 16);
	const socket = path.join(path.resolve(base), `${name}.sock`);
	return Buffer.byteLength(socket) <= MAX_SOCKET_PATH ? socket : null;
}

/**
 * Whether `dir` is a directory of this user nobody else can enter.
 * @param {string} dir
 * @returns {boolean}
 */
function privateDir(dir) {
	const info = attempt(() => fs.lstatSync(dir), null);
	return info !== null && info.isDirectory() && info.uid === process.getuid?.() && (info.mode & 0o077) === 0;
}

/**
 * Whether `socket` is a socket of this user in a directory nobody else can enter.
 * @param {string} socket
 * @returns {boolean}
 */
export function usableSocket(socket) {
	if (!privateDir(path.dirname(socket))) return false;
	const file = attempt(() => fs.lstatSync(socket), null);
	return file !== null && file.isSocket() && file.uid === process.getuid?.();
}

/**
 * The start request for a sidecar of `argv` with the environment `env`.
 * @param {string[]} argv
 * @param {Env} env
 * @returns {StartRequest}
 */
export function startRequest(argv, env) {
	/** @type {Record<string, string>} */
	const clean = {};
	for (const [name, value] of Object.entries(env)) if (typeof value === "string") clean[name] = value;
	return { warm: 1, argv, env: clean, cwd: neutralDir() };
}

/**
 * End a stopped or wedged warm server of ours: SIGKILL the pid its lock file names (the server
 * writes it once it holds the lock), only when that process is a `--warm` server of this socket,
 * and remove the socket, so the next start of a warm server takes its place.
 * @param {string} socket
 * @returns {void}
 */
export function endWarmServer(socket) {
	if (!usableSocket(socket)) return;
	const pid = Number(attempt(() => fs.readFileSync(`${socket}.lock`, "utf8").trim(), ""));
	if (!Number.isInteger(pid) || pid <= 1) return;
	const cmdline = attempt(() => fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"), /** @type {string[]} */ ([]));
	const ours = attempt(() => fs.statSync(`/proc/${pid}`).uid === process.getuid?.(), false);
	if (!ours || !cmdline.includes("--warm") || !cmdline.includes(socket)) return;
	attempt(() => process.kill(pid, "SIGKILL"), false);
	attempt(() => fs.unlinkSync(socket), undefined);
	logLine(`router: ended the warm sidecar ${pid} (it did not answer: stopped or wedged)`);
}

/**
 * Start the warm server for `command` in the background (it exits on its own when idle).
 * @param {readonly string[]} command
 * @param {string} socket
 * @param {Env} env
 * @returns {void}
 */
export function startWarmServer(command, socket, env) {
	const [program = "router", ...args] = command;
	const dir = path.dirname(socket);
	attempt(() => fs.mkdirSync(dir, { recursive: true, mode: 0o700 }), undefined);
	if (!privateDir(dir)) {
		// somebody else's, or open to others: never used, so no server is started to refuse it
		logLine(`router: ${dir} is not a private directory of yours (mode 0700): no warm sidecar (router doctor)`);
		return;
	}
	attempt(() => {
		const proc = spawn(program, [...args, "--warm", socket], {
			cwd: neutralDir(), stdio: "ignore", detached: true, env: { ...env, PYTHONSAFEPATH: "1" },
		});
		proc.on("error", (error) => logLine(`router: the warm sidecar did not start: ${error.message}`));
		proc.unref();
		return true;
	}, false);
}
