/** Small helpers every module of the bridge uses: the agent dir, the log, guarded calls. */
/**
 * @import { ModelInfo, PiModel } from "./types.js"
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * @returns {string}
 */
export function agentDir() {
	const dir = process.env.PI_CODING_AGENT_DIR;
	return dir ? dir.replace(/^~(?=$|\/)/, os.homedir()) : path.join(os.homedir(), ".pi", "agent");
}

/**
 * A line in bridge.log, whole or not at all: one write, cut back after a short write (a full disk).
 * @param {string} text
 * @returns {void}
 */
export function logLine(text) {
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

/**
 * A directory no project controls, for the sidecar's working directory: the agent dir, else home.
 * @returns {string}
 */
export function neutralDir() {
	for (const dir of [agentDir(), os.homedir(), os.tmpdir()]) {
		if (attempt(() => fs.statSync(dir).isDirectory(), false)) return dir;
	}
	return "/";
}

/**
 * The directory this copy of the bridge was loaded from.
 * @returns {string}
 */
export function hereDir() {
	if (typeof __dirname !== "undefined") return __dirname;
	try {
		return path.dirname(fileURLToPath(import.meta.url));
	} catch {
		return process.cwd();
	}
}

/**
 * @template T
 * @param {() => T} fn
 * @param {T} fallback
 * @returns {T}
 */
export function attempt(fn, fallback) {
	try {
		return fn();
	} catch {
		return fallback;
	}
}

/**
 * The message of anything thrown.
 * @param {unknown} error
 * @returns {string}
 */
export function errorText(error) {
	return error instanceof Error ? error.message : String(error);
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
export function isObject(value) {
	return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The text blocks of a message's content, joined (a string content as it is).
 * @param {unknown} content
 * @returns {string}
 */
export function textOf(content) {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter(/** @returns {block is { type: "text"; text: string }} */ (block) => isObject(block) && block.type === "text" && typeof block.text === "string")
		.map((block) => block.text)
		.join("\n");
}

/**
 * A model as the engine reads it (Pi's field names, router/events/normalize.py maps them).
 * @param {PiModel | null | undefined} model
 * @returns {ModelInfo | null}
 */
export function modelInfo(model) {
	if (!model) return null;
	return {
		provider: model.provider, id: model.id, name: model.name, api: model.api,
		contextWindow: model.contextWindow, maxTokens: model.maxTokens, reasoning: !!model.reasoning,
		input: model.input, cost: model.cost,
	};
}
