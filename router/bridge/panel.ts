/**
 * The `panel` action: in Pi's TUI a searchable settings list through `ctx.ui.custom`, built from
 * pi-tui's SettingsList and Input, Pi's own copy (nothing is installed: it is imported from beside
 * Pi's entry script). Each change runs the policy's command (`<args> KEY VALUE`, VALUE as
 * JSON), then its refresh, whose `panel` action with the same id updates the open panel in place.
 * Without the TUI the panel is shown as text. The promise ends when the panel is closed.
 */
import type { Component, SettingItem, TUI } from "@earendil-works/pi-tui";
import type { Theme, ThemeColor } from "@earendil-works/pi-coding-agent";
import type { Wire } from "./apply.ts";
import type { BridgeState, TuiKit } from "./state.ts";
import type { ExtensionContext, Notice, NotifyLevel, PanelItem, PanelParams } from "./types.ts";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { attempt, errorText, isObject, logLine } from "./util.ts";

const PANEL_ROWS = 12;

/** Every field of a panel item, each one the panel reads (tests/test_bridge_contract.py compares them). */
const ITEM_FIELDS: Record<keyof PanelItem, true> = {
	key: true, label: true, value: true, description: true, kind: true, choices: true, min: true, max: true,
};

export function panelFields(): string[] {
	return Object.keys(ITEM_FIELDS).sort();
}

type Params = Wire<PanelParams>;
type Item = Wire<PanelItem> & { key: string };

export function panelItems(params: Params): Item[] {
	const items: unknown[] = Array.isArray(params?.items) ? params.items : [];
	return items.filter((item): item is Item => isObject(item) && item.key !== undefined && item.key !== null);
}

export function itemLabel(item: Item): string {
	return String(item.label ?? item.key);
}

/** A value as the panel shows it: lists comma-separated, other non-strings as JSON. */
export function shownValue(item: Item): string {
	const value = item.value;
	if (value === null || value === undefined || value === "") return "(none)";
	if (item.kind === "list" && Array.isArray(value)) return value.length ? value.map(String).join(", ") : "(none)";
	return typeof value === "string" ? value : JSON.stringify(value);
}

/** A value as its inline input starts. */
export function editText(item: Item): string {
	const value = item.value;
	if (item.kind === "list") return Array.isArray(value) ? value.map(String).join(", ") : "";
	if (item.kind === "json") return JSON.stringify(value ?? null);
	return value === null || value === undefined ? "" : String(value);
}

