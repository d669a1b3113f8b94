/** What the bridge reads from the session branch for the engine: the user's history, an excerpt. */
                                                   
import { attempt, textOf } from "./util.mjs";


                        
	                
	                                              
 

function messageEntries(ctx                         )                 {
	const branch            = attempt(() => ctx?.sessionManager.getBranch() ?? [], []);
	return branch.filter((e)                    => (e                             )?.type === "message");
}

/** The user's messages so far: how many, the first and the last (`session_start`). */
export function history(ctx                         )                                                                                      {
	const texts = messageEntries(ctx).filter((e) => e.message?.role === "user").map((e) => textOf(e.message.content));
	return { userMessages: texts.length, firstUserText: texts[0] ?? null, lastUserText: texts[texts.length - 1] ?? null };
}

/** The last `entries` messages of the branch (role and text), for a question's or dialog's context
 * (the policy's `excerpt_entries`; router/events/questions.py decides what the excerpt holds). */
export function excerpt(ctx                         , entries        )                                               {
	return messageEntries(ctx).slice(-Math.max(0, entries)).map((e) => ({ role: e.message?.role, text: textOf(e.message?.content) }));
}

// Generated from branch.ts by tests/bridge_js.py (types erased): edit the .ts, then run it.
