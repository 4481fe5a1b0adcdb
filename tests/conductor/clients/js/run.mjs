// Conductor's own JavaScript client (@io-orkes/conductor-javascript, unmodified) against Baton's
// /api: register a task definition and a workflow through the client, start the workflow, run a
// legacy TaskManager worker until the workflow completes, and print one JSON line with what
// happened. Run by tests/conductor/test_conductor_js_client.py.
//
//   CONDUCTOR_SERVER_URL=http://127.0.0.1:8103/api CONDUCTOR_AUTH_KEY=js \
//   CONDUCTOR_AUTH_SECRET="$(cat .baton/data/api-key)" node run.mjs [prefix]
//
// The client's default fetch on Node (an undici Agent, streaming each request body chunked) is
// used unless CONDUCTOR_JS_FETCH=node, which hands Node's own fetch to orkesConductorClient's
// documented customFetch argument (bodies then go with a Content-Length).
//
// Progress goes to stderr; the result ({"ok": true, ...} or {"ok": false, "step", "error"}) is
// the last line of stdout. Exits 0 only when the workflow completed with the expected output.
import {
  MetadataClient,
  orkesConductorClient,
  TaskManager,
  WorkflowExecutor,
} from "@io-orkes/conductor-javascript";

const DEADLINE_MS = Number(process.env.E2E_DEADLINE_MS ?? 60_000);
// How long the client may take to get its first token (it retries 8 times over ~2 minutes).
const CONNECT_MS = Number(process.env.E2E_CONNECT_MS ?? 60_000);
const prefix = process.argv[2] ?? `js${Date.now().toString(36)}`;
const taskName = `${prefix}_greet`;
const workflowName = `${prefix}_greetings`;
const seen = { polled: 0, executed: [] };
let step = "connect";

const warnings = [];
const quietLogger = {
  info: () => {},
  debug: () => {},
  warn: (...args) => {
    warnings.push(args.join(" "));
    console.error("[conductor-js warn]", ...args);
  },
  error: (...args) => console.error("[conductor-js error]", ...args),
};

function say(text) {
  console.error(`[js-client] ${text}`);
}

function fail(error) {
  const detail = error?.body ?? error?.response ?? undefined;
  console.log(
    JSON.stringify({
      ok: false,
      step,
      error: String(error?.message ?? error),
      ...(detail === undefined ? {} : { detail: String(detail) }),
    }),
  );
  process.exit(1);
}

async function main() {
  const customFetch = process.env.CONDUCTOR_JS_FETCH === "node" ? globalThis.fetch : undefined;
  const connecting = orkesConductorClient(
    {
      serverUrl: process.env.CONDUCTOR_SERVER_URL,
      keyId: process.env.CONDUCTOR_AUTH_KEY,
      keySecret: process.env.CONDUCTOR_AUTH_SECRET,
      logger: quietLogger,
    },
    customFetch,
  );
  let timer;
  const tooLong = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no token after ${CONNECT_MS} ms: ${warnings.join("; ")}`)),
      CONNECT_MS,
    );
  });
  const client = await Promise.race([connecting, tooLong]);
  clearTimeout(timer);
  const metadata = new MetadataClient(client);
  const executor = new WorkflowExecutor(client);

  step = "registerTask";
  say(`registering task definition ${taskName}`);
  await metadata.registerTask({
    name: taskName,
    retryCount: 1,
    retryLogic: "FIXED",
    retryDelaySeconds: 1,
    timeoutSeconds: 60,
    responseTimeoutSeconds: 30,
    timeoutPolicy: "TIME_OUT_WF",
    ownerEmail: "tests@example.com",
    inputKeys: ["name"],
    outputKeys: ["greeting"],
  });

  step = "registerWorkflowDef";
  say(`registering workflow ${workflowName}`);
  await metadata.registerWorkflowDef(
    {
      name: workflowName,
      version: 1,
      schemaVersion: 2,
      ownerEmail: "tests@example.com",
      timeoutSeconds: 120,
      timeoutPolicy: "TIME_OUT_WF",
      inputParameters: ["name"],
      tasks: [
        {
          name: taskName,
          taskReferenceName: "greet_ref",
          type: "SIMPLE",
          inputParameters: { name: "${workflow.input.name}" },
        },
      ],
      outputParameters: { greeting: "${greet_ref.output.greeting}" },
    },
    true,
  );

  step = "startWorkflow";
  const workflowId = await executor.startWorkflow({
    name: workflowName,
    version: 1,
    input: { name: "Baton" },
    correlationId: `${prefix}-corr`,
  });
  say(`started workflow ${workflowId}`);

  step = "TaskManager";
  const worker = {
    taskDefName: taskName,
    concurrency: 1,
    pollInterval: 100,
    execute: async (task) => {
      seen.executed.push({ taskId: task.taskId, workflowInstanceId: task.workflowInstanceId });
      return { status: "COMPLETED", outputData: { greeting: `Hello ${task.inputData?.name}` } };
    },
  };
  const manager = new TaskManager(client, [worker], {
    logger: quietLogger,
    options: { pollInterval: 100, concurrency: 1, workerID: `${prefix}-worker` },
    eventListeners: [
      {
        onPollCompleted: (event) => {
          seen.polled += event.tasksReceived ?? 0;
        },
      },
    ],
  });
  manager.startPolling();
  say("TaskManager polling");

  step = "getWorkflow";
  const deadline = Date.now() + DEADLINE_MS;
  let workflow = await executor.getWorkflow(workflowId, true);
  while (!["COMPLETED", "FAILED", "TERMINATED", "TIMED_OUT"].includes(workflow.status)) {
    if (Date.now() > deadline) {
      await manager.stopPolling();
      throw new Error(`workflow ${workflowId} still ${workflow.status} after ${DEADLINE_MS} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    workflow = await executor.getWorkflow(workflowId, true);
  }
  step = "stopPolling";
  await manager.stopPolling();
  say(`workflow ${workflowId} ${workflow.status}`);

  const task = (workflow.tasks ?? [])[0] ?? {};
  const result = {
    ok: workflow.status === "COMPLETED" && workflow.output?.greeting === "Hello Baton",
    workflowId,
    status: workflow.status,
    output: workflow.output ?? null,
    correlationId: workflow.correlationId ?? null,
    task: {
      taskType: task.taskType ?? null,
      status: task.status ?? null,
      referenceTaskName: task.referenceTaskName ?? null,
      workerId: task.workerId ?? null,
      outputData: task.outputData ?? null,
    },
    executed: seen.executed.length,
    polledTasks: seen.polled,
  };
  console.log(JSON.stringify(result));
  process.exit(result.ok ? 0 : 1);
}

main().catch(fail);
