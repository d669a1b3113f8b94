/**
 * Applying the engine's actions: one table keyed by the action names of the Python registry
 * (router/actions/, less the local effects the sidecar carries out itself). Each entry names the
 * parameter fields it reads (tsc holds them to the types, tests/bridge/test_bridge_contract.py to the
 * pydantic models) and applies them: through Pi's API, or into the event's `Replies`, which the
 * hook that sent the event turns into its answer to Pi (the functions at the end). An action the
 * table does not know is reported once and skipped; one that fails is reported and the rest go on.
 */
/**
 * @import { Action, ActionName, ActionParams, ApplyEnv, ApplyState, BridgeState, CompactParams, ContextMessage, Entry, ExtensionContext, NotifyLevel, PiModel, Replies, Table, ThinkingLevel, ToolsParams, Wire } from "./types.js"
 */
import { showPanel } from "./panel.mjs";
import { warn } from "./state.mjs";
import { attempt, errorText, isObject, logLine } from "./util.mjs";

/**
 * @returns {Replies}
 */
export function emptyReplies() {
	return { section: [], system_append: [], context_message: [] };
}

/** @type {Table} */
export const ACTIONS = {
	// --- answers to the event (read by the hook that sent it) ---
	answer: { fields: { value: true, text: true, details: true }, apply: (p, env) => void (env.replies.answer ??= p) },
	block: { fields: { reason: true }, apply: (p, env) => void (env.replies.block ??= p) },
	rewrite_result: { fields: { text: true, is_error: true }, apply: (p, env) => void (env.replies.rewrite_result ??= p) },
	trust: { fields: { trusted: true, remember: true }, apply: (p, env) => void (env.replies.trust ??= p) },
	cancel: { fields: {}, apply: (p, env) => void (env.replies.cancel ??= p) },
	input: { fields: { action: true, text: true }, apply: (p, env) => void (env.replies.input ??= p) },
	route: { fields: { model: true, thinking: true, state: true, error: true }, apply: (p, env) => void (env.replies.route ??= p) },
	section: { fields: { name: true, text: true }, apply: (p, env) => void env.replies.section.push(p) },
	system_append: { fields: { text: true, marker: true }, apply: (p, env) => void env.replies.system_append.push(p) },
	context_message: {
		fields: { text: true, role: true, custom_type: true, position: true },
		apply: (p, env) => void env.replies.context_message.push(p),
	},
	// --- effects in Pi, on any event ---
	tools: { fields: { only: true, add: true, remove: true }, apply: (p, env) => applyTools(env.state, p) },
	model: {
		fields: { ref: true },
		apply: async (p, env) => {
			const model = findModel(env.ctx, String(p.ref));
			if (!model || !(await env.state.pi.setModel(model))) warn(env.state, `router: model ${p.ref} is not available`);
		},
	},
	thinking: { fields: { level: true }, apply: (p, env) => env.state.pi.setThinkingLevel(/** @type {ThinkingLevel} */ (p.level)) },
	notify: {
		fields: { text: true, level: true },
		apply: (p, env) => {
			/** @type {NotifyLevel} */
			const level = p.level ?? "info";
			// without a UI (print and json modes) the action says: stderr
			if (env.notices) env.notices.push({ text: String(p.text), level });
			else if (env.ctx?.hasUI) env.ctx.ui.notify(String(p.text), level);
			else process.stderr.write(`[router] ${level !== "info" ? `${level}: ` : ""}${p.text}\n`);
		},
	},
	status: {
		fields: { key: true, text: true },
		apply: (p, env) => {
			if (env.ctx?.hasUI) env.ctx.ui.setStatus(String(p.key), p.text ?? undefined);
		},
	},
	widget: {
		fields: { key: true, lines: true, placement: true },
		apply: (p, env) => {
			const lines = p.lines == null ? undefined : Array.isArray(p.lines) ? p.lines.map(String) : String(p.lines).split("\n");
			if (env.ctx?.hasUI) env.ctx.ui.setWidget(String(p.key), lines, { placement: p.placement === "below" ? "belowEditor" : "aboveEditor" });
		},
	},
	follow_up: {
		fields: { text: true, custom_type: true, hidden: true, deliver: true, details: true },
		apply: (p, env) => env.state.pi.sendMessage(
			{ customType: String(p.custom_type ?? "router-follow-up"), content: String(p.text), display: !(p.hidden ?? true), details: p.details },
			{ deliverAs: p.deliver ?? "followUp", triggerTurn: true },
		),
	},
	compact: { fields: { instructions: true, abort: true }, apply: (p, env) => compact(env, p) },
	entry: { fields: { type: true, data: true }, apply: (p, env) => env.state.pi.appendEntry(String(p.type), p.data ?? undefined) },
	panel: {
		fields: { id: true, title: true, text: true, items: true, command: true, args: true, refresh: true },
		apply: (p, env) => showPanel(env.state, p, env.ctx),
	},
};

