/** The apply table with a fake `pi`: every action, an unknown one, a failing one, and the hooks' answers. */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
	ACTIONS, actionFields, addSections, answerValue, appendedPrompt, applyActions, emptyReplies, inputAnswer, resultPatch,
	toolAnswer, trustAnswer, withContextMessages,
} from "../../router/bridge/apply.mjs";
import type { Action, ActionName, BridgeState, Notice, Replies } from "../../router/bridge/types.js";
import { applyState, type FakeCtx, fakeCtx, type FakePi, fakePi } from "./helpers.ts";

interface Rig {
	fake: FakePi;
	ui: FakeCtx;
	state: BridgeState;
	replies: Replies;
	forwarded: [string, object][];
}

function rig(options: { hasUI?: boolean; idle?: boolean; compactThrows?: boolean; setModelWorks?: boolean } = {}): Rig {
	const fake = fakePi(options.setModelWorks ?? true);
	const ui = fakeCtx(options);
	const state = applyState(fake.pi, ui.ctx);
	const forwarded: [string, object][] = [];
	state.forward = async (type, payload) => {
		forwarded.push([type, payload]);
		return undefined;
	};
	return { fake, ui, state, replies: emptyReplies(), forwarded };
}

async function apply(r: Rig, ...actions: Action[]): Promise<void> {
	await applyActions(actions, { state: r.state, ctx: r.state.ctx, replies: r.replies });
}

