/**
 * The declarations cache (router/runtime/declarations_cache.py writes it): what the last sidecar
 * declared, registered at once so that Pi's start need not wait for the engine.
 *
 * The key is a digest of where and how this bridge runs: the project directory, the agent dir,
 * the sidecar command, every `ROUTER_*` variable, and the trust facts of Pi's command line and
 * the user's settings. An entry is used only when every file it records (the policy's files, the
 * layers that could appear, the trust store) still has the recorded SHA-256 (absent ones still
 * absent); anything else (no entry, a corrupt one, a changed file) means the bridge waits for the
 * engine's `hello` as without a cache. The engine's answer is authoritative either way.
 */
/**
 * @import { Declarations, TrustFacts } from "./types.js"
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { isObject } from "./util.mjs";

export const CACHE_FORMAT = 1;

/**
 * The digest that names this bridge's entry.
 * @param {string} cwd
 * @param {string} agent
 * @param {readonly string[]} command
 * @param {TrustFacts} facts
 * @param {Record<string, string | undefined>} [env]
 * @returns {string}
 */
export function declarationsKey(cwd, agent, command, facts,
	env = process.env) {
	// the bridge's own waits (ROUTER_BRIDGE_*) change no declaration: a run with a longer wait reuses the entry
	const routerEnv = Object.keys(env).filter((name) => name.startsWith("ROUTER_") && !name.startsWith("ROUTER_BRIDGE_"))
		.sort().map((name) => [name, env[name] ?? ""]);
	const trust = { approve: facts.approve, noApprove: facts.noApprove, settings: facts.settings };
	const text = JSON.stringify([CACHE_FORMAT, path.resolve(cwd), path.resolve(agent), command, routerEnv, trust]);
	return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * @param {string} agent
 * @param {string} key
 * @returns {string}
 */
export function entryPath(agent, key) {
	return path.join(agent, "router", "declarations", `${key}.json`);
}

/**
 * @param {string} file
 * @returns {string | null}
 */
function fileDigest(file) {
	try {
		return createHash("sha256").update(fs.readFileSync(file)).digest("hex");
	} catch {
		return null;
	}
}

/**
 * The cached declarations for `key`, or null when there is no valid entry whose files all hold the recorded bytes.
 * @param {string} agent
 * @param {string} key
 * @returns {Declarations | null}
 */
export function cachedDeclarations(agent, key) {
	/** @type {unknown} */
	let entry;
	try {
		entry = JSON.parse(fs.readFileSync(entryPath(agent, key), "utf8"));
	} catch {
		return null;
	}
	if (!isObject(entry) || entry.format !== CACHE_FORMAT || entry.key !== key) return null;
	const text = entry.declarations;
	if (typeof text !== "string" || createHash("sha256").update(text, "utf8").digest("hex") !== entry.digest) return null;
	const files = entry.files;
	if (!Array.isArray(files) || files.length === 0) return null;
	for (const item of files) {
		if (!Array.isArray(item) || item.length !== 2 || typeof item[0] !== "string" || !path.isAbsolute(item[0])) return null;
		/** @type {unknown} */
		const recorded = item[1];
		if (recorded !== null && typeof recorded !== "string") return null;
		if (fileDigest(item[0]) !== recorded) return null;
	}
	/** @type {unknown} */
	const declared = JSON.parse(text);
	return isObject(declared) && wellFormed(declared) ? (/** @type {Declarations} */ (declared)) : null;
}

/**
 * @param {Record<string, unknown>} declared
 * @returns {boolean}
 */
function wellFormed(declared) {
	const lists = ["events", "commands", "tools", "virtual_models", "skills"];
	return lists.every((name) => declared[name] === undefined || Array.isArray(declared[name]));
}

/**
 * One text per declaration set, to tell whether the engine's answer matches what was registered.
 * @param {Declarations} declared
 * @returns {string}
 */
export function declarationsText(declared) {
	/** @param {{ name?: unknown; provider?: unknown; id?: unknown }[] | undefined} items */
	const names = (items) =>
		(items ?? []).map((i) => JSON.stringify(i)).sort();
	return JSON.stringify([
		[...(declared.events ?? [])].sort(), names(declared.commands), names(declared.tools),
		names(declared.virtual_models), [...(declared.skills ?? [])].map(String).sort(),
	]);
}
