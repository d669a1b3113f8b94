/**
 * The `panel` action: in Pi's TUI a searchable settings list through `ctx.ui.custom`, built from
 * pi-tui's SettingsList and Input, Pi's own copy (nothing is installed: it is imported from beside
 * Pi's entry script). Each change runs the policy's command (`<args> KEY VALUE`, VALUE as
 * JSON), then its refresh, whose `panel` action with the same id updates the open panel in place.
 * Without the TUI the panel is shown as text. The promise ends when the panel is closed.
 */
/**
 * @import { Component, SettingItem, TUI } from "@earendil-works/pi-tui"
 * @import { Theme, ThemeColor } from "@earendil-works/pi-coding-agent"
 * @import { BridgeState, PanelState, ExtensionContext, Item, Notice, NotifyLevel, PanelItem, PanelParams, Params, TuiKit } from "./types.js"
 */
import * as fs from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { attempt, errorText, isObject, logLine } from "./util.mjs";

const PANEL_ROWS = 12;

/**
 * Every field of a panel item, each one the panel reads (tests/bridge/test_bridge_contract.py compares them).
 * @type {Record<keyof PanelItem, true>}
 */
const ITEM_FIELDS = {
	key: true, label: true, value: true, description: true, kind: true, choices: true, min: true, max: true,
};

/**
 * @returns {string[]}
 */
export function panelFields() {
	return Object.keys(ITEM_FIELDS).sort();
}

/**
 * @param {Params} params
 * @returns {Item[]}
 */
export function panelItems(params) {
	/** @type {unknown[]} */
	const items = Array.isArray(params?.items) ? params.items : [];
	return items.filter(/** @returns {item is Item} */ (item) => isObject(item) && item.key !== undefined && item.key !== null);
}

/**
 * @param {Item} item
 * @returns {string}
 */
export function itemLabel(item) {
	return String(item.label ?? item.key);
}

/**
 * A value as the panel shows it: lists comma-separated, other non-strings as JSON.
 * @param {Item} item
 * @returns {string}
 */
