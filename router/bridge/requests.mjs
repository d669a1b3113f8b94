/**
 * The engine's requests to the bridge (docs/protocol.md, "Sidecar → bridge"): `progress` and
 * `log` notifications, and `classify`, `complete` and `ask`, answered through Pi's model registry
 * and dialogs. A request that fails is answered with its error.
 */
/**
 * @import { AskParams, BridgeState, ClassifyParams, CompleteParams, EngineRequest, ProgressParams } from "./types.js"
 */
import { findModel } from "./apply.mjs";
import { askUser } from "./dialogs.mjs";
import { EVENT_TIMEOUT_MS } from "./lifecycle.mjs";
import { attempt, errorText, isObject, logLine, textOf } from "./util.mjs";

const CLASSIFY_TIMEOUT_MS = 4000;
const COMPLETE_TIMEOUT_MS = 45000;

/**
 * @param {BridgeState} state
 * @param {EngineRequest} message
 * @returns {Promise<void>}
 */
export async function answerEngine(state, message) {
	const { id, method } = message;
	/** @type {Record<string, unknown>} */
	const params = isObject(message.params) ? message.params : {};
	if (method === "progress") {
		const progress = /** @type {ProgressParams} */ (/** @type {unknown} */ (params));
		state.sidecar.extend(progress.id, Number(progress.budget_ms) || EVENT_TIMEOUT_MS);
		return;
	}
	if (method === "log") {
		logLine(String(params.text ?? ""));
		return;
	}
	/** @type {unknown} */
	let result;
	try {
		if (method === "classify") result = await classify(state, /** @type {ClassifyParams} */ (params));
		else if (method === "complete") result = await complete(state, /** @type {CompleteParams} */ (params));
		else if (method === "ask") result = await askUser(state, /** @type {AskParams} */ (params));
		else throw new Error(`unknown request ${method}`);
	} catch (error) {
		result = { error: errorText(error) };
	}
	if (id !== undefined) state.sidecar.write({ id, result });
}

/**
 * @param {BridgeState} state
 * @param {ClassifyParams} params
 * @returns {Promise<object>}
 */
async function classify(state, params) {
	const registry = state.ctx?.modelRegistry;
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
	const timeoutMs = Number(params.timeoutMs) || CLASSIFY_TIMEOUT_MS;
	// Pi's own per-try timeout reports "Request timed out after …ms"; the signal is the last resort
	const deadline = AbortSignal.timeout(timeoutMs + 500);
	const context = /** @type {Parameters<typeof registry.classify>[1]} */ ({ state: params.state ?? {}, questions: params.questions ?? {} });
	const reply = await registry.classify(model, context, { signal: deadline, timeoutMs, maxRetries: Number(params.maxRetries) || 0 });
	const errorMessage = reply.stopReason === "aborted" && deadline.aborted ? `Request timed out after ${timeoutMs}ms` : reply.errorMessage;
	return { answers: reply.answers ?? {}, stopReason: reply.stopReason, errorMessage };
}

/**
 * @param {BridgeState} state
 * @param {CompleteParams} params
 * @returns {Promise<object>}
 */
async function complete(state, params) {
	const ctx = state.ctx;
	const model = params.model ? findModel(ctx, String(params.model)) : ctx?.model;
	if (!model || !ctx) return { error: `model not found: ${params.model}` };
	const reply = await ctx.modelRegistry.complete(model, {
		systemPrompt: params.systemPrompt ?? undefined,
		messages: [{ role: "user", content: [{ type: "text", text: String(params.prompt ?? "") }], timestamp: Date.now() }],
	}, { signal: AbortSignal.timeout(Number(params.timeoutMs) || COMPLETE_TIMEOUT_MS) });
	if (reply.stopReason === "error" || reply.stopReason === "aborted") return { error: reply.errorMessage ?? reply.stopReason };
	return { text: textOf(reply.content) };
}
