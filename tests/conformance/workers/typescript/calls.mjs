// The TypeScript client's calls over one wire (BATON_PROTOCOL), printed as one JSON line: what
// test_typescript_connect.py compares between REST and Connect on the real server. Ids and times
// are left out; everything else must be the same over both wires.
import { BatonClient } from "../../../../sdk/typescript/dist/index.js";

const env = process.env;
const tag = env.CALLS_TAG;
const client = new BatonClient({ retry: null });
const out = { protocol: client.protocol };
const caught = async (promise) => {
  try {
    await promise;
    return "no error";
  } catch (e) {
    return { name: e.name, status: e.status, type: e.type, errors: e.errors, detail: e.detail };
  }
};
const workflow = `calls-${tag}`;
const jobType = `calls-${tag}-work`;
try {
  out.taskDef = await client.putTaskDef(jobType, { retryCount: 1 });
  for (const k of ["name", "createdAt", "updatedAt"]) delete out.taskDef[k];
  out.gotTaskDef = (await client.getTaskDef(jobType)).retryCount;
  const def = await client.registerDefinition({
    name: workflow,
    steps: [{ id: "work", type: "SERVICE_TASK", jobType }],
  });
  out.version = def.version;
  out.latest = (await client.getDefinition(workflow)).version;
  out.first = (await client.getDefinition(workflow, 1)).steps.map(({ jobType, ...rest }) => rest);
  const started = await client.startInstance({
    definitionName: workflow,
    input: { n: 3, f: 2.5, s: "x", list: [1, { a: null }] },
  });
  out.started = { status: started.status, input: started.input };
  const batch = await client.startInstances([{ definitionName: workflow, input: { n: 4 } }]);
  out.batch = batch.map((r) => r.instance?.status ?? r.error);
  const jobs = await client.pollJobs({ workerId: "w-calls", jobTypes: [jobType], maxJobs: 10 });
  out.jobs = jobs.map((j) => ({ attempt: j.attempt, retriesRemaining: j.retriesRemaining, input: j.input })).sort((a, b) => a.input.n - b.input.n);
  const [first, second] = jobs;
  out.heartbeat = Object.keys(await client.heartbeat({ jobId: first.id, workerId: "w-calls" })).sort();
  const done = await client.completeJob({ jobId: first.id, workerId: "w-calls", variables: { big: 2 ** 40, half: 0.5 } });
  out.completed = { status: done.status, applied: done.applied };
  const batchDone = await client.completeBatch([{ jobId: second.id, workerId: "w-calls", variablesToSet: { k: 1 } }]);
  out.completedBatch = batchDone.map((r) => [r.outcome, r.status]);
  const instance = await client.getInstance(started.id);
  out.instance = { status: instance.status, variables: instance.variables };
  out.steps = (await client.listSteps(started.id)).steps?.map((s) => [s.stepId, s.status]);
  out.history = (await client.getHistory(started.id)).events?.length > 0;
  const found = await client.searchInstances({ definitionName: workflow, limit: 10 });
  out.search = found.instances?.length;
  out.config = Object.keys((await client.config()) ?? {}).sort();
  out.stop = (await client.stopWorker("w-calls")).workerId;
  out.queue = await client.push(`calls-${tag}`, { title: "t", priority: 2 }).then(() => client.queueStats(`calls-${tag}`));
  out.deletedTaskDef = (await client.deleteTaskDef(jobType)).retryCount;
  const queue = `calls-${tag}`;
  out.peek = (await client.peek(queue, { limit: 5 })).map((t) => [t.title, t.priority]);
  const [task] = await client.dequeue(queue, { consumerId: "c1", maxTasks: 1 });
  out.ack = Object.keys(await client.ack(queue, task.id, task.receipt)).sort();
  out.purge = Object.keys(await client.purge(queue)).sort();
  out.openapi = (await client.openapi()).openapi?.slice(0, 2);
  const third = await client.startInstance({ definitionName: workflow, input: { n: 5 } });
  const [job3] = await client.pollJobs({ workerId: "w-calls", jobTypes: [jobType], maxJobs: 1 });
  // A false retryable must cross binary protobuf as false (the proto gives it presence).
  const failed = await client.failJob({ jobId: job3.id, workerId: "w-calls", errorMessage: "no", retryable: false });
  out.failed = [failed.status, failed.applied, typeof failed.nextAttemptAt];
  out.cancelled = await caught(client.cancelInstance(third.id, "done"));
  out.cancelled.detail = out.cancelled.detail?.replace(third.id, "<id>");
  out.deleted = Object.keys(await client.deleteInstance(third.id)).sort();
  const schedule = await client.createSchedule({
    definitionName: workflow,
    spec: { cron: ["0 3 * * *"] },
    paused: true,
    input: { n: 6 },
  });
  out.schedule = { paused: schedule.paused, input: schedule.input, spec: schedule.spec };
  out.scheduleGot = (await client.getSchedule(schedule.id)).definitionName === workflow;
  out.schedules = (await client.listSchedules({ limit: 100 })).schedules?.some((x) => x.id === schedule.id);
  out.unpaused = (await client.unpauseSchedule(schedule.id)).paused;
  out.deletedSchedule = Object.keys(await client.deleteSchedule(schedule.id)).sort();
  out.missing = await caught(client.getInstance("00000000-0000-0000-0000-000000000000"));
  out.invalid = await caught(client.pollJobs({ workerId: "w", jobTypes: ["t"], maxJobs: 500 }));
  out.wrongKey = await caught(new BatonClient({ apiKey: "wrong", retry: null }).listDefinitions());
} finally {
  client.close();
}
console.log(JSON.stringify(out));
