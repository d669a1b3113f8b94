/** The declarations cache as the bridge reads it: the key, a valid entry, and every way an entry is refused. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { CACHE_FORMAT, cachedDeclarations, declarationsKey, declarationsText, entryPath } from "../../router/bridge/startup.mjs";
import type { TrustFacts } from "../../router/bridge/types.js";

const FACTS: TrustFacts = { approve: false, noApprove: false, settings: { defaultProjectTrust: null }, approvedDigest: null, firstHello: true };
const DECLARED = { events: ["command", "route"], commands: [], tools: [], virtual_models: [{ provider: "router", id: "auto", fallback: ["previous" as const, "first_available" as const] }], skills: [] };

function sha(text: string | Buffer): string {
	return createHash("sha256").update(text).digest("hex");
}

/** An agent dir with a policy file and an entry (as router/runtime/declarations_cache.py writes it) for `key`. */
function world(key: string, declared: object = DECLARED): { agent: string; policy: string; write: (entry: object) => void; entry: Record<string, unknown> } {
	const agent = fs.mkdtempSync(path.join(os.tmpdir(), "startup-"));
	const policy = path.join(agent, "router.yaml");
	fs.writeFileSync(policy, "version: 1\n");
	const text = JSON.stringify(declared);
	const entry = { format: CACHE_FORMAT, key, engine: "0.1.0", declarations: text, digest: sha(text),
		files: [[policy, sha("version: 1\n")], [path.join(agent, "router", "trust.json"), null]] };
	const write = (value: object) => {
		fs.mkdirSync(path.dirname(entryPath(agent, key)), { recursive: true });
		fs.writeFileSync(entryPath(agent, key), JSON.stringify(value));
	};
	write(entry);
	return { agent, policy, write, entry };
}

test("the key changes with the project, the command, a ROUTER_ variable and the trust facts", () => {
	const key = declarationsKey("/p", "/a", ["router", "serve"], FACTS, {});
	assert.match(key, /^[0-9a-f]{64}$/);
	assert.equal(declarationsKey("/p", "/a", ["router", "serve"], { ...FACTS, firstHello: false }, {}), key);
	for (const other of [
		declarationsKey("/q", "/a", ["router", "serve"], FACTS, {}),
		declarationsKey("/p", "/a", ["python3", "-m", "router", "serve"], FACTS, {}),
		declarationsKey("/p", "/a", ["router", "serve"], FACTS, { ROUTER_MANAGED_DIR: "/etc/x" }),
		declarationsKey("/p", "/a", ["router", "serve"], { ...FACTS, approve: true }, {}),
	]) assert.notEqual(other, key);
	assert.equal(declarationsKey("/p", "/a", ["router", "serve"], FACTS, { HOME: "/elsewhere" }), key);
	// the bridge's own waits are not inputs of the declarations
	assert.equal(declarationsKey("/p", "/a", ["router", "serve"], FACTS, { ROUTER_BRIDGE_HELLO_TIMEOUT_MS: "60000",
		ROUTER_BRIDGE_TIMEOUT_MS: "9000" }), key);
});

test("a valid entry gives the declarations", () => {
	const { agent } = world("a".repeat(64));
	assert.deepEqual(cachedDeclarations(agent, "a".repeat(64)), DECLARED);
});

test("a changed, appeared or unreadable file refuses the entry", () => {
	const key = "b".repeat(64);
	const changed = world(key);
	fs.writeFileSync(changed.policy, "version: 1\nrules: []\n");
	assert.equal(cachedDeclarations(changed.agent, key), null);
	const appeared = world(key);
	fs.mkdirSync(path.join(appeared.agent, "router"), { recursive: true });
	fs.writeFileSync(path.join(appeared.agent, "router", "trust.json"), "{}");
	assert.equal(cachedDeclarations(appeared.agent, key), null);
	const gone = world(key);
	fs.rmSync(gone.policy);
	assert.equal(cachedDeclarations(gone.agent, key), null);
});

test("a corrupt, edited, foreign or differently keyed entry is refused", () => {
	const key = "c".repeat(64);
	const { agent, write, entry } = world(key);
	fs.writeFileSync(entryPath(agent, key), "{\"format\": 1, \"key\"");
	assert.equal(cachedDeclarations(agent, key), null);
	write({ ...entry, declarations: JSON.stringify({ ...DECLARED, events: ["command"] }) }); // digest no longer matches
	assert.equal(cachedDeclarations(agent, key), null);
	write({ ...entry, key: "d".repeat(64) });
	assert.equal(cachedDeclarations(agent, key), null);
	write({ ...entry, format: CACHE_FORMAT + 1 });
	assert.equal(cachedDeclarations(agent, key), null);
	write({ ...entry, files: [] });
	assert.equal(cachedDeclarations(agent, key), null);
	write({ ...entry, files: [["relative/router.yaml", null]] });
	assert.equal(cachedDeclarations(agent, key), null);
	const text = JSON.stringify({ events: "command" });
	write({ ...entry, declarations: text, digest: sha(text) }); // not lists
	assert.equal(cachedDeclarations(agent, key), null);
	write(entry);
	assert.deepEqual(cachedDeclarations(agent, key), DECLARED);
});

test("declarationsText ignores the order of declarations, not their content", () => {
	const swapped = { ...DECLARED, events: ["route", "command"] };
	assert.equal(declarationsText(swapped), declarationsText(DECLARED));
	assert.notEqual(declarationsText({ ...DECLARED, virtual_models: [{ provider: "router", id: "smart", fallback: ["previous" as const] }] }), declarationsText(DECLARED));
});
