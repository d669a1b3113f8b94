// A stand-in for `router serve` in the bridge's unit tests: `node fake_sidecar.mjs MODE`.
// silent: reads, never answers. hello: answers hello (events: input), never an event.
// exit: answers hello, then exits 3 on the next line. garbage: answers every line with a line that
// is not JSON. long: writes 200 characters without a newline. split: answers hello with its UTF-8
// bytes in two writes, cut inside a character. echo: answers hello, and each event with the
// actions its payload carries (payload.actions), after a progress note when payload.slow is set.
// guard-exit / guard-silent / guard-open: answers hello with tool_call and input forwarded and a failure
// policy (tool_call closed; open for guard-open), then exits 3 on the next event / never answers one.
import { createInterface } from "node:readline";

const mode = process.argv[2];
const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const hello = (id) => send({ id, result: { protocol: 1, events: ["input"], warnings: [] } });
const guarded = (id, toolCall) => send({ id, result: { protocol: 1, events: ["input", "tool_call"], warnings: [],
	failure: { input: "open", tool_call: toolCall } } });

createInterface({ input: process.stdin }).on("line", (line) => {
	const message = JSON.parse(line);
	if (mode === "silent") return;
	if (mode === "garbage") return void process.stdout.write("this is not json\n");
	if (mode === "long") return void process.stdout.write("x".repeat(200));
	if (message.method === "hello") {
		if (mode === "split") {
			const bytes = Buffer.from(`${JSON.stringify({ id: message.id, result: { protocol: 1, engine: "é", events: [] } })}\n`);
			const cut = bytes.indexOf(0xc3) + 1; // between the two bytes of "é"
			process.stdout.write(bytes.subarray(0, cut));
			return void setImmediate(() => process.stdout.write(bytes.subarray(cut)));
		}
		if (mode.startsWith("guard-")) return guarded(message.id, mode === "guard-open" ? "open" : "closed");
		return hello(message.id);
	}
	if (mode === "guard-exit" || mode === "guard-open") process.exit(3);
	if (mode === "guard-silent") return;
	if (mode === "exit") process.exit(3);
	if (mode === "echo" && message.method === "event") {
		const payload = message.params.payload ?? {};
		if (payload.slow) send({ method: "progress", params: { id: message.id, budget_ms: 2000 } });
		const answer = () => send({ id: message.id, result: { actions: payload.actions ?? [] } });
		return payload.slow ? void setTimeout(answer, payload.slow) : answer();
	}
});
