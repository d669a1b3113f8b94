/** The sidecar's lifecycle (lifecycle.mjs) without a sidecar: a lost engine, the restart it schedules, shutdown. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { handleExit, shutdown } from "../../router/bridge/lifecycle.mjs";
import { applyState, fakeCtx, fakePi, stop } from "./helpers.ts";

test("a lost sidecar: the user is told once, the status says offline, one restart is scheduled", () => {
	const ctx = fakeCtx();
	const state = applyState(fakePi().pi, ctx.ctx);
	state.lifecycle.ready = true;
	try {
		handleExit(state, "the sidecar exited (code 1)");
		assert.equal(state.lifecycle.ready, false);
		assert.equal(state.lifecycle.lastFailure, "the sidecar exited (code 1)");
		assert.equal(state.lifecycle.outage, true);
		assert.equal(state.lifecycle.failures, 1);
		const timer = state.lifecycle.restartTimer;
		assert.ok(timer, "a restart is scheduled");
		handleExit(state, "the sidecar exited (code 1)");
		assert.equal(state.lifecycle.failures, 2);
		assert.equal(state.lifecycle.restartTimer, timer, "one restart at a time");
		assert.equal(ctx.notices.filter(([text]) => /Pi continues without the policy/.test(text)).length, 1);
		assert.deepEqual(ctx.statuses, [["pi-policy-router", "router: offline (restarting)"]]);
	} finally {
		stop(state);
	}
});

test("an exit while stopping or preloading schedules nothing", () => {
	const state = applyState(fakePi().pi, null);
	try {
		state.lifecycle.stopping = true;
		handleExit(state, "gone");
		assert.equal(state.lifecycle.restartTimer, null);
		assert.equal(state.lifecycle.failures, 0);
		state.lifecycle.stopping = false;
		state.lifecycle.preloading = true;
		handleExit(state, "gone");
		assert.equal(state.lifecycle.restartTimer, null);
		assert.equal(state.lifecycle.outage, false);
	} finally {
		stop(state);
	}
});

test("shutdown stops restarts and the sidecar, without a call when it was not ready", async () => {
	const state = applyState(fakePi().pi, null);
	handleExit(state, "gone");
	assert.ok(state.lifecycle.restartTimer);
	await shutdown(state);
	assert.equal(state.lifecycle.stopping, true);
	assert.equal(state.lifecycle.ready, false);
	handleExit(state, "gone again");
	assert.equal(state.lifecycle.failures, 1, "no restart after shutdown");
	stop(state);
});