/** One case per action of the table (tsc makes this list complete). */
const CASES: Record<ActionName, (r: Rig) => Promise<void>> = {
	answer: async (r) => {
		await apply(r, { action: "answer", params: { value: "Beta", text: null, details: null } }, { action: "answer", params: { value: "later" } });
		assert.equal(answerValue(r.replies), "Beta"); // the first answer counts
		assert.deepEqual(toolAnswer(r.replies, "no answer"), { content: [{ type: "text", text: "Beta" }], details: {} });
	},
	block: async (r) => {
		await apply(r, { action: "block", params: { reason: "no force pushes" } });
		assert.deepEqual(r.replies.block, { reason: "no force pushes" });
	},
	rewrite_result: async (r) => {
		await apply(r, { action: "rewrite_result", params: { text: "yes", is_error: false } });
		assert.deepEqual(resultPatch(r.replies), { content: [{ type: "text", text: "yes" }], isError: false });
	},
	trust: async (r) => {
		await apply(r, { action: "trust", params: { trusted: "yes", remember: true } });
		assert.deepEqual(trustAnswer(r.replies), { trusted: "yes", remember: true });
	},
	cancel: async (r) => {
		await apply(r, { action: "cancel", params: {} });
		assert.deepEqual(r.replies.cancel, {});
	},
	section: async (r) => {
		await apply(r, { action: "section", params: { name: "policy", text: "Answer briefly." } });
		const options: { sections?: Record<string, string> } = {};
		addSections(options, r.replies);
		assert.deepEqual(options, { sections: { policy: "Answer briefly." } });
	},
	system_append: async (r) => {
		await apply(r, { action: "system_append", params: { text: "[p] be brief", marker: "[p]" } },
			{ action: "system_append", params: { text: "[p] twice", marker: "[p]" } });
		assert.equal(appendedPrompt("You are Pi.", r.replies), "You are Pi.\n\n[p] be brief");
	},
	context_message: async (r) => {
		await apply(r, { action: "context_message", params: { text: "Decide first.", role: "user", custom_type: "g", position: "after_user" } });
		const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: "ok" }, { role: "user", content: "old", routerType: "g" }];
		const next = withContextMessages(messages, r.replies, 5);
		// the old message of its type goes; the new one follows the last user message left
		assert.deepEqual(next, [{ role: "user", content: "hi" },
			{ role: "user", content: [{ type: "text", text: "Decide first." }], timestamp: 5, routerType: "g" },
			{ role: "assistant", content: "ok" }]);
	},
	input: async (r) => {
		await apply(r, { action: "input", params: { action: "transform", text: "shorter" } });
		assert.deepEqual(inputAnswer(r.replies, "long"), { action: "transform", text: "shorter" });
	},
	route: async (r) => {
		await apply(r, { action: "route", params: { model: "fake/cloud", thinking: "high", state: { tier: 2 }, error: null } });
		assert.deepEqual(r.replies.route, { model: "fake/cloud", thinking: "high", state: { tier: 2 }, error: null });
	},
	tools: async (r) => {
		await apply(r, { action: "tools", params: { only: ["read", "nope"], add: null, remove: null } });
		await apply(r, { action: "tools", params: { add: "edit" } });
		await apply(r, { action: "tools", params: { remove: ["read"] } });
		await apply(r, { action: "tools", params: { remove: ["read"] } }); // no change: no call
		assert.deepEqual(r.fake.calls, [["setActiveTools", ["read"]], ["setActiveTools", ["read", "edit"]], ["setActiveTools", ["edit"]]]);
	},
	model: async (r) => {
		await apply(r, { action: "model", params: { ref: "fake/cloud" } }, { action: "model", params: { ref: "fake/gone" } });
		assert.deepEqual(r.fake.calls, [["setModel", "fake/cloud"]]);
		assert.deepEqual(r.ui.notices, [["router: model fake/gone is not available", "warning"]]);
	},
	thinking: async (r) => {
		await apply(r, { action: "thinking", params: { level: "high" } });
		assert.deepEqual(r.fake.calls, [["setThinkingLevel", "high"]]);
	},
	notify: async (r) => {
		await apply(r, { action: "notify", params: { text: "Compacting…", level: "warning" } }, { action: "notify", params: { text: "hi" } });
		assert.deepEqual(r.ui.notices, [["Compacting…", "warning"], ["hi", "info"]]);
		const notices: Notice[] = [];
		await applyActions([{ action: "notify", params: { text: "saved" } }], { state: r.state, ctx: r.state.ctx, replies: r.replies, notices });
		assert.deepEqual(notices, [{ text: "saved", level: "info" }]); // collected, not shown
		assert.equal(r.ui.notices.length, 2);
	},
	status: async (r) => {
		await apply(r, { action: "status", params: { key: "mine", text: "[ON]" } }, { action: "status", params: { key: "mine", text: null } });
		assert.deepEqual(r.ui.statuses, [["mine", "[ON]"], ["mine", undefined]]);
	},
	widget: async (r) => {
		await apply(r, { action: "widget", params: { key: "plan", lines: ["1. tests", "2. docs"], placement: "above" } },
			{ action: "widget", params: { key: "plan", lines: "done\nnext", placement: "below" } }, { action: "widget", params: { key: "plan", lines: null } });
		assert.deepEqual(r.ui.widgets, [["plan", ["1. tests", "2. docs"], { placement: "aboveEditor" }],
			["plan", ["done", "next"], { placement: "belowEditor" }], ["plan", undefined, { placement: "aboveEditor" }]]);
		const headless = rig({ hasUI: false });
		await apply(headless, { action: "widget", params: { key: "plan", lines: ["x"] } });
		assert.deepEqual(headless.ui.widgets, []); // print and json modes: nothing shown
	},
	follow_up: async (r) => {
		await apply(r, { action: "follow_up", params: { text: "Continue.", custom_type: "router-follow-up", hidden: true, deliver: "steer", details: { n: 1 } } });
		assert.deepEqual(r.fake.calls, [["sendMessage",
			{ customType: "router-follow-up", content: "Continue.", display: false, details: { n: 1 } }, { deliverAs: "steer", triggerTurn: true }]]);
	},
	compact: async (r) => {
		await apply(r, { action: "compact", params: { instructions: "keep the plan", abort: false } });
		assert.equal(r.ui.compacts.length, 1); // idle: at once
		assert.equal(r.state.apply.routerCompaction, true);
		const busy = rig({ idle: false });
		await apply(busy, { action: "compact", params: { instructions: null, abort: false } });
		assert.equal(busy.ui.compacts.length, 0);
		assert.equal(typeof busy.state.apply.compactionQueued, "function"); // runs at agent_settled
		busy.state.apply.compactionQueued?.();
		assert.equal(busy.ui.compacts.length, 1);
		const failing = rig({ compactThrows: true });
		await apply(failing, { action: "compact", params: { abort: true } });
		assert.equal(failing.state.apply.routerCompaction, false);
		assert.deepEqual(failing.forwarded, [["compaction_failed",
			{ reason: "manual", byRouter: true, errorMessage: "no model to compact with", aborted: false }]]);
	},
	entry: async (r) => {
		await apply(r, { action: "entry", params: { type: "my-router", data: { band: "react" } } });
		assert.deepEqual(r.fake.calls, [["appendEntry", "my-router", { band: "react" }]]);
	},
	panel: async (r) => {
		await apply(r, { action: "panel", params: {
			id: "p", title: "Settings", text: "in router.yaml", command: "mine", args: "set", refresh: "show",
			items: [{ key: "verbose", kind: "bool", value: true }, { key: "tags", label: "Tags", kind: "list", value: ["a", "b"] }],
		} });
		// not the TUI (rpc): the panel as one notification
		assert.deepEqual(r.ui.notices, [["Settings\nin router.yaml\nverbose: true\nTags: a, b", "info"]]);
	},
};

