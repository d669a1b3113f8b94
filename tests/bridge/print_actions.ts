/** Prints the apply table's actions and the fields each reads, as JSON (tests/bridge/test_bridge_contract.py). */
import { actionFields } from "../../router/bridge/apply.mjs";
import { panelFields } from "../../router/bridge/panel.mjs";

process.stdout.write(`${JSON.stringify({ actions: actionFields(), panel_item: panelFields() })}\n`);
