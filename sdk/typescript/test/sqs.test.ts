// The outbox transport against a real SQS API (moto's server from the repository's .venv, as the
// Python SDK's tests use; skipped when it is not installed) and a fake Baton for the claims.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { after, before, test } from "node:test";
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { BatonClient, SqsTransport, silentLogger } from "../src/index.js";
import { FakeBaton, job, waitUntil } from "./fake.js";

const MOTO = new URL("../../../../.venv/bin/moto_server", import.meta.url).pathname;
const skip = existsSync(MOTO) ? false : "moto_server not installed (make install)";
let moto: ChildProcess | undefined;
let endpoint = "";
let fake: FakeBaton;

async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

before(async () => {
  fake = await new FakeBaton().start();
  if (skip) return;
  const port = await freePort();
  endpoint = `http://127.0.0.1:${port}`;
  moto = spawn(MOTO, ["-H", "127.0.0.1", "-p", String(port)], { stdio: "ignore" });
  const until = Date.now() + 20_000;
  for (;;) {
    try {
      await fetch(`${endpoint}/moto-api/`);
      break;
    } catch {
      if (Date.now() > until) throw new Error("moto_server did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
});
after(async () => {
  moto?.kill("SIGTERM");
  await fake.close();
});

test("receive, claim by id, delete; a duplicate is dropped; a foreign job type is left for others", {
  skip,
}, async () => {
  const sqs = new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "x", secretAccessKey: "x" },
  });
  const { QueueUrl: queueUrl = "" } = await sqs.send(
    new CreateQueueCommand({
      QueueName: "dispatch.fifo",
      Attributes: { FifoQueue: "true", ContentBasedDeduplication: "true" },
    }),
  );
  const send = (body: string, group: string) =>
    sqs.send(
      new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, MessageGroupId: group }),
    );
  await send(JSON.stringify({ jobId: "a", attempt: 1, jobType: "t" }), "i1");
  await send(JSON.stringify({ jobId: "b", attempt: 2, jobType: "t" }), "i2");
  await send(JSON.stringify({ jobId: "c", attempt: 1, jobType: "other" }), "i3");
  await send("not a dispatch", "i4");
  fake.on("POST /v1/jobs/*", (req) => {
    if (req.path === "/v1/jobs/a/claim") return { body: job("a", { attempt: req.body.attempt }) };
    return { status: 409, body: { title: "Conflict", status: 409, detail: "not claimable" } };
  });
  const client = new BatonClient({ url: fake.url, apiKey: "k" });
  const transport = SqsTransport.fromEnv(
    client,
    { waitSeconds: 0, foreignDelaySeconds: 30, logger: silentLogger },
    { BATON_DISPATCH_QUEUE_URL: queueUrl, BATON_SQS_ENDPOINT: endpoint, AWS_REGION: "us-east-1" },
  );
  const signal = new AbortController().signal;
  const jobs = [];
  const until = Date.now() + 10_000;
  while (fake.seen.length < 2 && Date.now() < until) {
    jobs.push(...(await transport.fetch({ workerId: "w", jobTypes: ["t"], maxJobs: 10, signal })));
  }
  await waitUntil(() => fake.seen.length >= 2, 1, "two claims");
  assert.deepEqual(
    jobs.map((j) => j.id),
    ["a"],
  );
  assert.deepEqual(
    fake.seen.map((s) => [s.path, s.body]).sort(),
    [
      ["/v1/jobs/a/claim", { workerId: "w", attempt: 1 }],
      ["/v1/jobs/b/claim", { workerId: "w", attempt: 2 }],
    ].sort(),
  );
  assert.equal(transport.duplicates, 1);
  const attrs = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  // Only the foreign job type's message is left (invisible for foreignDelaySeconds).
  assert.equal(attrs.Attributes?.ApproximateNumberOfMessages, "0");
  assert.equal(attrs.Attributes?.ApproximateNumberOfMessagesNotVisible, "1");
});

/** A standard queue holding one dispatch message per job id, and its transport. */
async function queueOf(name: string, ids: string[]) {
  const sqs = new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "x", secretAccessKey: "x" },
  });
  const { QueueUrl: queueUrl = "" } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
  for (const id of ids) {
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: JSON.stringify({ jobId: id, attempt: 1, jobType: "t" }),
      }),
    );
  }
  const transport = new SqsTransport(new BatonClient({ url: fake.url, apiKey: "k" }), {
    queueUrl,
    sqs,
    waitSeconds: 0,
    logger: silentLogger,
  });
  const counts = async () => {
    const attrs = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
      }),
    );
    return {
      visible: Number(attrs.Attributes?.ApproximateNumberOfMessages),
      invisible: Number(attrs.Attributes?.ApproximateNumberOfMessagesNotVisible),
    };
  };
  return { transport, counts };
}

test("a stop while a claim is under way: its job is returned to run; the messages not claimed are visible again at once", {
  skip,
}, async () => {
  const { transport, counts } = await queueOf("stop-claim", ["s1", "s2", "s3"]);
  const stop = new AbortController();
  const claims: string[] = [];
  fake.on("POST /v1/jobs/*", (req) => {
    const id = req.path.split("/")[3] ?? "";
    claims.push(id);
    stop.abort(); // the stop lands while this claim is on its way
    return { body: job(id) };
  });
  const jobs = await transport.fetch({
    workerId: "w",
    jobTypes: ["t"],
    maxJobs: 10,
    signal: stop.signal,
  });
  assert.equal(claims.length, 1, "nothing claimed after the stop");
  assert.deepEqual(
    jobs.map((j) => j.id),
    claims,
    "the job claimed at the stop is returned (the runner runs it)",
  );
  assert.deepEqual(await counts(), { visible: 2, invisible: 0 });
});

test("a claim that fails after others were claimed: those jobs still run; the rest are released", {
  skip,
}, async () => {
  const { transport, counts } = await queueOf("claim-fails", ["f1", "f2", "f3"]);
  const claims: string[] = [];
  fake.on("POST /v1/jobs/*", (req) => {
    const id = req.path.split("/")[3] ?? "";
    claims.push(id);
    if (claims.length === 2)
      return { status: 403, body: { title: "Forbidden", status: 403, detail: "no" } };
    return { body: job(id) };
  });
  const jobs = await transport.fetch({
    workerId: "w",
    jobTypes: ["t"],
    maxJobs: 10,
    signal: new AbortController().signal,
  });
  assert.deepEqual(
    jobs.map((j) => j.id),
    claims.slice(0, 1),
  );
  assert.equal(claims.length, 2);
  // The refused one stays invisible (its visibility timeout); the unclaimed one is back.
  assert.deepEqual(await counts(), { visible: 1, invisible: 1 });
});