for (const [name, run] of Object.entries(CASES)) {
	test(`action ${name} is applied`, () => run(rig()));
}

test("the cases cover the table", () => {
	assert.deepEqual(Object.keys(CASES).sort(), Object.keys(ACTIONS).sort());
});

test("an entry reads only the fields it declares", async () => {
	const r = rig();
	await apply(r, { action: "block", params: { reason: "r", extra: "never read" } });
	assert.deepEqual(r.replies.block, { reason: "r" });
	assert.deepEqual(actionFields().block, ["reason"]);
});

test("an unknown action is reported once, visibly, and skipped; the others apply", async () => {
	const r = rig();
	await apply(r, { action: "frobnicate", params: {} }, { action: "thinking", params: { level: "low" } }, { action: "frobnicate", params: {} });
	assert.deepEqual(r.fake.calls, [["setThinkingLevel", "low"]]);
	const warnings = r.ui.notices.filter(([text]) => text.includes("frobnicate"));
	assert.equal(warnings.length, 1);
	assert.match(warnings[0]?.[0] ?? "", /unknown action 'frobnicate'; skipped/);
});

test("an action that fails is reported and the rest still apply", async () => {
	const r = rig();
	const broken = { ...r.state.pi, setThinkingLevel: () => { throw new Error("no such level"); } };
	const state: BridgeState = { ...r.state, pi: broken as typeof r.state.pi };
	await applyActions([{ action: "thinking", params: { level: "x" } }, { action: "notify", params: { text: "after" } }],
		{ state, ctx: state.ctx, replies: r.replies });
	assert.deepEqual(r.ui.notices, [["router: action thinking failed: no such level", "warning"], ["after", "info"]]);
});

test("without a UI a notification goes to stderr and a status nowhere", async () => {
	const r = rig({ hasUI: false });
	const written: string[] = [];
	const original = process.stderr.write.bind(process.stderr);
	process.stderr.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
	try {
		await apply(r, { action: "notify", params: { text: "hi", level: "error" } }, { action: "status", params: { key: "k", text: "t" } });
	} finally {
		process.stderr.write = original;
	}
	assert.deepEqual(written, ["[router] error: hi\n"]);
	assert.deepEqual(r.ui.statuses, []);
});

test("no answer: the question tool says so, dialogs and hooks keep Pi's behaviour", () => {
	const none = emptyReplies();
	assert.equal(toolAnswer(undefined, "no answer").isError, true);
	assert.equal(toolAnswer(undefined, "no answer").content[0]?.text, "no answer");
	assert.equal(answerValue(none), undefined);
	assert.equal(resultPatch(none), undefined);
	assert.equal(inputAnswer(none, "x"), undefined);
	assert.deepEqual(trustAnswer(undefined), { trusted: "undecided" });
	assert.equal(withContextMessages([], none), null);
});
