/** Prints the bridge's sidecar resolution for `{env, agent}` (argv[2], JSON) as JSON (tests/bridge/test_bridge_resolve.py). */
import { resolveServe } from "../../router/bridge/resolve.mjs";

const { env, agent } = JSON.parse(process.argv[2] ?? "{}") as { env: Record<string, string>; agent: string };
process.stdout.write(`${JSON.stringify(resolveServe(env, agent))}\n`);
