/**
 * Dialogs: Pi's `ctx.ui.select/confirm/input/editor` patched so that a rule may answer them
 * (`dialog` events), the rpiv questionnaire bus (`question` events from `rpiv:ask-user:prompt`),
 * and the engine's own `ask` request, which always goes to Pi's native dialogs.
 */
/**
 * @import { AskParams, BridgeState, DialogsState, BusEventDeclaration, ExtensionContext, ExtensionUIContext, NativeUi, PatchedUi } from "./types.js"
 */
import { answerValue } from "./apply.mjs";
import { excerpt } from "./branch.mjs";
import { attempt, errorText, isObject, logLine } from "./util.mjs";

const PATCHED = "__routerPatched";

/**
 * @param {BridgeState} state
 * @param {ExtensionContext | null} ctx
 * @returns {void}
 */
export function patchUi(state, ctx) {
	const ui = /** @type {PatchedUi | undefined} */ (ctx?.ui);
	if (!ui || ui[PATCHED]) return;
	// a context without Pi's dialogs (the one of `project_trust`, Pi's start before a session) is
	// left alone: the session's own context is patched when it comes
	const dialogs = [ui.select, ui.confirm, ui.input, ui.editor];
	if (!dialogs.every((f) => typeof f === "function")) return;
	/** @type {NativeUi} */
	const native = {
		select: ui.select.bind(ui), confirm: ui.confirm.bind(ui), input: ui.input.bind(ui), editor: ui.editor.bind(ui),
		custom: typeof ui.custom === "function" ? ui.custom.bind(ui) : null,
	};
	state.dialogs.nativeUi = native;
	/**
	 * @template T
	 * @param {string} kind
	 * @param {object} payload
	 * @param {() => Promise<T>} fallback
	 * @returns {Promise<T>}
	 */
	const ask = async (kind, payload, fallback) => {
		const replies = await state.forward("dialog", { kind, ...payload, excerpt: excerpt(state.ctx, state.declarations.excerptEntries) }, state.ctx);
		const value = answerValue(replies);
		return value !== undefined ? (/** @type {T} */ (value)) : fallback();
	};
	try {
		ui.select = (title, options, opts) => ask("select", { title, options }, () => native.select(title, options, opts));
		ui.confirm = async (title, message, opts) =>
			Boolean(await ask("confirm", { title, message }, () => native.confirm(title, message, opts)));
		ui.input = (title, placeholder, opts) => ask("input", { title, placeholder }, () => native.input(title, placeholder, opts));
		ui.editor = (title, prefill) => ask("editor", { title, prefill }, () => native.editor(title, prefill));
		const nativeCustom = native.custom;
		if (nativeCustom) {
			ui.custom = /** @type {ExtensionUIContext["custom"]} */ (async (...args) => {
				const decided = state.dialogs.pendingCustom;
				state.dialogs.pendingCustom = null;
				const value = decided ? await decided : undefined;
				return value !== undefined && value !== null ? value : nativeCustom(...args);
			});
		}
		ui[PATCHED] = true;
	} catch (error) {
		logLine(`cannot patch ctx.ui: ${errorText(error)}`);
	}
}

/**
 * The questionnaire protocols the policy declares (`bus_events:`; the decision pack declares
 * rpiv's): an extension emits the `prompt` event with a questionnaire on Pi's event bus, then
 * opens `ctx.ui.custom`. The questionnaire is sent as a `question` event (source "event"); the
 * answer a rule gives is what that `custom` call returns, and without one Pi's own `custom` runs.
 * When the engine fails (no result at all), `custom` returns the protocol's cancelled answer, as
 * the original does when its decision throws. The `blocked` event with `active: false` drops a
 * pending answer. Each event name is subscribed once per loaded bridge.
 * @param {BridgeState} state
 * @param {BusEventDeclaration[]} declared
 * @returns {void}
 */
export function listenToQuestionnaires(state, declared) {
	const cancelled = () => ({ answers: [], cancelled: true });
	for (const bus of declared) {
		if (bus.protocol !== "questionnaire") continue;
		const prompt = bus.prompt;
		if (!state.dialogs.busEvents.has(prompt)) {
			state.dialogs.busEvents.add(prompt);
			attempt(() => state.pi.events.on(prompt, /** @param {unknown} payload */ (payload) => {
				if (!state.declarations.subscribed.has("question")) return;
				state.dialogs.pendingCustom = state.forward("question", {
					toolName: prompt, source: "event", input: payload, excerpt: excerpt(state.ctx, state.declarations.excerptEntries),
				}, state.ctx)
					.then((replies) => (replies === undefined ? cancelled() : (replies.answer?.value ?? null)))
					.catch(cancelled);
			}), undefined);
		}
		const blocked = bus.blocked;
		if (blocked && !state.dialogs.busEvents.has(blocked)) {
			state.dialogs.busEvents.add(blocked);
			attempt(() => state.pi.events.on(blocked, /** @param {unknown} payload */ (payload) => {
				if (isObject(payload) && payload.active === false) state.dialogs.pendingCustom = null;
			}), undefined);
		}
	}
}

/**
 * The engine's `ask`: a question to the human through Pi's own dialogs (null without a UI).
 * @param {BridgeState} state
 * @param {AskParams} params
 * @returns {Promise<{ value: unknown }>}
 */
export async function askUser(state, params) {
	const ui = state.dialogs.nativeUi ?? state.ctx?.ui;
	if (!state.ctx?.hasUI || !ui) return { value: null };
	if (params.confirm) return { value: (await ui.confirm(String(params.title ?? ""), String(params.message ?? ""))) === true };
	if (params.select) {
		const options = Array.isArray(params.select) ? params.select.map(String) : [String(params.select)];
		return { value: (await ui.select(String(params.title ?? ""), options)) ?? null };
	}
	return { value: (await ui.input(String(params.title ?? ""), params.placeholder ?? undefined)) ?? null };
}

/**
 * Pi's dialogs not patched yet (the dialogs part of the bridge's state).
 * @returns {DialogsState}
 */
export function dialogsState() {
	return { nativeUi: null, pendingCustom: null, busEvents: new Set() };
}
