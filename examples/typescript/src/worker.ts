// The worker: polls for the four job types until Ctrl-C (or SIGTERM), then drains and exits.
// BATON_URL and BATON_API_KEY configure it (default: a local baton dev and its key file).
import { Runner } from "@baton/worker";
import { registry } from "./handlers.js";

const runner = new Runner(registry, { parallelism: 8 });
await runner.run({ handleSignals: true });
