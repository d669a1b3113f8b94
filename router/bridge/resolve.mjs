/**
 * Which command starts the sidecar, resolved on each machine (docs/guide.md, "Installing the bridge").
 *
 * In order: `$ROUTER_SERVE` (a JSON array, for tests and development), `$ROUTER_PYTHON` (an
 * interpreter, run as `-P -m router serve`), the `command` of the user's own install
 * (`<agent dir>/extensions/pi-policy-router/router-bridge.json`), `router` on PATH, `python3` on PATH.
 * Only the user decides: the environment, the agent dir and PATH are theirs. The config beside a
 * project's copy of the bridge is never read for a command (a cloned repository could name any
 * program), and PATH entries that are not absolute are skipped (they would resolve in the project).
 * router/commands/sidecar_command.py is the same order in Python, for `router doctor`.
 */
/**
 * @import { Env, Resolved } from "./types.js"
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { agentDir } from "./util.mjs";

export const CONFIG_NAME = "router-bridge.json";
export const EXTENSION_NAME = "pi-policy-router";
const PYTHON_ARGS = ["-P", "-m", "router", "serve"];

/**
 * The user's own install's config: where `router install` (without --project) writes it.
 * @param {string} [agent]
 * @returns {string}
 */
export function userConfigPath(agent = agentDir()) {
	return path.join(agent, "extensions", EXTENSION_NAME, CONFIG_NAME);
}

/**
 * @param {Env} [env]
 * @param {string} [agent]
 * @returns {Resolved}
 */
export function resolveServe(env = process.env, agent = agentDir()) {
	const fromServe = env.ROUTER_SERVE ? parseServe(env.ROUTER_SERVE) : null;
	if (fromServe) return { command: fromServe, via: "ROUTER_SERVE" };
	if (env.ROUTER_PYTHON) return { command: [env.ROUTER_PYTHON, ...PYTHON_ARGS], via: "ROUTER_PYTHON" };
	const fromUser = configuredCommand(userConfigPath(agent));
	if (fromUser) return { command: fromUser, via: "user install" };
	const router = onPath("router", env.PATH);
	if (router) return { command: [router, "serve"], via: "router on PATH" };
	const python = onPath("python3", env.PATH);
	if (python) return { command: [python, ...PYTHON_ARGS], via: "python3 on PATH" };
	return { command: ["router", "serve"], via: "default" };
}

/**
 * `$ROUTER_SERVE`: a JSON array of strings, else words split on spaces.
 * @param {string} text
 * @returns {string[] | null}
 */
function parseServe(text) {
	try {
		/** @type {unknown} */
		const parsed = JSON.parse(text);
		if (Array.isArray(parsed) && parsed.length > 0) return parsed.map(String);
		return null;
	} catch {
		const words = text.split(" ").filter(Boolean);
		return words.length > 0 ? words : null;
	}
}

/**
 * The `command` of a router-bridge.json: a non-empty array of strings, else null.
 * @param {string} file
 * @returns {string[] | null}
 */
export function configuredCommand(file) {
	try {
		/** @type {unknown} */
		const config = JSON.parse(fs.readFileSync(file, "utf8"));
		const command = typeof config === "object" && config !== null ? (/** @type {{ command?: unknown }} */ (config)).command : null;
		if (Array.isArray(command) && command.length > 0 && command.every((part) => typeof part === "string")) return command;
	} catch {
		// no user install
	}
	return null;
}

/**
 * An executable file `name` in an absolute directory of PATH, else null.
 * @param {string} name
 * @param {string | undefined} pathValue
 * @returns {string | null}
 */
export function onPath(name, pathValue) {
	for (const dir of (pathValue ?? "").split(path.delimiter)) {
		if (!path.isAbsolute(dir)) continue;
		const candidate = path.join(dir, name);
		try {
			if (!fs.statSync(candidate).isFile()) continue;
			fs.accessSync(candidate, fs.constants.X_OK);
			return candidate;
		} catch {
			// not here
		}
	}
	return null;
}
