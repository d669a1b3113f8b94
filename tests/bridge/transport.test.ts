/** The transport and the lifecycle over a fake sidecar process: answers, timeouts, exits, bad lines. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { forward } from "../../router/bridge/forward.mjs";
import { ensureStarted, EVENT_TIMEOUT_MS, HELLO_TIMEOUT_MS } from "../../router/bridge/lifecycle.mjs";
import { AbortError, Sidecar } from "../../router/bridge/transport.mjs";
import { bridge, fakeCtx, fakePi, fakeSidecar, stop } from "./helpers.ts";

/** The reason the next onExit gives. */
function exitReason(sidecar: ReturnType<typeof fakeSidecar>): Promise<string> {
	return new Promise((resolve) => (sidecar.onExit = resolve));
}

test("a request is answered by its id", async () => {
	const sidecar = fakeSidecar("hello");
	sidecar.start(process.cwd());
	try {
		const hello = await sidecar.call<{ protocol: number; events: string[] }>("hello", {}, 5000);
		assert.deepEqual(hello, { protocol: 1, events: ["input"], warnings: [] });
	} finally {
		sidecar.stop();
	}
});

test("a character split between two chunks stays whole", async () => {
	const sidecar = fakeSidecar("split");
	sidecar.start(process.cwd());
	try {
		const hello = await sidecar.call<{ engine: string }>("hello", {}, 5000);
		assert.equal(hello.engine, "é");
	} finally {
		sidecar.stop();
	}
});

test("a sidecar that never answers: the call times out", async () => {
	const sidecar = fakeSidecar("silent");
	sidecar.start(process.cwd());
	try {
		await assert.rejects(sidecar.call("hello", {}, 100), /no answer to hello within 100 ms/);
		assert.equal(sidecar.running, true); // a timeout alone does not replace it: the lifecycle decides
	} finally {
		sidecar.stop();
	}
});

test("a progress note extends the deadline to the budget it names, once", async () => {
	const sidecar = fakeSidecar("silent");
	sidecar.start(process.cwd());
	try {
		const call = sidecar.call("event", {}, 60000, undefined, 100);
		sidecar.extend(1, 5000); // capped at 100 ms by the call's cap
		await assert.rejects(call, /no answer within the budget of 100 ms the engine announced/);
	} finally {
		sidecar.stop();
	}
});

test("an aborted call is rejected as aborted and cancelled in the sidecar", async () => {
	const sidecar = fakeSidecar("silent");
	sidecar.start(process.cwd());
	try {
		const controller = new AbortController();
		const call = sidecar.call("event", {}, 60000, controller.signal);
		controller.abort();
		await assert.rejects(call, (error) => error instanceof AbortError);
	} finally {
		sidecar.stop();
	}
});

test("a sidecar that exits: pending calls fail and onExit says why", async () => {
	const sidecar = fakeSidecar("exit");
	const reason = exitReason(sidecar);
	sidecar.start(process.cwd());
	await sidecar.call("hello", {}, 5000);
	await assert.rejects(sidecar.call("event", {}, 60000), /sidecar exited \(code 3, signal null\)/);
	assert.equal(await reason, "sidecar exited (code 3, signal null)");
	assert.equal(sidecar.running, false);
});

test("a line that is not JSON replaces the sidecar", async () => {
	const sidecar = fakeSidecar("garbage");
	const reason = exitReason(sidecar);
	sidecar.start(process.cwd());
	await assert.rejects(sidecar.call("hello", {}, 60000), /protocol error: not JSON: this is not json/);
	assert.match(await reason, /^protocol error: not JSON/);
	assert.equal(sidecar.running, false);
});

test("a line over the limit replaces the sidecar", async () => {
	const sidecar = fakeSidecar("long", 100);
	const reason = exitReason(sidecar);
	sidecar.start(process.cwd());
	await assert.rejects(sidecar.call("hello", {}, 60000), /a line of more than \d+ characters without a newline \(at most 100\)/);
	assert.match(await reason, /at most 100/);
});

