/** Pi's hooks (hooks.mjs) over a fake `pi` and a stubbed forwarder: what each sends, how it answers Pi. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { emptyReplies } from "../../router/bridge/apply.mjs";
import { registerHooks } from "../../router/bridge/hooks.mjs";
import type { BridgeState, Replies } from "../../router/bridge/types.js";
import { applyState, fakeCtx, fakePi } from "./helpers.ts";

type Hook = (event: unknown, ctx: unknown) => Promise<unknown>;

/** A state whose forwarder records each event and answers with `replies` (no sidecar). */
function rig(replies: Partial<Replies> | undefined = undefined) {
	const pi = fakePi();
	const ctx = fakeCtx();
	const state: BridgeState = applyState(pi.pi, ctx.ctx);
	const sent: [string, Record<string, unknown>][] = [];
	state.forward = async (type, payload) => {
		sent.push([type, payload as Record<string, unknown>]);
		return replies === undefined ? undefined : { ...emptyReplies(), ...replies };
	};
	registerHooks(state);
	const hook = (name: string): Hook => {
		const handler = pi.handlers.get(name);
		assert.ok(handler, `no ${name} hook`);
		return handler as Hook;
	};
	return { state, sent, hook, ctx: ctx.ctx, pi };
}

test("every hook is registered, in the documented order", () => {
	const { pi } = rig();
	assert.deepEqual([...pi.handlers.keys()], [
		"project_trust", "session_start", "resources_discover", "session_shutdown", "input", "before_agent_start",
		"context", "turn_start", "agent_start", "turn_end", "agent_settled", "tool_call", "tool_result",
		"model_select", "thinking_level_select", "session_before_compact", "session_compact", "session_compact_failed",
	]);
});

test("input: a transform answers with the new text, no reply lets the input go on", async () => {
	const transformed = rig({ input: { action: "transform", text: "rewritten" } });
	const answer = await transformed.hook("input")({ text: "hi", source: "interactive", images: [{}] }, transformed.ctx);
	assert.deepEqual(answer, { action: "transform", text: "rewritten" });
	assert.deepEqual(transformed.sent, [["input", { text: "hi", source: "interactive", images: 1, streamingBehavior: undefined }]]);
	const silent = rig();
	assert.equal(await silent.hook("input")({ text: "hi", source: "interactive" }, silent.ctx), undefined);
});

test("before_agent_start: system_append and section replies change the prompt and its options", async () => {
	const { hook, sent, ctx } = rig({ system_append: [{ text: "Be brief.", marker: null }], section: [{ name: "rules", text: "R" }] });
	const options: { sections?: Record<string, string> } = { sections: { tools: "T" } };
	const answer = await hook("before_agent_start")(
		{ prompt: "go", messageType: "user", systemPrompt: "You help.", systemPromptOptions: options }, ctx);
	assert.deepEqual(answer, { systemPrompt: "You help.\n\nBe brief." });
	assert.deepEqual(options.sections, { tools: "T", rules: "R" });
	assert.deepEqual(sent[0], ["before_agent_start", { prompt: "go", messageType: "user", systemPrompt: "You help.", sections: ["tools"] }]);
});

test("context is forwarded only when the policy subscribes to it", async () => {
	const { hook, sent, state, ctx } = rig({ context_message: [{ text: "note", role: "user", custom_type: "n", position: "end" }] });
	const event = { messages: [{ role: "user", content: "hi" }] };
	assert.equal(await hook("context")(event, ctx), undefined);
	assert.deepEqual(sent, []);
	state.declarations.subscribed.add("context");
	const answer = await hook("context")(event, ctx) as { messages: { role: string; routerType?: string }[] };
	assert.deepEqual(answer.messages.map((m) => [m.role, m.routerType]), [["user", undefined], ["user", "n"]]);
	assert.deepEqual(sent[0], ["context", { messages: [{ role: "user", text: "hi", customType: undefined, toolName: undefined }] }]);
});

test("turn_end counts the tool calls; agent_settled says whether the run used tools, then runs a queued compaction", async () => {
	const { hook, sent, state, ctx } = rig();
	await hook("agent_start")({}, ctx);
	await hook("turn_end")({ turnIndex: 0, message: { content: [{ type: "toolCall" }, { type: "text" }], provider: "p", model: "m" },
		toolResults: [{}] }, ctx);
	assert.deepEqual(sent[0], ["turn_end", { turnIndex: 0, outcome: undefined, toolCalls: 1, toolResults: 1, stopReason: undefined,
		usage: null, answeredBy: "p/m" }]);
	let compacted = 0;
	state.apply.compactionQueued = () => void (compacted += 1);
	await hook("agent_settled")({ aborted: false }, ctx);
	assert.deepEqual(sent[1], ["agent_settled", { aborted: false, hadToolActivity: true }]);
	assert.equal(compacted, 1);
	assert.equal(state.apply.compactionQueued, null);
	await hook("agent_start")({}, ctx);
	await hook("agent_settled")({}, ctx);
	assert.deepEqual(sent[2], ["agent_settled", { aborted: false, hadToolActivity: false }]);
});

test("compactions: a cancel reply cancels; the router's own compaction is told apart and clears its flag", async () => {
	const { hook, sent, state, ctx } = rig({ cancel: {} });
	assert.deepEqual(await hook("session_before_compact")({ reason: "threshold", preparation: { tokensBefore: 9 } }, ctx), { cancel: true });
	assert.deepEqual(sent[0], ["compaction_before", { reason: "threshold", tokensBefore: 9, byRouter: false }]);
	state.apply.routerCompaction = true;
	await hook("session_compact")({ reason: "manual", compactionEntry: { tokensBefore: 5 } }, ctx);
	assert.deepEqual(sent[1], ["compaction_done", { reason: "manual", byRouter: true, tokensBefore: 5 }]);
	assert.equal(state.apply.routerCompaction, false);
	await hook("session_compact_failed")({ reason: "overflow", errorMessage: "x" }, ctx);
	assert.deepEqual(sent[2], ["compaction_failed", { reason: "overflow", byRouter: false, errorMessage: "x", aborted: false }]);
});

test("project_trust answers undecided without a rule, and the rule's trust with one", async () => {
	const none = rig();
	assert.deepEqual(await none.hook("project_trust")({ cwd: "/w" }, none.ctx), { trusted: "undecided" });
	const yes = rig({ trust: { trusted: "yes", remember: true } });
	assert.deepEqual(await yes.hook("project_trust")({ cwd: "/w" }, yes.ctx), { trusted: "yes", remember: true });
	assert.deepEqual(yes.sent, [["project_trust", { cwd: "/w" }]]);
});

test("resources_discover offers the policy's skills once declared", async () => {
	const { hook, state } = rig();
	assert.equal(await hook("resources_discover")({}, null), undefined);
	state.declarations.skillPaths = ["/skills/a"];
	assert.deepEqual(await hook("resources_discover")({}, null), { skillPaths: ["/skills/a"] });
});