export function shownValue(item) {
	const value = item.value;
	if (value === null || value === undefined || value === "") return "(none)";
	if (item.kind === "list" && Array.isArray(value)) return value.length ? value.map(String).join(", ") : "(none)";
	return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * A value as its inline input starts.
 * @param {Item} item
 * @returns {string}
 */
export function editText(item) {
	const value = item.value;
	if (item.kind === "list") return Array.isArray(value) ? value.map(String).join(", ") : "";
	if (item.kind === "json") return JSON.stringify(value ?? null);
	return value === null || value === undefined ? "" : String(value);
}

/**
 * What an input holds, as the JSON a change sends, or why it cannot be sent.
 * @param {Item} item
 * @param {string} text
 * @returns {{ json: string } | { error: string }}
 */
export function parseEdit(item, text) {
	const trimmed = text.trim();
	const label = itemLabel(item);
	if (item.kind === "number") {
		const number = Number(trimmed);
		if (trimmed === "" || !Number.isFinite(number)) return { error: `${label}: '${trimmed}' is not a number` };
		if (typeof item.min === "number" && number < item.min) return { error: `${label}: at least ${item.min}` };
		if (typeof item.max === "number" && number > item.max) return { error: `${label}: at most ${item.max}` };
		return { json: JSON.stringify(number) };
	}
	if (item.kind === "list") return { json: JSON.stringify(trimmed.split(",").map((part) => part.trim()).filter(Boolean)) };
	if (item.kind === "json") {
		try {
			return { json: JSON.stringify(JSON.parse(trimmed)) };
		} catch (error) {
			return { error: `${label}: not JSON (${errorText(error)})` };
		}
	}
	return { json: JSON.stringify(trimmed) };
}

/**
 * The JSON of the value a bool or choice row cycled to.
 * @param {Item} item
 * @param {string} shown
 * @returns {string}
 */
function cycledJson(item, shown) {
	return item.kind === "bool" ? String(shown === "true") : JSON.stringify(shown);
}

/**
 * @param {BridgeState} state
 * @param {Params} params
 * @param {ExtensionContext | null} ctx
 * @returns {Promise<void>}
 */
export async function showPanel(state, params, ctx) {
	const id = String(params.id);
	const open = state.panel.openPanels.get(id);
	if (open) return open(/** @type {PanelParams} */ (params));
	if (state.panel.refreshing.has(id)) return; // the answer to a refresh of a panel closed meanwhile
	const custom = state.dialogs.nativeUi?.custom ?? (typeof ctx?.ui?.custom === "function" ? ctx.ui.custom.bind(ctx.ui) : null);
	const kit = ctx?.mode === "tui" && custom ? await loadTuiKit(state) : null;
	if (!kit || !custom) return showPanelText(params, ctx);
	try {
		await /** @type {Promise<undefined>} */ (custom((tui, theme, _keys, done) => {
			const panel = panelView(state, kit, params, tui, theme, () => done(undefined));
			state.panel.openPanels.set(id, panel.update);
			return panel.component;
		}));
	} catch (error) {
		logLine(`router: panel ${id} failed (${errorText(error)}); shown as text`);
		showPanelText(params, ctx);
	} finally {
		state.panel.openPanels.delete(id);
	}
}

/**
 * @param {BridgeState} state
 * @returns {Promise<TuiKit | null>}
 */
function loadTuiKit(state) {
	state.panel.tuiKit ??= importTui()
		.then(/** @param {TuiKit} kit */ (kit) => (kit?.SettingsList && kit?.Input ? kit : null))
		.catch(/** @param {unknown} error */ (error) => {
			logLine(`router: @earendil-works/pi-tui cannot be imported (${errorText(error)}); panels are shown as text`);
			return null;
		});
	return state.panel.tuiKit;
}

/**
 * Pi's own `@earendil-works/pi-tui`: the copy Pi's entry script resolves (what jiti maps the name
 * to for a `.ts` extension), else the name as Node resolves it from the bridge's folder (a Pi
 * whose entry is not a script, such as a single binary).
 * @returns {Promise<TuiKit>}
 */
async function importTui() {
	const entry = process.argv[1];
	try {
		if (!entry) throw new Error("no entry script");
		const resolved = createRequire(fs.realpathSync(entry)).resolve("@earendil-works/pi-tui");
		return /** @type {TuiKit} */ ((await import(pathToFileURL(resolved).href)));
	} catch {
		return await import("@earendil-works/pi-tui");
	}
}

/**
 * @param {Params} params
 * @param {ExtensionContext | null} ctx
 * @returns {void}
 */
function showPanelText(params, ctx) {
	const lines = [String(params.title ?? "")];
	if (params.text) lines.push(String(params.text));
	for (const item of panelItems(params)) lines.push(`${itemLabel(item)}: ${shownValue(item)}`);
	const text = lines.join("\n");
	if (ctx?.hasUI) ctx.ui.notify(text, "info");
	else process.stderr.write(`[router] ${text}\n`);
}

/**
 * What an open panel shows that changes: the last `panel` action's parameters, the last message.
 * @typedef {{ current: Params; message: Notice | null; tui: TUI }} PanelShown
 */

/**
 * The panel's component and the function that updates it from a later `panel` action.
 * @param {BridgeState} state
 * @param {TuiKit} kit
 * @param {Params} params
 * @param {TUI} tui
 * @param {Theme} theme
 * @param {() => void} close
 * @returns {{ component: Component; update: (next: Params) => void }}
 */
function panelView(state, kit, params, tui, theme, close) {
	/** @type {PanelShown} */
	const shown = { current: params, message: null, tui };
	/** @type {Promise<void>} */
	let queue = Promise.resolve();
	const items = /** @type {Map<string, Item>} */ (new Map(panelItems(params).map((item) => [String(item.key), item])));
	const pending = /** @type {Map<string, string>} */ (new Map()); // key → the JSON an input submitted
	const rows = [...items.keys()].map((key) =>
		settingItem(kit, () => /** @type {Item} */ (items.get(key)), theme, tui, (json) => pending.set(key, json)));
	const list = new kit.SettingsList(rows, Math.min(rows.length, PANEL_ROWS), settingsTheme(theme),
		/**
		 * @param {string} key
		 * @param {string} value
		 */
		(key, value) => {
			const item = items.get(key);
			if (!item) return;
			const json = pending.get(key) ?? cycledJson(item, value);
			pending.delete(key);
			queue = queue.then(() => applyChange(state, shown, item, json))
				.catch(/** @param {unknown} error */ (error) => say(shown, `router: ${errorText(error)}`, "error"));
		},
		close, { enableSearch: true });
	/**
	 * @param {Params} next
	 * @returns {void}
	 */
	const update = (next) => {
		shown.current = next;
		for (const item of panelItems(next)) {
			const key = String(item.key);
			if (!items.has(key)) continue; // the set of items is the one the panel opened with
			items.set(key, item);
			list.updateValue(key, shownValue(item));
			const row = rows.find((r) => r.id === key);
			if (row) row.description = item.description ?? undefined;
		}
		attempt(() => tui.requestRender(), undefined);
	};
	return { component: panelComponent(kit, theme, shown, list), update };
}

/**
 * The settings list's colours, from Pi's theme.
 * @param {Theme} theme
 */
function settingsTheme(theme) {
	return {
		/**
		 * @param {string} text
		 * @param {boolean} selected
		 */
		label: (text, selected) => (selected ? theme.fg("accent", text) : text),
		/**
		 * @param {string} text
		 * @param {boolean} selected
		 */
		value: (text, selected) => (selected ? theme.fg("accent", text) : theme.fg("muted", text)),
		/** @param {string} text */ description: (text) => theme.fg("dim", text),
		cursor: theme.fg("accent", "→ "),
		/** @param {string} text */ hint: (text) => theme.fg("dim", text),
	};
}

/**
 * A message under the panel's title (the outcome of a change), shown at once.
 * @param {PanelShown} shown
 * @param {string} text
 * @param {NotifyLevel} level
 * @returns {void}
 */
function say(shown, text, level) {
	shown.message = { text, level };
	attempt(() => shown.tui.requestRender(), undefined);
}

/**
 * One change the user made: the panel's command with the item's key and value, then its refresh.
 * @param {BridgeState} state
 * @param {PanelShown} shown
 * @param {Item} item
 * @param {string} json
 * @returns {Promise<void>}
 */
async function applyChange(state, shown, item, json) {
	const { current } = shown;
	const name = String(current.command);
	/** @type {Notice[]} */
	const notices = [];
	say(shown, `${itemLabel(item)}: saving…`, "info");
	const args = [String(current.args ?? ""), String(item.key), json].filter(Boolean).join(" ");
	const result = await state.forward("command", { name, args }, state.ctx, { notices });
	if (result === undefined) notices.push({ text: `router: ${itemLabel(item)} was not changed: the policy engine did not answer`, level: "error" });
	if (current.refresh !== null && current.refresh !== undefined) {
		state.panel.refreshing.add(String(current.id));
		try {
			await state.forward("command", { name, args: String(current.refresh) }, state.ctx, { notices });
		} finally {
			state.panel.refreshing.delete(String(current.id));
		}
	}
	const worst = notices.find((n) => n.level === "error") ?? notices.find((n) => n.level === "warning");
	const text = notices.map((n) => n.text).join(" · ") || `${itemLabel(item)} = ${json}`;
	say(shown, text, worst?.level ?? "info");
}

/**
 * The panel as Pi's TUI draws it: a border, the title, the text, the last message, the list.
 * @param {TuiKit} kit
 * @param {Theme} theme
 * @param {PanelShown} shown
 * @param {InstanceType<TuiKit["SettingsList"]>} list
 * @returns {Component}
 */
function panelComponent(kit, theme, shown, list) {
	return {
		/**
		 * @param {number} width
		 * @returns {string[]}
		 */
		render(width) {
			const { current, message } = shown;
			const inner = Math.max(1, width - 2);
			/** @param {string} text */
			const wrap = (text) => kit.wrapTextWithAnsi(text, inner).map(/** @param {string} line */ (line) => ` ${line}`);
			const border = theme.fg("border", "─".repeat(Math.max(1, width)));
			const lines = [border, ` ${theme.bold(theme.fg("accent", String(current.title ?? "")))}`];
			if (current.text) lines.push(...wrap(theme.fg("muted", String(current.text))));
			if (message) lines.push(...wrap(theme.fg(levelColor(message.level), message.text)));
			lines.push("", ...list.render(width), border);
			return lines.map(/** @param {string} line */ (line) => kit.truncateToWidth(line, width));
		},
		/**
		 * @param {string} data
		 * @returns {void}
		 */
		handleInput(data) {
			list.handleInput(data);
			attempt(() => shown.tui.requestRender(), undefined);
		},
		/**
		 * @returns {void}
		 */
		invalidate() {
			list.invalidate();
		},
	};
}

/**
 * @param {NotifyLevel} level
 * @returns {ThemeColor}
 */
function levelColor(level) {
	return level === "info" ? "success" : level;
}

/**
 * One row of the SettingsList (`latest`: the item as the last refresh gave it): bool and choice cycle, the other kinds open an input.
 * @param {TuiKit} kit
 * @param {() => Item} latest
 * @param {Theme} theme
 * @param {TUI} tui
 * @param {(json: string) => void} submit
 * @returns {SettingItem}
 */
function settingItem(kit, latest, theme, tui, submit) {
	const item = latest();
	/** @type {SettingItem} */
	const row = { id: String(item.key), label: itemLabel(item), currentValue: shownValue(item) };
	if (item.description) row.description = item.description;
	if (item.kind === "bool") row.values = ["true", "false"];
	else if (item.kind === "choice") row.values = (item.choices ?? []).map(String);
	else row.submenu = /** @param {string} _shown @param {(shown?: string) => void} finish */ (_shown, finish) => inputView(kit, latest(), theme, tui, submit, finish);
	return row;
}

/**
 * The inline input of a text, number, list or json item; a value that does not fit stays open.
 * @param {TuiKit} kit
 * @param {Item} item
 * @param {Theme} theme
 * @param {TUI} tui
 * @param {(json: string) => void} submit
 * @param {(shown?: string) => void} finish
 * @returns {Component}
 */
function inputView(kit, item, theme, tui, submit, finish) {
	const input = new kit.Input();
	let problem = "";
	input.focused = true;
	input.handleInput(`\x1b[200~${editText(item)}\x1b[201~`); // as a paste: the cursor ends after it
	input.onSubmit = /** @param {string} text */ (text) => {
		const parsed = parseEdit(item, text);
		if ("error" in parsed) {
			problem = parsed.error;
			attempt(() => tui.requestRender(), undefined);
			return;
		}
		submit(parsed.json);
		finish(shownValue({ ...item, value: JSON.parse(parsed.json) }));
	};
	input.onEscape = () => finish(undefined);
	return {
		/**
		 * @param {number} width
		 * @returns {string[]}
		 */
		render(width) {
			const lines = [`  ${theme.fg("accent", itemLabel(item))}${item.kind === "list" ? theme.fg("dim", " (comma-separated)") : ""}`,
				...input.render(Math.max(1, width - 2)).map(/** @param {string} line */ (line) => `  ${line}`)];
			if (problem) lines.push(`  ${theme.fg("error", problem)}`);
			lines.push("", theme.fg("dim", "  Enter to save · Esc to cancel"));
			return lines.map(/** @param {string} line */ (line) => kit.truncateToWidth(line, width));
		},
		/**
		 * @param {string} data
		 * @returns {void}
		 */
		handleInput(data) {
			problem = "";
			input.handleInput(data);
		},
		/**
		 * @returns {void}
		 */
		invalidate() {
			input.invalidate();
		},
	};
}

/**
 * No panel open (the panel part of the bridge's state).
 * @returns {PanelState}
 */
export function panelState() {
	return { tuiKit: null, openPanels: new Map(), refreshing: new Set() };
}
