/**
 * The policy's declarations (the `hello` result, or an event result's `declarations`): the event
 * types to forward, and the commands, tools, virtual models and skills registered with Pi, each
 * once per loaded bridge.
 */
/**
 * @import { ModelRoute, ModelRouteRequest } from "@earendil-works/pi-coding-agent"
 * @import { BridgeState, DeclarationsState, CommandDeclaration, Declarations, ExtensionContext, PiModel, ThinkingLevel, ToolDeclaration, VirtualModelDeclaration } from "./types.js"
 */
import { findModel, toolAnswer } from "./apply.mjs";
import { excerpt } from "./branch.mjs";
import { listenToQuestionnaires, patchUi } from "./dialogs.mjs";
import { warn } from "./state.mjs";
import { attempt, isObject, modelInfo, textOf } from "./util.mjs";

/**
 * @param {BridgeState} state
 * @param {Declarations} declared
 * @returns {void}
 */
export function declare(state, declared) {
	state.declarations.subscribed = /** @type {Set<string>} */ (new Set(declared.events ?? []));
	state.declarations.failure = isFailureMap(declared.failure) ? declared.failure : null;
	if (typeof declared.excerpt_entries === "number") state.declarations.excerptEntries = declared.excerpt_entries;
	listenToQuestionnaires(state, declared.bus_events ?? []);
	for (const command of declared.commands ?? []) registerCommand(state, command);
	for (const tool of declared.tools ?? []) registerTool(state, tool);
	for (const model of declared.virtual_models ?? []) registerVirtualModel(state, model);
	state.declarations.skillPaths = (declared.skills ?? []).map(String);
	if (state.declarations.subscribed.has("dialog")) patchUi(state, state.ctx);
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, "open" | "closed">}
 */
function isFailureMap(value) {
	return isObject(value) && Object.values(value).every((mode) => mode === "open" || mode === "closed");
}

/**
 * @param {BridgeState} state
 * @param {CommandDeclaration} command
 * @returns {void}
 */
function registerCommand(state, command) {
	if (state.declarations.registered.commands.has(command.name)) return;
	state.declarations.registered.commands.add(command.name);
	const items = (command.completions ?? []).map((c) =>
		typeof c === "string" ? { value: c, label: c } : { value: String(c.value), label: String(c.label ?? c.value), description: c.description },
	);
	state.pi.registerCommand(command.name, {
		description: command.description,
		getArgumentCompletions: items.length
			? /** @param {string} prefix */ (prefix) => {
					const found = items.filter((i) => i.value.startsWith(prefix));
					return found.length ? found : null;
				}
			: undefined,
		/**
		 * @param {string} args
		 * @param {ExtensionContext} ctx
		 */
		handler: async (args, ctx) => {
			await state.forward("command", { name: command.name, args: args ?? "" }, ctx);
		},
	});
}

/**
 * @param {BridgeState} state
 * @param {ToolDeclaration} tool
 * @returns {void}
 */
function registerTool(state, tool) {
	if (state.declarations.registered.tools.has(tool.name)) return;
	state.declarations.registered.tools.add(tool.name);
	state.pi.registerTool({
		name: tool.name, label: tool.label ?? tool.name, description: tool.description,
		promptSnippet: tool.prompt_snippet ?? undefined, promptGuidelines: tool.guidelines ?? [],
		parameters: tool.parameters, executionMode: tool.sequential ? "sequential" : "parallel",
		async execute(_id, params, signal, _update, ctx) {
			const replies = await state.forward("question", {
				toolName: tool.name, source: "tool", input: params, excerpt: excerpt(ctx, state.declarations.excerptEntries),
			}, ctx, { signal });
			if (signal?.aborted) return { content: [{ type: "text", text: "aborted" }], details: {}, isError: true };
			return toolAnswer(replies, tool.no_answer);
		},
	});
}

/**
 * @param {BridgeState} state
 * @param {VirtualModelDeclaration} model
 * @returns {void}
 */
