/**
 * Pi's events the bridge listens to: each builds its payload with Pi's own field names
 * (router/events/normalize.py is the one place that maps them), forwards it, and turns the replies of
 * the actions into the hook's answer (apply.mjs). Table: docs/protocol.md, `event`.
 */
/**
 * @import { BridgeState, HooksState, ContextMessage, ExtensionContext, Replies } from "./types.js"
 */
import { addSections, appendedPrompt, compactionEnded, inputAnswer, isRouters, resultPatch, takeQueuedCompaction, trustAnswer, withContextMessages } from "./apply.mjs";
import { history } from "./branch.mjs";
import { decide } from "./forward.mjs";
import { refuseIfClosed } from "./guard.mjs";
import { patchUi } from "./dialogs.mjs";
import { sessionStart, shutdown } from "./lifecycle.mjs";
import { attempt, modelInfo, textOf } from "./util.mjs";

/**
 * The `--model` value Pi was started with (`--model X` or `--model=X`), null without one.
 * @param {readonly string[]} [argv]
 * @returns {string | null}
 */
export function modelFlag(argv = process.argv.slice(2)) {
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i] ?? "";
		if (arg === "--model" && i + 1 < argv.length) return argv[i + 1] ?? null;
		if (arg.startsWith("--model=")) return arg.slice("--model=".length);
	}
	return null;
}

/**
 * Every hook the bridge registers with Pi, in this order.
 * @param {BridgeState} state
 * @returns {void}
 */
export function registerHooks(state) {
	registerSessionHooks(state);
	registerPromptHooks(state);
	registerTurnHooks(state);
	registerToolHooks(state);
	registerSelectionHooks(state);
	registerCompactionHooks(state);
}

/**
 * The forwarder of `state`, for a hook that answers from the replies alone.
 * @param {BridgeState} state
 * @returns {(type: string, payload: object, ctx: ExtensionContext | null) => Promise<Replies | undefined>}
 */
function forwarder(state) {
	return (type, payload, ctx) => state.forward(type, payload, ctx);
}

/**
 * Trust, a session's start and end, and the skills the policy ships.
 * @param {BridgeState} state
 * @returns {void}
 */
function registerSessionHooks(state) {
	const { pi } = state;
	const forward = forwarder(state);

	pi.on("project_trust", async (event, ctx) => trustAnswer(await forward("project_trust", { cwd: event.cwd }, /** @type {ExtensionContext} */ (ctx))));

	pi.on("session_start", async (event, ctx) => {
		if (!(await sessionStart(state, ctx))) return;
		await forward("session_start", {
			reason: event.reason, previousSessionFile: event.previousSessionFile, history: history(ctx), modelFlag: modelFlag(),
		}, ctx);
	});

	// skills the policy ships (`skills:`): Pi asks after session_start, when hello has declared them
	pi.on("resources_discover", async () => (state.declarations.skillPaths.length > 0 ? { skillPaths: state.declarations.skillPaths } : undefined));

	pi.on("session_shutdown", async (event, ctx) => {
		await forward("session_shutdown", { reason: event.reason }, ctx);
		await shutdown(state);
	});
}

/**
 * The user's input and what the model is sent: the system prompt, the context.
 * @param {BridgeState} state
 * @returns {void}
 */
function registerPromptHooks(state) {
	const { pi } = state;
	const forward = forwarder(state);

	pi.on("input", async (event, ctx) => {
		const replies = await forward("input", {
			text: event.text, source: event.source, images: event.images?.length ?? 0, streamingBehavior: event.streamingBehavior,
		}, ctx);
		return inputAnswer(replies, event.text);
	});

	pi.on("before_agent_start", async (event, ctx) => {
		const options = /** @type {{ sections?: Record<string, string> }} */ ((event.systemPromptOptions ?? {}));
		const replies = await forward("before_agent_start", {
			prompt: event.messageType === "user" ? event.prompt : undefined, messageType: event.messageType, systemPrompt: event.systemPrompt,
			sections: Object.keys(options.sections ?? {}),
		}, ctx);
		if (!replies) return undefined;
		addSections(options, replies);
		const prompt = appendedPrompt(event.systemPrompt, replies);
		return prompt !== event.systemPrompt ? { systemPrompt: prompt } : undefined;
	});

	pi.on("context", async (event, ctx) => {
		if (!state.declarations.subscribed.has("context")) return undefined;
		const messages = /** @type {ContextMessage[]} */ (/** @type {unknown} */ ((event.messages ?? [])));
		const replies = await forward("context", {
			messages: messages.map((m) => ({ role: m.role, text: textOf(m.content), customType: m.customType, toolName: m.toolName })),
		}, ctx);
		const next = replies ? withContextMessages(messages, replies) : null;
		return next ? { messages: /** @type {typeof event.messages} */ (/** @type {unknown} */ (next)) } : undefined;
	});
}

