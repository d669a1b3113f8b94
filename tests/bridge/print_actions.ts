/** Prints the apply table's actions and the fields each reads, as JSON (tests/test_bridge_contract.py). */
import { actionFields } from "../../router/bridge/apply.ts";
import { panelFields } from "../../router/bridge/panel.ts";

process.stdout.write(`${JSON.stringify({ actions: actionFields(), panel_item: panelFields() })}\n`);
