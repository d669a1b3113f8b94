/** What the bridge reads from the session branch for the engine: the user's history, an excerpt. */
/**
 * @import { ExtensionContext, MessageEntry } from "./types.js"
 */
import { attempt, textOf } from "./util.mjs";

/**
 * @param {ExtensionContext | null} ctx
 * @returns {MessageEntry[]}
 */
function messageEntries(ctx) {
	/** @type {unknown[]} */
	const branch = attempt(() => ctx?.sessionManager.getBranch() ?? [], []);
	return branch.filter(/** @returns {e is MessageEntry} */ (e) => (/** @type {{ type?: unknown } | null} */ (e))?.type === "message");
}

/**
 * The user's messages so far: how many, the first and the last (`session_start`).
 * @param {ExtensionContext | null} ctx
 * @returns {{ userMessages: number; firstUserText: string | null; lastUserText: string | null }}
 */
export function history(ctx) {
	const texts = messageEntries(ctx).filter((e) => e.message?.role === "user").map((e) => textOf(e.message.content));
	return { userMessages: texts.length, firstUserText: texts[0] ?? null, lastUserText: texts[texts.length - 1] ?? null };
}

/**
 * The last `entries` messages of the branch (role and text), for a question's or dialog's context
 * (the policy's `excerpt_entries`; router/events/questions.py decides what the excerpt holds).
 * @param {ExtensionContext | null} ctx
 * @param {number} entries
 * @returns {{ role: string | undefined; text: string }[]}
 */
export function excerpt(ctx, entries) {
	return messageEntries(ctx).slice(-Math.max(0, entries)).map((e) => ({ role: e.message?.role, text: textOf(e.message?.content) }));
}
