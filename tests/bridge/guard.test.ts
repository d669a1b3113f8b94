/** Guards when the engine cannot answer (guard.ts): a closed tool call is refused, an open event goes on. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { registerHooks } from "../../router/bridge/hooks.mjs";
import { connect } from "../../router/bridge/index.mjs";
import { failureMode, SAFE_DEFAULT } from "../../router/bridge/guard.mjs";
import { Sidecar } from "../../router/bridge/transport.mjs";
import type { BridgeState } from "../../router/bridge/types.js";
import { bridge, fakeCtx, fakePi, stop } from "./helpers.ts";

type Hook = (event: unknown, ctx: unknown) => Promise<unknown>;

/** A bridge over a fake sidecar in `mode` with its hooks registered; the tool_call and input hooks. */
function hooked(mode: string | null): { state: BridgeState; toolCall: Hook; input: Hook; ctx: ReturnType<typeof fakeCtx> } {
	const pi = fakePi();
	const state = mode === null
		? connect(pi.pi, new Sidecar({ resolve: () => ({ command: ["/nonexistent/router-serve"], via: "ROUTER_SERVE" }) }))
		: bridge(pi.pi, mode);
	registerHooks(state);
	const ctx = fakeCtx();
	return { state, toolCall: pi.handlers.get("tool_call") as Hook, input: pi.handlers.get("input") as Hook, ctx };
}

const PUSH = { toolName: "bash", toolCallId: "c1", input: { command: "git push -f" } };

test("a closed tool call is refused when the sidecar exits while it decides; an open input goes on", async () => {
	const { state, toolCall, input, ctx } = hooked("guard-exit");
	try {
		const answer = await toolCall(PUSH, ctx.ctx) as { block: boolean; reason: string };
		assert.equal(answer.block, true);
		assert.match(answer.reason, /could not decide .*this tool call is refused because the policy's guards fail closed/);
		assert.match(answer.reason, /ROUTER_FAIL_OPEN=1/);
		assert.ok(ctx.notices.some(([text]) => /this tool call is refused/.test(text)), "the user is told");
		stop(state);
		state.lifecycle.stopping = false;
		assert.equal(await input({ text: "hi", source: "interactive" }, ctx.ctx), undefined, "input fails open");
	} finally {
		stop(state);
	}
});

test("a closed tool call is refused when the sidecar never answers it", async () => {
	const { state, toolCall, ctx } = hooked("guard-silent");
	try {
		const answer = await toolCall(PUSH, ctx.ctx) as { block: boolean; reason: string };
		assert.equal(answer.block, true);
		assert.match(answer.reason, /no answer to event within/);
	} finally {
		stop(state);
	}
});

test("before anything is declared, a tool call the engine cannot decide is refused (the safe default)", async () => {
	const { state, toolCall, ctx } = hooked(null);
	try {
		assert.equal(state.declarations.failure, null);
		assert.equal(SAFE_DEFAULT.tool_call, "closed");
		const answer = await toolCall(PUSH, ctx.ctx) as { block: boolean; reason: string };
		assert.equal(answer.block, true);
		assert.match(answer.reason, /the policy engine did not start/);
	} finally {
		stop(state);
	}
});

test("a policy that declares tool_call open lets the tool run when the engine fails", async () => {
	const { state, toolCall, ctx } = hooked("guard-open");
	try {
		assert.equal(await toolCall(PUSH, ctx.ctx), undefined);
		assert.equal(failureMode(state, "tool_call"), "open");
	} finally {
		stop(state);
	}
});

test("ROUTER_FAIL_OPEN=1 is the user's way out: nothing fails closed", () => {
	const state = bridge(fakePi().pi, "silent");
	state.declarations.failure = { tool_call: "closed" };
	assert.equal(failureMode(state, "tool_call", {}), "closed");
	assert.equal(failureMode(state, "tool_call", { ROUTER_FAIL_OPEN: "1" }), "open");
	assert.equal(failureMode(state, "input", {}), "open");
});
