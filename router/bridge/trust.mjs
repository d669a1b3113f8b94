/**
 * Trust: what Pi says about it, for the engine to decide on (router/trust/store.py), and the engine's
 * report shown in the status line. The bridge decides nothing.
 */
import * as fs from "node:fs";
import * as path from "node:path";
                                                                
import {                   setStatus } from "./state.mjs";
import { agentDir, isObject } from "./util.mjs";

/**
 * `--approve` or `--no-approve` on Pi's command line, and `defaultProjectTrust` from the user's own
 * `<agent dir>/settings.json` (never the merged settings: a project's `.pi/settings.json` must
 * not vouch for itself). `approvedDigest` is the content the engine approved for this run at
 * its first hello; a later hello (new session, restarted sidecar) approves only that content,
 * never what the files hold by then.
 */
export function trustFacts(state             , argv                    = process.argv.slice(2))             {
	let defaultProjectTrust       = null;
	try {
		const settings          = JSON.parse(fs.readFileSync(path.join(agentDir(), "settings.json"), "utf8"));
		if (isObject(settings)) defaultProjectTrust = (settings.defaultProjectTrust                    ) ?? null;
	} catch {
		defaultProjectTrust = null;
	}
	return {
		approve: argv.includes("--approve") || argv.includes("-a"),
		noApprove: argv.includes("--no-approve") || argv.includes("-na"),
		settings: { defaultProjectTrust },
		approvedDigest: state.approvedDigest, firstHello: !state.helloAnswered,
	};
}

/** The engine's trust report: its status-line text, set when it changes (the message comes as a warning). */
export function showTrust(state             , trust                                )       {
	if (trust?.state === "approved" && state.approvedDigest === null) state.approvedDigest = trust.digest ?? null;
	const next                = trust && typeof trust === "object" ? (trust.status ?? null) : null;
	if (next === state.trustStatus) return;
	state.trustStatus = next;
	setStatus(state, next ?? undefined);
}

// Generated from trust.ts by tests/bridge_js.py (types erased): edit the .ts, then run it.
