/** Prints the bridge's warm socket for each `{command, env}` of argv[2] (JSON) as JSON (tests/runtime/test_warm.py). */
import { warmSocket } from "../../router/bridge/warm.mjs";

const cases = JSON.parse(process.argv[2] ?? "[]") as { command: string[]; env: Record<string, string> }[];
process.stdout.write(`${JSON.stringify(cases.map(({ command, env }) => warmSocket(command, env)))}\n`);
