/** The transport's warm start over a stand-in warm server (a Node socket server): the start
 * request, lines held until `ok`, and the spawned sidecar when the server refuses. */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { Sidecar } from "../../router/bridge/transport.mjs";
import { usableSocket, warmSocket } from "../../router/bridge/warm.mjs";
import { FAKE_SIDECAR } from "./helpers.ts";

const COMMAND = [process.execPath, FAKE_SIDECAR, "hello", "serve"]; // `… serve`: it may go warm

/** A private directory with a stand-in server at the socket the bridge derives for COMMAND. */
async function standIn(answer: (request: Record<string, unknown>, socket: net.Socket) => void): Promise<{ dir: string; close: () => void; requests: Record<string, unknown>[] }> {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bw-"));
	fs.chmodSync(dir, 0o700);
	process.env.ROUTER_WARM_DIR = dir;
	delete process.env.ROUTER_WARM;
	const socketPath = warmSocket(COMMAND);
	assert.ok(socketPath);
	const requests: Record<string, unknown>[] = [];
	const server = net.createServer((socket) => {
		let text = "";
		let started = false;
		socket.setEncoding("utf8");
		socket.on("data", (chunk: string) => {
			if (started) return; // after the start request, `answer` reads the connection itself
			text += chunk;
			const newline = text.indexOf("\n");
			if (newline < 0) return;
			started = true;
			requests.push(JSON.parse(text.slice(0, newline)) as Record<string, unknown>);
			answer(requests[requests.length - 1] ?? {}, socket);
		});
	});
	await new Promise<void>((resolve) => server.listen(socketPath, resolve));
	assert.equal(usableSocket(socketPath), true);
	return { dir, requests, close: () => (server.close(), fs.rmSync(dir, { recursive: true, force: true })) };
}

test("a refused start request falls back to a spawned sidecar with the held lines", async () => {
	const warm = await standIn((_request, socket) => socket.end(`${JSON.stringify({ warm: "refused", reason: "upgraded" })}\n`));
	const sidecar = new Sidecar({ resolve: () => ({ command: COMMAND, via: "ROUTER_SERVE" }) });
	try {
		sidecar.start(process.cwd());
		const hello = await sidecar.call<{ events: string[] }>("hello", {}, 5000);
		assert.deepEqual(hello.events, ["input"]); // the spawned fake sidecar answered
		const [request] = warm.requests;
		assert.equal(request?.warm, 1);
		assert.deepEqual((request?.argv as string[]).slice(0, 1), ["--cwd"]); // the options after `serve`
		assert.equal((request?.env as Record<string, string>).PYTHONSAFEPATH, "1");
	} finally {
		sidecar.stop();
		warm.close();
	}
});

test("after ok the connection carries the protocol, and its end is the sidecar's end", async () => {
	const warm = await standIn((_request, socket) => {
		socket.write(`${JSON.stringify({ warm: "ok", pid: 999999 })}\n`);
		let buffer = "";
		socket.on("data", (chunk: string) => {
			buffer += chunk;
			for (let newline = buffer.indexOf("\n"); newline >= 0; newline = buffer.indexOf("\n")) {
				const message = JSON.parse(buffer.slice(0, newline)) as { id: number; method: string };
				buffer = buffer.slice(newline + 1);
				if (message.method === "hello") socket.write(`${JSON.stringify({ id: message.id, result: { protocol: 1, events: ["warm"] } })}\n`);
				else socket.destroy();
			}
		});
	});
	const sidecar = new Sidecar({ resolve: () => ({ command: COMMAND, via: "ROUTER_SERVE" }) });
	try {
		const ended = new Promise<string>((resolve) => (sidecar.onExit = resolve));
		sidecar.start(process.cwd());
		const hello = await sidecar.call<{ events: string[] }>("hello", {}, 5000);
		assert.deepEqual(hello.events, ["warm"]); // answered over the socket, not by a spawned process
		await assert.rejects(sidecar.call("event", {}, 5000), /sidecar connection ended \(warm sidecar, pid 999999\)/);
		assert.match(await ended, /sidecar connection ended/);
	} finally {
		sidecar.stop();
		warm.close();
	}
});

test("no warm start for ROUTER_WARM=0, for a command that is not `serve`, or a directory others can enter", () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bw-"));
	try {
		assert.equal(warmSocket(COMMAND, { ROUTER_WARM: "0", ROUTER_WARM_DIR: dir }), null);
		const socketPath = warmSocket(COMMAND, { ROUTER_WARM_DIR: dir });
		assert.ok(socketPath);
		fs.chmodSync(dir, 0o755);
		fs.writeFileSync(socketPath, "");
		assert.equal(usableSocket(socketPath), false); // not a socket, and the directory is open
		assert.equal(warmSocket(COMMAND, { ROUTER_WARM_DIR: `/${"x".repeat(120)}` }), null); // too long for a socket
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