/**
 * The fields each entry reads, by action (tests/bridge/test_bridge_contract.py compares them with Python's).
 * @returns {Record<string, string[]>}
 */
export function actionFields() {
	return Object.fromEntries(Object.entries(ACTIONS).map(([name, entry]) => [name, Object.keys(entry.fields).sort()]));
}

/**
 * @param {string} name
 * @returns {name is ActionName}
 */
function isKnown(name) {
	return Object.prototype.hasOwnProperty.call(ACTIONS, name);
}

/**
 * Apply `list` in order; each entry gets only the fields it declares.
 * @param {readonly Action[]} list
 * @param {ApplyEnv} env
 * @returns {Promise<void>}
 */
export async function applyActions(list, env) {
	for (const item of list) {
		const name = String(item?.action);
		if (!isKnown(name)) {
			reportUnknown(env.state, name);
			continue;
		}
		try {
			await applyOne(name, item.params, env);
		} catch (error) {
			warn(env.state, `router: action ${name} failed: ${errorText(error)}`);
		}
	}
}

/**
 * @template {ActionName} K
 * @param {K} name
 * @param {unknown} params
 * @param {ApplyEnv} env
 * @returns {void | Promise<void>}
 */
function applyOne(name, params, env) {
	/** @type {Entry<ActionParams[K]>} */
	const entry = ACTIONS[name];
	return entry.apply(picked(params, entry.fields), env);
}

/**
 * Only the declared fields of `params` (an entry cannot read a field the contract does not list).
 * @template P
 * @param {unknown} params
 * @param {Record<keyof P, true>} fields
 * @returns {Wire<P>}
 */
function picked(params, fields) {
	const source = isObject(params) ? params : {};
	/** @type {Record<string, unknown>} */
	const out = {};
	for (const key of Object.keys(fields)) if (key in source) out[key] = source[key];
	return /** @type {Wire<P>} */ (out);
}

/**
 * @param {BridgeState} state
 * @param {string} name
 * @returns {void}
 */
function reportUnknown(state, name) {
	if (state.apply.unknownActions.has(name)) {
		logLine(`router: unknown action ${name} skipped`);
		return;
	}
	state.apply.unknownActions.add(name);
	warn(state, `router: the engine sent the unknown action '${name}'; skipped (is the bridge as new as the engine? run \`router install\`)`);
}

// --- effects ------------------------------------------------------------------------------------

/**
 * @param {ExtensionContext | null} ctx
 * @param {string} ref
 * @returns {PiModel | undefined}
 */
export function findModel(ctx, ref) {
	const slash = ref.indexOf("/");
	if (slash < 0 || !ctx) return undefined;
	return attempt(() => ctx.modelRegistry.find(ref.slice(0, slash), ref.slice(slash + 1)), undefined);
}

/**
 * @param {BridgeState} state
 * @param {Wire<ToolsParams>} params
 * @returns {void}
 */