/**
 * Turns and runs: their start, their end, and what waits for the run to settle.
 * @param {BridgeState} state
 * @returns {void}
 */
function registerTurnHooks(state) {
	const { pi } = state;
	const forward = forwarder(state);

	pi.on("turn_start", async (event, ctx) => {
		await forward("turn_start", { turnIndex: event.turnIndex }, ctx);
	});

	pi.on("agent_start", async () => {
		state.hooks.toolActivity = false;
	});

	pi.on("turn_end", async (event, ctx) => {
		const message = /** @type {{ content?: unknown; stopReason?: unknown; usage?: unknown; provider?: string; model?: string }} */ ((event.message ?? {}));
		/** @type {unknown[]} */
		const content = Array.isArray(message.content) ? message.content : [];
		const calls = content.filter((b) => (/** @type {{ type?: unknown } | null} */ (b))?.type === "toolCall").length;
		const results = event.toolResults?.length ?? 0;
		if (calls || results) state.hooks.toolActivity = true;
		await forward("turn_end", {
			turnIndex: event.turnIndex, outcome: event.outcome, toolCalls: calls, toolResults: results,
			stopReason: message.stopReason, usage: message.usage ?? null,
			answeredBy: message.provider && message.model ? `${message.provider}/${message.model}` : null,
		}, ctx);
	});

	pi.on("agent_settled", async (event, ctx) => {
		await forward("agent_settled", { aborted: !!event.aborted, hadToolActivity: state.hooks.toolActivity }, ctx);
		const run = takeQueuedCompaction(state.apply);
		if (run) attempt(run, undefined);
	});
}

/**
 * Tool calls and results: the events a rule may refuse, which fail closed (guard.mjs).
 * @param {BridgeState} state
 * @returns {void}
 */
function registerToolHooks(state) {
	const { pi } = state;

	pi.on("tool_call", async (event, ctx) => {
		if (state.declarations.subscribed.has("dialog")) patchUi(state, ctx);
		const outcome = await decide(state, "tool_call", { toolName: event.toolName, toolCallId: event.toolCallId, input: event.input }, ctx);
		const refused = "failed" in outcome ? refuseIfClosed(state, "tool_call", outcome.failed) : null;
		if (refused !== null) return { block: true, reason: refused };
		const block = "replies" in outcome ? outcome.replies?.block : undefined;
		return block ? { block: true, reason: String(block.reason) } : undefined;
	});

	pi.on("tool_result", async (event, ctx) => {
		const outcome = await decide(state, "tool_result", {
			toolName: event.toolName, toolCallId: event.toolCallId, input: event.input, text: textOf(event.content), isError: !!event.isError,
		}, ctx);
		const refused = "failed" in outcome ? refuseIfClosed(state, "tool_result", outcome.failed) : null;
		if (refused !== null) return { content: [{ type: /** @type {const} */ ("text"), text: refused }], isError: true };
		return resultPatch("replies" in outcome ? outcome.replies : undefined);
	});
}

/**
 * The user's choice of model and of thinking level.
 * @param {BridgeState} state
 * @returns {void}
 */
function registerSelectionHooks(state) {
	const { pi } = state;
	const forward = forwarder(state);

	pi.on("model_select", async (event, ctx) => {
		await forward("model_select", { source: event.source, previousModel: modelInfo(event.previousModel) }, ctx);
	});

	pi.on("thinking_level_select", async (event, ctx) => {
		await forward("thinking_level_select", { level: event.level, previousLevel: event.previousLevel }, ctx);
	});
}

/**
 * Compactions: before (a rule may cancel it), done, failed; whether the router started it.
 * @param {BridgeState} state
 * @returns {void}
 */
function registerCompactionHooks(state) {
	const { pi } = state;
	const forward = forwarder(state);

	pi.on("session_before_compact", async (event, ctx) => {
		const replies = await forward("compaction_before", {
			reason: event.reason, tokensBefore: event.preparation?.tokensBefore, byRouter: isRouters(state.apply, event.reason),
		}, ctx);
		return replies?.cancel ? { cancel: true } : undefined;
	});

	pi.on("session_compact", async (event, ctx) => {
		const byRouter = isRouters(state.apply, event.reason);
		if (byRouter) compactionEnded(state.apply);
		await forward("compaction_done", { reason: event.reason, byRouter, tokensBefore: event.compactionEntry?.tokensBefore }, ctx);
	});

	pi.on("session_compact_failed", async (event, ctx) => {
		const byRouter = isRouters(state.apply, event.reason);
		if (byRouter) compactionEnded(state.apply);
		await forward("compaction_failed", { reason: event.reason, byRouter, errorMessage: event.errorMessage, aborted: !!event.aborted }, ctx);
	});
}

/**
 * No tool ran yet (the hooks part of the bridge's state).
 * @returns {HooksState}
 */
export function hooksState() {
	return { toolActivity: false };
}
