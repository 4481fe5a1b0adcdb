// The README's walk-through from TypeScript, with the typed client: register the definition,
// start an order, wait for the approval step, approve it, and print the finished instance's output.
// Run the worker (npm run worker) beside it.
import { readFileSync } from "node:fs";
import { BatonClient, type DefinitionJson, type InstanceJson, type JsonObject } from "@baton/worker";

const here = new URL("../../order_fulfilment/", import.meta.url);
const definition = JSON.parse(readFileSync(new URL("definition.json", here), "utf8")) as DefinitionJson;
const input = JSON.parse(readFileSync(new URL("input.json", here), "utf8")) as JsonObject;

const baton = new BatonClient();
// Started by the name the definition gives itself (order-fulfilment-example, not the README
// walk-through's order-fulfilment), as registered.
const registered = await baton.registerDefinition(definition);
const started = await baton.startInstance({ definitionName: registered.name, input });
console.log(`started ${started.id}`);

async function waitFor(id: string, done: (i: InstanceJson) => boolean): Promise<InstanceJson> {
  const until = Date.now() + 60_000;
  for (;;) {
    const instance = await baton.getInstance(id);
    if (done(instance)) return instance;
    if (Date.now() > until) throw new Error(`instance ${id} is still ${instance.status}; is the worker running?`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const id = started.id ?? "";
const waiting = await waitFor(id, (i) =>
  (i.steps ?? []).some((s) => s.stepId === "approve" && s.status === "IN_PROGRESS"),
);
const charge = waiting.steps?.find((s) => s.stepId === "charge");
console.log(`charge ${charge?.status} after ${charge?.attempt} attempts; approving`);
await baton.completeUserTask(id, "approve", { variables: { approvedBy: "ada" } });
const finished = await waitFor(id, (i) => i.status !== "RUNNING");
console.log(finished.status, JSON.stringify(finished.output));
if (finished.status !== "COMPLETED") process.exitCode = 1;
