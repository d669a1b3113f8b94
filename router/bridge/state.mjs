/**
 * The bridge's state: one object per loaded bridge, passed to every module that reads or changes
 * it, and the two ways the bridge tells the user something (a warning, the status line).
 */
                                                                                                   
                                          
import { Sidecar } from "./transport.mjs";
import { attempt, logLine } from "./util.mjs";

export const STATUS_KEY = "pi-policy-router";

/** Pi's own dialogs, kept when `ctx.ui` is patched (the engine's `ask` and fallbacks use them). */
                                                                                              
	                                            
  

/** What `@earendil-works/pi-tui` offers the panel (imported when a panel first opens in the TUI). */
                                                             

                                 
	                                 
	                                                                                                  
	                               
 

/** Send one event to the engine; undefined: no decision (Pi keeps its native behaviour). */
                                                                                                                                              

/** The excerpt size until the policy declares one (the engine's default, router/events/questions.py). */
export const DEFAULT_EXCERPT_ENTRIES = 12;

                              
	                   
	                          
	                                                                                                                       
	                 
	                                         
	                             
	                                                                          
	                        
	                                                                                                                
	                                                  
	                                                           
	                   
	                                                                                                    
	                       
	                     
	               
	                                                                        
	                
	                 
	                                    
	                  
	                                  
	                    
	                                                                                                             
	                         
	                                                                                                  
	                     
	                                                                                      
	                           
	                                                                    
	                              
	                                                                                                       
	                                                                
	                       
	                          
	                      
	                                                          
	                          
	                                                           
	                                      
	                                                                                           
	                                       
	                                      
	                                           
	                                                       
	                                         
	                        
	                           
	                                                    
	                            
	                           
	                              
	                                                                              
	                       
 

export function createState(pi       , sidecar          = new Sidecar())              {
	return {
		pi, sidecar, forward: async () => undefined, ctx: null, subscribed: new Set(), failure: null, guardTold: false,
		eventTimeoutMs: 0, skillPaths: [],
		ready: false, outage: false, failures: 0, restartTimer: null, stopping: false, starting: null,
		preloading: false, fromCache: null, cachedStart: false, preloadFailure: null, lastFailure: null,
		registered: { commands: new Set(), tools: new Set(), models: new Set(), busEvents: new Set() },
		excerptEntries: DEFAULT_EXCERPT_ENTRIES,
		nativeUi: null, toolActivity: false, routerCompaction: false, compactionQueued: null,
		pendingCustom: null, tuiKit: null, openPanels: new Map(), refreshing: new Set(),
		shownWarnings: new Set(), unknownActions: new Set(), trustStatus: null, approvedDigest: null,
		helloAnswered: false,
	};
}

/** A warning: in the log, and shown (a notification, or stderr without a UI). */
export function warn(state             , text        )       {
	logLine(text);
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.notify(text, "warning"), undefined);
	else process.stderr.write(`[router] ${text}\n`);
}

export function setStatus(state             , text                    )       {
	const ctx = state.ctx;
	if (ctx?.hasUI) attempt(() => ctx.ui.setStatus(STATUS_KEY, text), undefined);
}

// Generated from state.ts by tests/bridge_js.py (types erased): edit the .ts, then run it.
