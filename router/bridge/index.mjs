/**
 * pi-policy-router bridge: connects Pi to the policy engine (`router serve`).
 *
 * It holds no policy logic. It starts the sidecar while Pi loads it (and again in `session_start`)
 * and stops it in `session_shutdown`, forwards the events the loaded policy has rules for, applies
 * the actions it gets back, and answers the engine's requests (classify, complete, ask). Every
 * engine call has a timeout; on timeout, crash or protocol error an event the policy guards (a tool
 * call a rule could block: guard.mjs) is refused, saying why, and every other event goes on with
 * Pi's native behaviour; the user is warned, a status line says so, the failure is logged and the
 * sidecar is restarted with back-off. Protocol: docs/protocol.md (version 1).
 *
 * The modules, by job: transport.mjs (the JSON-lines connection), resolve.mjs (which command starts
 * the sidecar), lifecycle.mjs (hello, restarts, shutdown), forward.mjs (one event), hooks.mjs (Pi's
 * events), guard.mjs (what fails closed), apply.mjs (the action table), declarations.mjs (the
 * policy's commands, tools and virtual models), dialogs.mjs, panel.mjs, requests.mjs (the engine's
 * requests), trust.mjs, state.mjs, types.d.ts.
 */
/**
 * @import { BridgeState, Owner, PiApi } from "./types.js"
 */
import { applyState } from "./apply.mjs";
import { declarationsState } from "./declarations.mjs";
import { dialogsState } from "./dialogs.mjs";
import { forward } from "./forward.mjs";
import { guardState } from "./guard.mjs";
import { hooksState, registerHooks } from "./hooks.mjs";
import { handleExit, lifecycleState, preload } from "./lifecycle.mjs";
import { panelState } from "./panel.mjs";
import { answerEngine } from "./requests.mjs";
import { Sidecar } from "./transport.mjs";
import { trustState } from "./trust.mjs";
import { attempt, hereDir, logLine } from "./util.mjs";

const OWNER = Symbol.for("pi-policy-router.bridge");

/**
 * Whether this copy of the bridge runs. Installed for the user and for the project, both copies
 * load into one Pi process: the first one loaded owns it and a later copy does nothing (one log
 * line), so nothing is registered, forwarded or shown twice. Pi invalidates the extension API of
 * a reloaded or replaced session, so an owner whose API throws is gone and its place is free.
 * @param {PiApi} pi
 * @returns {boolean}
 */
function claimProcess(pi) {
	const slot = /** @type {typeof globalThis & { [OWNER]?: Owner }} */ (globalThis);
	const owner = slot[OWNER];
	if (owner && owner.pi !== pi && attempt(() => (owner.pi.events.emit("pi-policy-router:owner", null), true), false)) {
		logLine(`router: the bridge in ${hereDir()} is a second copy; the one in ${owner.dir} runs, this one does nothing`);
		return false;
	}
	slot[OWNER] = { pi, dir: hereDir() };
	return true;
}

/**
 * A new bridge's state: what every module reads, and each module's own part, as that module creates it.
 * @param {PiApi} pi
 * @param {Sidecar} [sidecar]
 * @returns {BridgeState}
 */
export function createState(pi, sidecar = new Sidecar()) {
	return {
		pi, sidecar, forward: async () => undefined, ctx: null,
		lifecycle: lifecycleState(), declarations: declarationsState(), guard: guardState(), dialogs: dialogsState(),
		panel: panelState(), apply: applyState(), hooks: hooksState(), trust: trustState(),
	};
}

/**
 * The state of a bridge that runs, wired: the sidecar's exits and requests, the forwarder.
 * @param {PiApi} pi
 * @param {Sidecar} [sidecar]
 * @returns {BridgeState}
 */
export function connect(pi, sidecar = new Sidecar()) {
	const state = createState(pi, sidecar);
	state.forward = (type, payload, ctx, options) => forward(state, type, payload, ctx, options);
	state.sidecar.onExit = (reason) => handleExit(state, reason);
	state.sidecar.onRequest = (message) => void answerEngine(state, message);
	return state;
}

/**
 * @param {PiApi} pi
 * @returns {Promise<void>}
 */
export default async function (pi) {
	if (!claimProcess(pi)) return;
	const state = connect(pi);
	registerHooks(state);
	await preload(state);
}
