/** What the bridge reads from the session branch for the engine: the user's history, an excerpt. */
import type { ExtensionContext } from "./types.ts";
import { attempt, textOf } from "./util.ts";


interface MessageEntry {
	type: "message";
	message: { role?: string; content?: unknown };
}

function messageEntries(ctx: ExtensionContext | null): MessageEntry[] {
	const branch: unknown[] = attempt(() => ctx?.sessionManager.getBranch() ?? [], []);
	return branch.filter((e): e is MessageEntry => (e as { type?: unknown } | null)?.type === "message");
}

/** The user's messages so far: how many, the first and the last (`session_start`). */
export function history(ctx: ExtensionContext | null): { userMessages: number; firstUserText: string | null; lastUserText: string | null } {
	const texts = messageEntries(ctx).filter((e) => e.message?.role === "user").map((e) => textOf(e.message.content));
	return { userMessages: texts.length, firstUserText: texts[0] ?? null, lastUserText: texts[texts.length - 1] ?? null };
}

/** The last `entries` messages of the branch (role and text), for a question's or dialog's context
 * (the policy's `excerpt_entries`; router/events/questions.py decides what the excerpt holds). */
export function excerpt(ctx: ExtensionContext | null, entries: number): { role: string | undefined; text: string }[] {
	return messageEntries(ctx).slice(-Math.max(0, entries)).map((e) => ({ role: e.message?.role, text: textOf(e.message?.content) }));
}