function registerVirtualModel(state, model) {
	const ref = `${model.provider}/${model.id}`;
	if (state.declarations.registered.models.has(ref)) return;
	state.declarations.registered.models.add(ref);
	state.pi.registerVirtualModel({
		provider: model.provider, id: model.id, name: model.name ?? ref, thinkingLevels: model.thinking_levels,
		contextWindow: model.context_window ?? undefined, maxTokens: model.max_tokens ?? undefined,
		route: (request) => route(state, model, request),
	});
}

/**
 * A `route` event with Pi's own field names of the request (router/events/normalize.py maps them).
 * @param {VirtualModelDeclaration} model
 * @param {ModelRouteRequest} request
 * @returns {object}
 */
export function routePayload(model, request) {
	const messages = request.messages ?? [];
	const users = messages.filter((m) => m.role === "user");
	const last = users[users.length - 1];
	return {
		reason: request.reason,
		model: modelInfo(request.model) ?? { provider: model.provider, id: model.id },
		thinkingLevel: request.thinkingLevel,
		previous: request.previous ? { model: modelInfo(request.previous.model), thinkingLevel: request.previous.thinkingLevel } : null,
		failed: request.failed ? {
			model: modelInfo(request.failed.model), thinkingLevel: request.failed.thinkingLevel,
			message: { stopReason: request.failed.message?.stopReason, errorMessage: request.failed.message?.errorMessage },
		} : null,
		state: request.state ?? null, lastUserText: last ? textOf(last.content) : null,
		lastIsToolResult: messages.length > 0 && messages[messages.length - 1]?.role === "toolResult", messageCount: messages.length,
	};
}

/**
 * @param {BridgeState} state
 * @param {VirtualModelDeclaration} model
 * @param {ModelRouteRequest} request
 * @returns {Promise<ModelRoute>}
 */
async function route(state, model, request) {
	const replies = await state.forward("route", routePayload(model, request), state.ctx, { signal: request.signal });
	// an aborted run cancels the routing (a classifier call, a wait for a slot): no model for it
	if (request.signal?.aborted) throw new Error("aborted");
	const chosen = replies?.route;
	if (chosen?.error) throw new Error(String(chosen.error));
	const physical = chosen ? findModel(state.ctx, String(chosen.model)) : undefined;
	if (physical && chosen) {
		// a string in Python (`str | None`): Pi takes the level the rule wrote, as it is
		/** @type {ModelRoute} */
		const routed = { model: physical, thinkingLevel: /** @type {ThinkingLevel | null} */ (chosen.thinking) ?? request.thinkingLevel };
		if (chosen.state !== undefined && chosen.state !== null) routed.state = chosen.state;
		return routed;
	}
	if (chosen) warn(state, `router: route to unknown model ${chosen.model}; using a fallback`);
	for (const step of model.fallback) {
		if (step === "previous" && request.previous?.model) {
			return { model: request.previous.model, thinkingLevel: request.previous.thinkingLevel ?? request.thinkingLevel };
		}
		const first = step === "first_available" ? firstPhysical(state) : undefined;
		if (first) return { model: first, thinkingLevel: request.thinkingLevel };
	}
	throw new Error(`router: no model to route ${model.provider}/${model.id} to`);
}

/**
 * @param {BridgeState} state
 * @returns {PiModel | undefined}
 */
function firstPhysical(state) {
	return attempt(() => state.ctx?.modelRegistry.getAvailable() ?? [], []).find((m) => m.api !== "pi-virtual");
}

/** The excerpt size until the hello says what the policy declares (the engine's neutral default, router/events/questions.py). */
export const DEFAULT_EXCERPT_ENTRIES = 10;

/**
 * Nothing declared yet (the declarations part of the bridge's state).
 * @returns {DeclarationsState}
 */
export function declarationsState() {
	return {
		subscribed: new Set(), skillPaths: [], excerptEntries: DEFAULT_EXCERPT_ENTRIES, failure: null,
		registered: { commands: new Set(), tools: new Set(), models: new Set() },
	};
}