/** What an input holds, as the JSON a change sends, or why it cannot be sent. */
export function parseEdit(item: Item, text: string): { json: string } | { error: string } {
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

/** The JSON of the value a bool or choice row cycled to. */
function cycledJson(item: Item, shown: string): string {
	return item.kind === "bool" ? String(shown === "true") : JSON.stringify(shown);
}

export async function showPanel(state: BridgeState, params: Params, ctx: ExtensionContext | null): Promise<void> {
	const id = String(params.id);
	const open = state.openPanels.get(id);
	if (open) return open(params as PanelParams);
	if (state.refreshing.has(id)) return; // the answer to a refresh of a panel closed meanwhile
	const custom = state.nativeUi?.custom ?? (typeof ctx?.ui?.custom === "function" ? ctx.ui.custom.bind(ctx.ui) : null);
	const kit = ctx?.mode === "tui" && custom ? await loadTuiKit(state) : null;
	if (!kit || !custom) return showPanelText(params, ctx);
	try {
		await custom<undefined>((tui, theme, _keys, done) => {
			const panel = panelView(state, kit, params, tui, theme, () => done(undefined));
			state.openPanels.set(id, panel.update);
			return panel.component;
		});
	} catch (error) {
		logLine(`router: panel ${id} failed (${errorText(error)}); shown as text`);
		showPanelText(params, ctx);
	} finally {
		state.openPanels.delete(id);
	}
}

function loadTuiKit(state: BridgeState): Promise<TuiKit | null> {
	state.tuiKit ??= importTui()
		.then((kit: TuiKit) => (kit?.SettingsList && kit?.Input ? kit : null))
		.catch((error: unknown) => {
			logLine(`router: @earendil-works/pi-tui cannot be imported (${errorText(error)}); panels are shown as text`);
			return null;
		});
	return state.tuiKit;
}

/**
 * Pi's own `@earendil-works/pi-tui`: the copy Pi's entry script resolves (what jiti maps the name
 * to for a `.ts` extension), else the name as Node resolves it from the bridge's folder (a Pi
 * whose entry is not a script, such as a single binary).
 */
async function importTui(): Promise<TuiKit> {
	const entry = process.argv[1];
	try {
		if (!entry) throw new Error("no entry script");
		const resolved = createRequire(fs.realpathSync(entry)).resolve("@earendil-works/pi-tui");
		return (await import(pathToFileURL(resolved).href)) as TuiKit;
	} catch {
		return await import("@earendil-works/pi-tui");
	}
}

function showPanelText(params: Params, ctx: ExtensionContext | null): void {
	const lines = [String(params.title ?? "")];
	if (params.text) lines.push(String(params.text));
	for (const item of panelItems(params)) lines.push(`${itemLabel(item)}: ${shownValue(item)}`);
	const text = lines.join("\n");
	if (ctx?.hasUI) ctx.ui.notify(text, "info");
	else process.stderr.write(`[router] ${text}\n`);
}

/** The panel's component and the function that updates it from a later `panel` action. */
function panelView(state: BridgeState, kit: TuiKit, params: Params, tui: TUI, theme: Theme, close: () => void): { component: Component; update: (next: Params) => void } {
	let current = params;
	let message: Notice | null = null;
	let queue: Promise<void> = Promise.resolve();
	const items = new Map<string, Item>(panelItems(params).map((item) => [String(item.key), item]));
	const pending = new Map<string, string>(); // key → the JSON an input submitted
	const rows = [...items.keys()].map((key) =>
		settingItem(kit, () => items.get(key) as Item, theme, tui, (json) => pending.set(key, json)));
	const listTheme = {
		label: (text: string, selected: boolean) => (selected ? theme.fg("accent", text) : text),
		value: (text: string, selected: boolean) => (selected ? theme.fg("accent", text) : theme.fg("muted", text)),
		description: (text: string) => theme.fg("dim", text),
		cursor: theme.fg("accent", "→ "),
		hint: (text: string) => theme.fg("dim", text),
	};
	const list = new kit.SettingsList(rows, Math.min(rows.length, PANEL_ROWS), listTheme,
		(key: string, shown: string) => {
			const item = items.get(key);
			if (!item) return;
			const json = pending.get(key) ?? cycledJson(item, shown);
			pending.delete(key);
			queue = queue.then(() => applyChange(item, json)).catch((error: unknown) => say(`router: ${errorText(error)}`, "error"));
		},
		close, { enableSearch: true });

	function say(text: string, level: NotifyLevel): void {
		message = { text, level };
		attempt(() => tui.requestRender(), undefined);
	}

	async function applyChange(item: Item, json: string): Promise<void> {
		const name = String(current.command);
		const notices: Notice[] = [];
		say(`${itemLabel(item)}: saving…`, "info");
		const args = [String(current.args ?? ""), String(item.key), json].filter(Boolean).join(" ");
		const result = await state.forward("command", { name, args }, state.ctx, { notices });
		if (result === undefined) notices.push({ text: `router: ${itemLabel(item)} was not changed: the policy engine did not answer`, level: "error" });
		if (current.refresh !== null && current.refresh !== undefined) {
			state.refreshing.add(String(current.id));
			try {
				await state.forward("command", { name, args: String(current.refresh) }, state.ctx, { notices });
			} finally {
				state.refreshing.delete(String(current.id));
			}
		}
		const worst = notices.find((n) => n.level === "error") ?? notices.find((n) => n.level === "warning");
		const text = notices.map((n) => n.text).join(" · ") || `${itemLabel(item)} = ${json}`;
		say(text, worst?.level ?? "info");
	}

	function update(next: Params): void {
		current = next;
		for (const item of panelItems(next)) {
			const key = String(item.key);
			if (!items.has(key)) continue; // the set of items is the one the panel opened with
			items.set(key, item);
			list.updateValue(key, shownValue(item));
			const row = rows.find((r) => r.id === key);
			if (row) row.description = item.description ?? undefined;
		}
		attempt(() => tui.requestRender(), undefined);
	}

	const component: Component = {
		render(width: number): string[] {
			const inner = Math.max(1, width - 2);
			const wrap = (text: string) => kit.wrapTextWithAnsi(text, inner).map((line: string) => ` ${line}`);
			const border = theme.fg("border", "─".repeat(Math.max(1, width)));
			const lines = [border, ` ${theme.bold(theme.fg("accent", String(current.title ?? "")))}`];
			if (current.text) lines.push(...wrap(theme.fg("muted", String(current.text))));
			if (message) lines.push(...wrap(theme.fg(levelColor(message.level), message.text)));
			lines.push("", ...list.render(width), border);
			return lines.map((line: string) => kit.truncateToWidth(line, width));
		},
		handleInput(data: string): void {
			list.handleInput(data);
			attempt(() => tui.requestRender(), undefined);
		},
		invalidate(): void {
			list.invalidate();
		},
	};
	return { component, update };
}

function levelColor(level: NotifyLevel): ThemeColor {
	return level === "info" ? "success" : level;
}

/** One row of the SettingsList (`latest`: the item as the last refresh gave it): bool and choice cycle, the other kinds open an input. */
function settingItem(kit: TuiKit, latest: () => Item, theme: Theme, tui: TUI, submit: (json: string) => void): SettingItem {
	const item = latest();
	const row: SettingItem = { id: String(item.key), label: itemLabel(item), currentValue: shownValue(item) };
	if (item.description) row.description = item.description;
	if (item.kind === "bool") row.values = ["true", "false"];
	else if (item.kind === "choice") row.values = (item.choices ?? []).map(String);
	else row.submenu = (_shown: string, finish: (shown?: string) => void) => inputView(kit, latest(), theme, tui, submit, finish);
	return row;
}

/** The inline input of a text, number, list or json item; a value that does not fit stays open. */
function inputView(kit: TuiKit, item: Item, theme: Theme, tui: TUI, submit: (json: string) => void, finish: (shown?: string) => void): Component {
	const input = new kit.Input();
	let problem = "";
	input.focused = true;
	input.handleInput(`\x1b[200~${editText(item)}\x1b[201~`); // as a paste: the cursor ends after it
	input.onSubmit = (text: string) => {
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
		render(width: number): string[] {
			const lines = [`  ${theme.fg("accent", itemLabel(item))}${item.kind === "list" ? theme.fg("dim", " (comma-separated)") : ""}`,
				...input.render(Math.max(1, width - 2)).map((line: string) => `  ${line}`)];
			if (problem) lines.push(`  ${theme.fg("error", problem)}`);
			lines.push("", theme.fg("dim", "  Enter to save · Esc to cancel"));
			return lines.map((line: string) => kit.truncateToWidth(line, width));
		},
		handleInput(data: string): void {
			problem = "";
			input.handleInput(data);
		},
		invalidate(): void {
			input.invalidate();
		},
	};
}
