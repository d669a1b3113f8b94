/** The sidecar's lifecycle (lifecycle.mjs) without a sidecar: a lost engine, the restart it schedules, shutdown. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { handleExit, shutdown } from "../../router/bridge/lifecycle.mjs";
import { applyState, fakeCtx, fakePi, stop } from "./helpers.ts";

test("a lost sidecar: the user is told once, the status says offline, one restart is scheduled", () => {
	const ctx = fakeCtx();
	const state = applyState(fakePi().pi, ctx.ctx);
	state.ready = true;
	try {
		handleExit(state, "the sidecar exited (code 1)");
		assert.equal(state.ready, false);
		assert.equal(state.lastFailure, "the sidecar exited (code 1)");
		assert.equal(state.outage, true);
		assert.equal(state.failures, 1);
		const timer = state.restartTimer;
		assert.ok(timer, "a restart is scheduled");
		handleExit(state, "the sidecar exited (code 1)");
		assert.equal(state.failures, 2);
		assert.equal(state.restartTimer, timer, "one restart at a time");
		assert.equal(ctx.notices.filter(([text]) => /Pi continues without the policy/.test(text)).length, 1);
		assert.deepEqual(ctx.statuses, [["pi-policy-router", "router: offline (restarting)"]]);
	} finally {
		stop(state);
	}
});

test("an exit while stopping or preloading schedules nothing", () => {
	const state = applyState(fakePi().pi, null);
	try {
		state.stopping = true;
		handleExit(state, "gone");
		assert.equal(state.restartTimer, null);
		assert.equal(state.failures, 0);
		state.stopping = false;
		state.preloading = true;
		handleExit(state, "gone");
		assert.equal(state.restartTimer, null);
		assert.equal(state.outage, false);
	} finally {
		stop(state);
	}
});

test("shutdown stops restarts and the sidecar, without a call when it was not ready", async () => {
	const state = applyState(fakePi().pi, null);
	handleExit(state, "gone");
	assert.ok(state.restartTimer);
	await shutdown(state);
	assert.equal(state.stopping, true);
	assert.equal(state.ready, false);
	handleExit(state, "gone again");
	assert.equal(state.failures, 1, "no restart after shutdown");
	stop(state);
});