function applyTools(state, params) {
	const { pi } = state;
	const known = /** @type {Set<string>} */ (new Set(pi.getAllTools().map((t) => t.name)));
	/** @type {string[]} */
	const active = pi.getActiveTools();
	/** @param {string[] | string | null | undefined} value */
	const list = (value) => (Array.isArray(value) ? value : [value]).map(String);
	/** @type {string[]} */
	let next;
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
 * @param {ApplyState} apply
 * @param {string} reason
 * @returns {boolean}
 */
export function isRouters(apply, reason) {
	return apply.routerCompaction && reason === "manual";
}

/**
 * @param {ApplyEnv} env
 * @param {Wire<CompactParams>} params
 * @returns {void}
 */
function compact(env, params) {
	const { state, ctx } = env;
	if (!ctx) return;
	const run = () => {
		state.apply.routerCompaction = true;
		try {
			ctx.compact({
				customInstructions: params.instructions ?? undefined,
				onComplete: () => (state.apply.routerCompaction = false),
				onError: () => (state.apply.routerCompaction = false),
			});
		} catch (error) {
			// a synchronous throw never reaches session_compact_failed: report it the same way
			state.apply.routerCompaction = false;
			logLine(`ctx.compact failed: ${errorText(error)}`);
			void state.forward("compaction_failed", { reason: "manual", byRouter: true, errorMessage: errorText(error), aborted: false }, ctx);
		}
	};
	if (params.abort || attempt(() => ctx.isIdle(), false)) run();
	else state.apply.compactionQueued = run;
}

// --- the hooks' answers to Pi, from the replies -------------------------------------------------

/**
 * `systemPrompt` with the `system_append` texts (a marker already present skips its text).
 * @param {string} systemPrompt
 * @param {Replies} replies
 * @returns {string}
 */
export function appendedPrompt(systemPrompt, replies) {
	let prompt = systemPrompt;
	for (const append of replies.system_append) {
		if (!append.marker || !prompt.includes(String(append.marker))) prompt = `${prompt}\n\n${append.text}`;
	}
	return prompt;
}

/**
 * The `section` texts, written into Pi's system prompt options (rebuilt every run).
 * @param {{ sections?: Record<string, string> }} options
 * @param {Replies} replies
 * @returns {void}
 */
export function addSections(options, replies) {
	for (const section of replies.section) {
		options.sections = options.sections ?? {};
		options.sections[String(section.name)] = String(section.text);
	}
}

/**
 * `messages` with the `context_message` additions (after the last user message, or at the end).
 * @template {ContextMessage} M
 * @param {readonly M[]} messages
 * @param {Replies} replies
 * @returns {(M | ContextMessage)[] | null}
 */
export function withContextMessages(messages, replies, now = Date.now()) {
	if (replies.context_message.length === 0) return null;
	/** @type {(M | ContextMessage)[]} */
	let next = [...messages];
	for (const add of replies.context_message) {
		const customType = add.custom_type ?? undefined;
		/** @type {ContextMessage} */
		const message =
			add.role === "custom"
				? { role: "custom", customType, content: String(add.text), display: false, timestamp: now }
				: { role: "user", content: [{ type: "text", text: String(add.text) }], timestamp: now, routerType: customType };
		if (customType) next = next.filter((m) => m.customType !== customType && m.routerType !== customType);
		let at = next.length;
		if (add.position !== "end") {
			for (let i = next.length - 1; i >= 0; i--) {
				if (next[i]?.role === "user") {
					at = i + 1;
					break;
				}
			}
		}
		next.splice(at, 0, message);
	}
	return next;
}

/**
 * The tool result of a policy-declared question tool, from its `answer`.
 * @param {Replies | undefined} replies
 * @param {string} noAnswer
 * @returns {{ content: { type: "text"; text: string }[]; details: unknown; isError?: boolean }}
 */
export function toolAnswer(replies, noAnswer) {
	const answer = replies?.answer;
	if (!answer) return { content: [{ type: "text", text: noAnswer }], details: {}, isError: true };
	const text = answer.text ?? (typeof answer.value === "string" ? answer.value : JSON.stringify(answer.value));
	return { content: [{ type: "text", text: String(text) }], details: answer.details ?? {} };
}

/**
 * The value an `answer` gives a dialog; undefined without one (Pi's own dialog then runs).
 * @param {Replies | undefined} replies
 * @returns {unknown}
 */
export function answerValue(replies) {
	const value = replies?.answer?.value;
	return value === undefined || value === null ? undefined : value;
}

/**
 * A `rewrite_result` as the `tool_result` hook's patch.
 * @param {Replies | undefined} replies
 * @returns {{ content: { type: "text"; text: string }[]; isError?: boolean } | undefined}
 */
export function resultPatch(replies) {
	const rewrite = replies?.rewrite_result;
	if (!rewrite) return undefined;
	/** @type {{ content: { type: "text"; text: string }[]; isError?: boolean }} */
	const patch = { content: [{ type: "text", text: String(rewrite.text) }] };
	if (typeof rewrite.is_error === "boolean") patch.isError = rewrite.is_error;
	return patch;
}

/**
 * The `input` hook's answer.
 * @param {Replies | undefined} replies
 * @param {string} text
 * @returns {{ action: "transform"; text: string } | { action: "handled" } | undefined}
 */
export function inputAnswer(replies, text) {
	const reply = replies?.input;
	if (reply?.action === "transform") return { action: "transform", text: String(reply.text ?? text) };
	if (reply?.action === "handled") return { action: "handled" };
	return undefined;
}

/**
 * The `project_trust` hook's answer: Pi 1.6 reads `.trusted` of every answer, so "undecided" without a rule.
 * @param {Replies | undefined} replies
 * @returns {{ trusted: "yes" | "no" | "undecided"; remember?: boolean }}
 */
export function trustAnswer(replies) {
	const trust = replies?.trust;
	return trust ? { trusted: trust.trusted ?? "undecided", remember: !!trust.remember } : { trusted: "undecided" };
}

/**
 * No compaction of the router's running or queued (the apply part of the bridge's state).
 * @returns {ApplyState}
 */
export function applyState() {
	return { routerCompaction: false, compactionQueued: null, unknownActions: new Set() };
}

/**
 * The compaction a `compact` action queued for an idle agent, taken (null when none is queued).
 * @param {ApplyState} apply
 * @returns {(() => void) | null}
 */
export function takeQueuedCompaction(apply) {
	const run = apply.compactionQueued;
	apply.compactionQueued = null;
	return run;
}

/**
 * The router's compaction ended (done or failed).
 * @param {ApplyState} apply
 * @returns {void}
 */
export function compactionEnded(apply) {
	apply.routerCompaction = false;
}
