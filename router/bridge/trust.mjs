/**
 * Trust: what Pi says about it, for the engine to decide on (router/trust/store.py), and the engine's
 * report shown in the status line. The bridge decides nothing.
 */
/**
 * @import { BridgeState, TrustState, Json, TrustFacts, TrustReport } from "./types.js"
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { setStatus } from "./state.mjs";
import { agentDir, isObject } from "./util.mjs";

/**
 * `--approve` or `--no-approve` on Pi's command line, and `defaultProjectTrust` from the user's own
 * `<agent dir>/settings.json` (never the merged settings: a project's `.pi/settings.json` must
 * not vouch for itself). `approvedDigest` is the content the engine approved for this run at
 * its first hello; a later hello (new session, restarted sidecar) approves only that content,
 * never what the files hold by then.
 * @param {BridgeState} state
 * @param {readonly string[]} [argv]
 * @returns {TrustFacts}
 */
export function trustFacts(state, argv = process.argv.slice(2)) {
	/** @type {Json} */
	let defaultProjectTrust = null;
	try {
		/** @type {unknown} */
		const settings = JSON.parse(fs.readFileSync(path.join(agentDir(), "settings.json"), "utf8"));
		if (isObject(settings)) defaultProjectTrust = (/** @type {Json | undefined} */ (settings.defaultProjectTrust)) ?? null;
	} catch {
		defaultProjectTrust = null;
	}
	return {
		approve: argv.includes("--approve") || argv.includes("-a"),
		noApprove: argv.includes("--no-approve") || argv.includes("-na"),
		settings: { defaultProjectTrust },
		approvedDigest: state.trust.approvedDigest, firstHello: !state.trust.helloAnswered,
	};
}

/**
 * The engine's trust report: its status-line text, set when it changes (the message comes as a warning).
 * @param {BridgeState} state
 * @param {TrustReport | null | undefined} trust
 * @returns {void}
 */
export function showTrust(state, trust) {
	if (trust?.state === "approved" && state.trust.approvedDigest === null) state.trust.approvedDigest = trust.digest ?? null;
	/** @type {string | null} */
	const next = trust && typeof trust === "object" ? (trust.status ?? null) : null;
	if (next === state.trust.trustStatus) return;
	state.trust.trustStatus = next;
	setStatus(state, next ?? undefined);
}

/**
 * No trust reported, no hello answered (the trust part of the bridge's state).
 * @returns {TrustState}
 */
export function trustState() {
	return { trustStatus: null, approvedDigest: null, helloAnswered: false };
}

/**
 * A hello was answered: later ones approve only what this one did (`report`: the startup hello's
 * trust, whose approved digest is kept).
 * @param {TrustState} trust
 * @param {TrustReport | null} [report]
 * @returns {void}
 */
export function helloAnswered(trust, report = null) {
	if (report?.state === "approved") trust.approvedDigest = report.digest ?? null;
	trust.helloAnswered = true;
}
