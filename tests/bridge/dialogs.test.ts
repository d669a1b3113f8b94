/** Pi's dialogs patched (dialogs.mjs): a rule's `answer` answers them, without one Pi's own dialog runs. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { emptyReplies } from "../../router/bridge/apply.mjs";
import { patchUi } from "../../router/bridge/dialogs.mjs";
import type { BridgeState, ExtensionContext, Replies } from "../../router/bridge/types.js";
import { applyState, fakePi } from "./helpers.ts";

/** A context whose dialogs record their calls and answer "native". */
function dialogCtx() {
	const native: string[] = [];
	const ui = {
		select: async (title: string) => (native.push(`select ${title}`), "native"),
		confirm: async (title: string) => (native.push(`confirm ${title}`), false),
		input: async (title: string) => (native.push(`input ${title}`), "native"),
		editor: async (title: string) => (native.push(`editor ${title}`), "native"),
		notify: () => {},
		setStatus: () => {},
	};
	const ctx = { cwd: "/w", hasUI: true, ui, sessionManager: { getBranch: () => [] } } as unknown as ExtensionContext;
	return { ctx, native };
}

function rig(answer: unknown) {
	const { ctx, native } = dialogCtx();
	const state: BridgeState = applyState(fakePi().pi, ctx);
	const sent: [string, Record<string, unknown>][] = [];
	state.forward = async (type, payload): Promise<Replies> => {
		sent.push([type, payload as Record<string, unknown>]);
		return answer === undefined ? emptyReplies() : { ...emptyReplies(), answer: { value: answer, text: null, details: null } };
	};
	patchUi(state, ctx);
	return { state, ctx, native, sent };
}

test("a rule's answer answers the dialog; Pi's own dialog does not open", async () => {
	const { ctx, native, sent } = rig("ruled");
	assert.equal(await ctx.ui.select("Pick", ["a", "b"]), "ruled");
	assert.equal(await ctx.ui.input("Name"), "ruled");
	assert.deepEqual(native, []);
	assert.deepEqual(sent.map(([type, payload]) => [type, payload.kind, payload.title]), [["dialog", "select", "Pick"], ["dialog", "input", "Name"]]);
	assert.deepEqual(sent[0]?.[1].options, ["a", "b"]);
});

test("without an answer Pi's own dialog runs, with what it was asked", async () => {
	const { ctx, native } = rig(undefined);
	assert.equal(await ctx.ui.confirm("Sure?", "really"), false);
	assert.equal(await ctx.ui.editor("Edit", "text"), "native");
	assert.deepEqual(native, ["confirm Sure?", "editor Edit"]);
});

test("a context is patched once, and one without Pi's dialogs is left alone", async () => {
	const { state, ctx, sent } = rig("ruled");
	const patched = ctx.ui.select;
	patchUi(state, ctx);
	assert.equal(ctx.ui.select, patched);
	assert.ok(state.dialogs.nativeUi, "the native dialogs are kept for the engine's own `ask`");
	const bare = { cwd: "/w", hasUI: false, ui: { notify: () => {} } } as unknown as ExtensionContext;
	patchUi(state, bare);
	assert.deepEqual(Object.keys(bare.ui), ["notify"]);
	assert.equal(sent.length, 0);
});