test("a program that does not exist fails the start, naming where the command came from", async () => {
	const sidecar = new Sidecar({
		resolve: () => ({ command: ["/nonexistent/router", "serve"], via: "router on PATH" }),
	});
	const reason = exitReason(sidecar);
	sidecar.start(process.cwd());
	assert.match(await reason, /^sidecar failed to start \(\/nonexistent\/router, from router on PATH\): .*ENOENT/);
});

test("the timeouts come from the environment the runner sets", () => {
	// generous for a loaded machine: only a sidecar that never answers waits them out
	assert.equal(EVENT_TIMEOUT_MS, 1000);
	assert.equal(HELLO_TIMEOUT_MS, 3000);
});

test("a sidecar that never answers: events fail open and the user is told once", async () => {
	const { pi } = fakePi();
	const ui = fakeCtx();
	const state = bridge(pi, "silent");
	state.declarations.subscribed = new Set(["input"]);
	try {
		const first = await forward(state, "input", { text: "a" }, ui.ctx);
		const second = await forward(state, "input", { text: "b" }, ui.ctx);
		assert.equal(first, undefined);
		assert.equal(second, undefined);
		const warnings = ui.notices.filter(([, level]) => level === "warning");
		assert.equal(warnings.length, 1, JSON.stringify(ui.notices));
		assert.match(warnings[0]?.[0] ?? "", /^router: the policy engine did not start \(no answer to hello within 3000 ms\); Pi continues without it$/);
		assert.deepEqual(ui.statuses, [["pi-policy-router", "router: offline (restarting)"]]);
		assert.equal(state.lifecycle.outage, true);
	} finally {
		stop(state);
	}
});

test("an event the engine does not answer in time: no decision, the sidecar is replaced, the user told", async () => {
	const { pi } = fakePi();
	const ui = fakeCtx();
	const state = bridge(pi, "hello");
	state.declarations.subscribed = new Set(["input"]);
	try {
		assert.equal(await ensureStarted(state, ui.ctx), true);
		assert.equal(await forward(state, "input", { text: "a" }, ui.ctx), undefined);
		assert.equal(state.lifecycle.ready, false);
		assert.deepEqual(ui.notices, [["router: no answer to event within 1000 ms; Pi continues without the policy and the router restarts", "warning"]]);
	} finally {
		stop(state);
	}
});

test("a sidecar that exits after hello: the user is told once, the status says offline", async () => {
	const { pi } = fakePi();
	const ui = fakeCtx();
	const state = bridge(pi, "exit");
	state.declarations.subscribed = new Set(["input"]);
	try {
		assert.equal(await ensureStarted(state, ui.ctx), true);
		assert.equal(await forward(state, "input", { text: "a" }, ui.ctx), undefined);
		assert.deepEqual(ui.notices, [["router: sidecar exited (code 3, signal null); Pi continues without the policy and the router restarts", "warning"]]);
		assert.deepEqual(ui.statuses, [["pi-policy-router", "router: offline (restarting)"]]);
	} finally {
		stop(state);
	}
});

test("an answered event applies its actions and returns the replies", async () => {
	const fake = fakePi();
	const ui = fakeCtx();
	const state = bridge(fake.pi, "echo");
	state.declarations.subscribed = new Set(["input"]);
	try {
		const replies = await forward(state, "input", {
			actions: [{ action: "tools", params: { only: ["read"] } }, { action: "input", params: { action: "handled", text: null } }],
		}, ui.ctx);
		assert.deepEqual(fake.calls, [["setActiveTools", ["read"]]]);
		assert.deepEqual(replies?.input, { action: "handled", text: null });
	} finally {
		stop(state);
	}
});

test("an event the policy has no rules for is not sent", async () => {
	const fake = fakePi();
	const state = bridge(fake.pi, "silent");
	try {
		assert.equal(await forward(state, "turn_start", { turnIndex: 0 }, fakeCtx().ctx), undefined);
		assert.equal(state.sidecar.running, false);
	} finally {
		stop(state);
	}
});
