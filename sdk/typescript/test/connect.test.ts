// The Connect transport against the in-process fake speaking binary protobuf: every call as its
// RPC, answers as REST's JSON, errors as REST's errors and retries, the runner unchanged.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { RPC_NAMES } from "../src/connect.js";
import { WorkflowEngine } from "../src/gen/workflow/v1/engine_pb.js";
import {
  type Auth,
  type AuthRequest,
  AwsSigV4Auth,
  BatonClient,
  ConflictError,
  NonRetryableError,
  NotFoundError,
  RateLimitedError,
  Registry,
  Runner,
  retryPolicy,
  silentLogger,
  ValidationError,
} from "../src/index.js";
import { FakeBaton, job, rpcRoute, waitUntil } from "./fake.js";

const fast = retryPolicy({ initialInterval: 0.001, maximumInterval: 0.005, maximumAttempts: 4 });
let fake: FakeBaton;
before(async () => {
  fake = await new FakeBaton().start();
});
after(() => fake.close());

function on(...route: ReturnType<typeof rpcRoute>): void {
  fake.on(...route);
}

/** A runner speaking Connect to the fake, polling fast and flushing at once. */
function connectRunner(registry: Registry): Runner {
  return new Runner(registry, {
    url: fake.url,
    apiKey: "k",
    protocol: "connect",
    workerId: "w1",
    pollInterval: 0.01,
    maxPollInterval: 0.02,
    longPollWait: 0,
    flushInterval: 0.01,
    logger: silentLogger,
  });
}

function connect(extra: Record<string, unknown> = {}): BatonClient {
  return new BatonClient({
    url: fake.url,
    apiKey: "k",
    retry: fast,
    protocol: "connect",
    ...extra,
  });
}

test("every RPC of the proto's service has its REST twin in the codec", () => {
  const rpcs = Object.values(WorkflowEngine.method).map((m) => m.name);
  assert.deepEqual(
    rpcs.filter((r) => !RPC_NAMES.has(r)),
    [],
  );
  assert.equal(RPC_NAMES.size, rpcs.length);
});

test("a poll goes as PollJobs in binary; the jobs come back as REST's JSON", async () => {
  let got: unknown;
  on(
    ...rpcRoute("PollJobs", (message) => {
      got = message;
      return { jobs: [{ ...job("j1", { retriesRemaining: 0 }), inputPayloadPath: "" }] };
    }),
  );
  const client = connect();
  const jobs = await client.pollJobs({ workerId: "w1", jobTypes: ["t"], maxJobs: 5 });
  assert.deepEqual(got, { workerId: "w1", jobTypes: ["t"], maxJobs: 5 });
  const seen = fake.calls("/rpc/workflow.v1.WorkflowEngine/PollJobs").at(-1);
  assert.equal(seen?.headers["content-type"], "application/proto");
  assert.equal(seen?.headers.accept, "application/proto");
  assert.equal(seen?.headers["connect-protocol-version"], "1");
  assert.equal(seen?.headers["x-api-key"], "k");
  assert.equal(jobs.length, 1);
  const j = jobs[0] as unknown as Record<string, unknown>;
  assert.equal(j.id, "j1");
  assert.equal(j.retriesRemaining, 0, "a number at its default is given, as REST gives it");
  assert.deepEqual(j.input, { n: 1 });
  assert.equal("inputPayloadPath" in j, false, "an empty text is left out, as REST leaves it");
  assert.equal(fake.calls("/v1/jobs/poll").length, 0);
  client.close();
});

test("path and query parameters become the message's fields; int64 answers are numbers", async () => {
  let got: unknown;
  on(
    ...rpcRoute("GetDefinition", (message) => {
      got = message;
      return { name: "order/a b", version: 3 };
    }),
  );
  on(...rpcRoute("Stats", () => ({ pending: "7", dead: "0" })));
  const client = connect();
  const def = await client.getDefinition("order/a b", 3);
  assert.deepEqual(got, { name: "order/a b", version: 3 });
  assert.equal(def.version, 3);
  const stats = await new BatonClient({
    url: fake.url,
    apiKey: "k",
    protocol: "connect",
  }).queueStats("q");
  assert.equal(stats.pending, 7);
  assert.equal(stats.dead, 0);
  client.close();
});

test("a Connect error reads as REST's error of the problem it carries", async () => {
  on(
    ...rpcRoute("RegisterDefinition", () => ({
      status: 400,
      code: "invalid_argument",
      problem: {
        type: "https://baton.dev/problems/validation-failed",
        title: "Validation failed",
        status: 422,
        detail: "1 problem found",
        errors: [{ path: "steps[0].id", message: "required" }],
      },
    })),
  );
  on(
    ...rpcRoute("GetInstance", () => ({
      status: 404,
      code: "not_found",
      problem: { title: "Not found", status: 404, detail: "instance 'nope' not found" },
    })),
  );
  on(
    ...rpcRoute("ClaimJob", () => ({
      status: 400,
      code: "failed_precondition",
      problem: { title: "Conflict", status: 409, detail: "claimed by another worker" },
    })),
  );
  const client = connect();
  await assert.rejects(client.registerDefinition({ name: "x" }), (e: unknown) => {
    assert.ok(e instanceof ValidationError, String(e));
    assert.equal(e.status, 422);
    assert.deepEqual(e.errors, [{ path: "steps[0].id", message: "required" }]);
    return true;
  });
  await assert.rejects(client.getInstance("nope"), (e: unknown) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.detail, "instance 'nope' not found");
    return true;
  });
  await assert.rejects(client.claimJob("j1", { workerId: "w1" }), ConflictError);
  client.close();
});

test("resource_exhausted is retried after its Retry-After, as a REST 429 is", async () => {
  let calls = 0;
  on(
    ...rpcRoute("CompleteJob", () => {
      calls += 1;
      if (calls < 3) {
        return {
          status: 429,
          code: "resource_exhausted",
          headers: { "retry-after": "0" },
          problem: { title: "Throttled", status: 429, detail: "slow down" },
        };
      }
      return { jobId: "j1", applied: true, status: "COMPLETED" };
    }),
  );
  const client = connect();
  const answer = await client.completeJob({
    jobId: "j1",
    workerId: "w1",
    variables: { a: 1 },
  });
  assert.equal(calls, 3);
  assert.equal((answer as unknown as Record<string, unknown>).applied, true);
  calls = -100;
  await assert.rejects(
    connect({ retry: null }).completeJob({ jobId: "j1", workerId: "w1" }),
    RateLimitedError,
  );
  client.close();
});

test("an error without a Problem detail (a gateway's) keeps its status and message", async () => {
  fake.on("POST /rpc/workflow.v1.WorkflowEngine/Heartbeat", () => ({
    status: 403,
    body: { message: "Forbidden" },
  }));
  await assert.rejects(
    connect().heartbeat({ jobId: "j1", workerId: "w1" }),
    (e: { status?: number; detail?: string; message?: string }) => {
      assert.equal(e.status, 403);
      assert.equal(e.detail, "Forbidden");
      assert.match(String(e.message), /apiKey option/);
      return true;
    },
  );
});

test("BATON_PROTOCOL chooses the wire; an unknown one is refused", () => {
  const saved = process.env.BATON_PROTOCOL;
  try {
    process.env.BATON_PROTOCOL = "connect";
    assert.equal(new BatonClient({ url: fake.url, apiKey: "k" }).protocol, "connect");
    assert.equal(
      new BatonClient({ url: fake.url, apiKey: "k", protocol: "rest" }).protocol,
      "rest",
    );
    process.env.BATON_PROTOCOL = "grpc";
    assert.throws(() => new BatonClient({ url: fake.url, apiKey: "k" }), /BATON_PROTOCOL=grpc/);
    delete process.env.BATON_PROTOCOL;
    assert.equal(new BatonClient({ url: fake.url, apiKey: "k" }).protocol, "rest");
  } finally {
    if (saved === undefined) delete process.env.BATON_PROTOCOL;
    else process.env.BATON_PROTOCOL = saved;
  }
});

test("credentials see the binary body they sign", async () => {
  const bodies: AuthRequest["body"][] = [];
  const auth: Auth = {
    headers(request) {
      bodies.push(request.body);
      return { "x-api-key": "k" };
    },
  };
  on(...rpcRoute("StopWorker", (m) => ({ workerId: (m as { workerId: string }).workerId })));
  const client = new BatonClient({ url: fake.url, auth, protocol: "connect" });
  await client.stopWorker("w9");
  const sent = fake.calls("/rpc/workflow.v1.WorkflowEngine/StopWorker").at(-1);
  assert.ok(bodies[0] instanceof Uint8Array);
  assert.deepEqual(Buffer.from(bodies[0]), sent?.bytes);
});

test("the runner over Connect: polls, completes in a batch, stops, all as RPCs", async () => {
  const queue = [job("r1"), job("r2"), job("r3")];
  on(
    ...rpcRoute("PollJobs", (m) => ({ jobs: queue.splice(0, (m as { maxJobs: number }).maxJobs) })),
  );
  const results: Record<string, unknown>[] = [];
  on(
    ...rpcRoute("CompleteBatch", (m) => {
      const items = (m as { results: { jobId: string }[] }).results;
      results.push(...items);
      return {
        results: items.map((r) => ({ jobId: r.jobId, outcome: "APPLIED", status: "COMPLETED" })),
      };
    }),
  );
  on(...rpcRoute("StopWorker", (m) => ({ workerId: (m as { workerId: string }).workerId })));
  on(...rpcRoute("GetConfig", () => ({})));
  const registry = new Registry();
  registry.register("t", async (j) => ({ done: j.jobId, n: j.input.n }));
  const before = fake.seen.length;
  const runner = connectRunner(registry);
  const stop = new AbortController();
  const done = runner.run({ signal: stop.signal });
  await waitUntil(() => results.length === 3, 5, "3 results");
  stop.abort();
  await done;
  assert.deepEqual(
    results
      .map((r) => r.variablesToSet)
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    [
      { done: "r1", n: 1 },
      { done: "r2", n: 1 },
      { done: "r3", n: 1 },
    ],
  );
  const paths = new Set(fake.seen.slice(before).map((s) => s.path));
  for (const path of paths) assert.match(path, /^\/rpc\/workflow\.v1\.WorkflowEngine\//);
  assert.ok(paths.has("/rpc/workflow.v1.WorkflowEngine/StopWorker"));
});

test("SigV4 signs the binary body as the AWS SDK signer signs it", async () => {
  const credentials = {
    accessKeyId: "AKIDEXAMPLE",
    secretAccessKey: "secret",
    sessionToken: "tok",
  };
  on(...rpcRoute("StopWorker", (m) => ({ workerId: (m as { workerId: string }).workerId })));
  const client = new BatonClient({
    url: fake.url,
    auth: new AwsSigV4Auth({ region: "eu-west-1", credentials }),
    protocol: "connect",
  });
  await client.stopWorker("w-signed");
  const seen = fake.calls("/rpc/workflow.v1.WorkflowEngine/StopWorker").at(-1);
  assert.ok(seen);
  assert.equal(
    seen.headers["x-amz-content-sha256"],
    createHash("sha256").update(seen.bytes).digest("hex"),
  );
  const date = String(seen.headers["x-amz-date"]);
  const when = new Date(
    `${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`,
  );
  const url = new URL(fake.url);
  const expected = await new SignatureV4({
    service: "execute-api",
    region: "eu-west-1",
    credentials,
    sha256: Sha256,
  }).sign(
    {
      method: "POST",
      protocol: "http:",
      hostname: url.hostname,
      port: Number(url.port),
      path: seen.path,
      query: {},
      headers: { host: url.host, "content-type": "application/proto" },
      body: new Uint8Array(seen.bytes),
    },
    { signingDate: when },
  );
  assert.equal(seen.headers.authorization, expected.headers.authorization);
  client.close();
});

test("a false retryable crosses binary protobuf as false (the proto gives it presence)", async () => {
  const got: unknown[] = [];
  on(
    ...rpcRoute("FailJob", (m) => {
      got.push(m);
      return { jobId: "j1", status: "FAILED", applied: true };
    }),
  );
  const client = connect();
  await client.failJob({ jobId: "j1", workerId: "w1", errorMessage: "no", retryable: false });
  await client.failJob({ jobId: "j1", workerId: "w1", errorMessage: "again" });
  assert.deepEqual(got, [
    { jobId: "j1", workerId: "w1", errorMessage: "no", retryable: false },
    { jobId: "j1", workerId: "w1", errorMessage: "again", retryable: true },
  ]);
  client.close();
});

test("a failure's output crosses binary protobuf: FailJob, and the runner's CompleteBatch", async () => {
  const output = { code: 42, input: { k: "v", n: [1, 2.5, null, true] } };
  const got: unknown[] = [];
  on(
    ...rpcRoute("FailJob", (m) => {
      got.push(m);
      return { jobId: "j1", status: "FAILED", applied: true };
    }),
  );
  const client = connect();
  await client.failJob({
    jobId: "j1",
    workerId: "w1",
    errorMessage: "no",
    retryable: false,
    output,
  });
  assert.deepEqual(got, [
    { jobId: "j1", workerId: "w1", errorMessage: "no", retryable: false, output },
  ]);
  client.close();

  const queue = [job("f1", { jobType: "fails" })];
  on(
    ...rpcRoute("PollJobs", (m) => ({ jobs: queue.splice(0, (m as { maxJobs: number }).maxJobs) })),
  );
  const failures: unknown[] = [];
  on(
    ...rpcRoute("CompleteBatch", (m) => {
      const items = (m as { results: { jobId: string; failure?: unknown }[] }).results;
      failures.push(...items.map((i) => i.failure));
      return {
        results: items.map((r) => ({ jobId: r.jobId, outcome: "APPLIED", status: "FAILED" })),
      };
    }),
  );
  on(...rpcRoute("StopWorker", (m) => ({ workerId: (m as { workerId: string }).workerId })));
  on(...rpcRoute("GetConfig", () => ({})));
  const registry = new Registry();
  registry.register("fails", async (j) => {
    throw new NonRetryableError("refused", { output: { code: 42, input: j.input } });
  });
  const runner = connectRunner(registry);
  const stop = new AbortController();
  const done = runner.run({ signal: stop.signal });
  await waitUntil(() => failures.length === 1, 5, "the failure");
  stop.abort();
  await done;
  assert.deepEqual(failures, [
    { errorMessage: "refused", retryable: false, output: { code: 42, input: { n: 1 } } },
  ]);
});

test("a step's legacy fields never show in REST JSON; an older engine's alone still read", async () => {
  const expression = ["$", "{workflow.input}"].join(""); // a Baton expression, not a template
  on(
    ...rpcRoute("GetDefinition", () => ({
      name: "d",
      steps: [
        // today's engine: both, the new field wins
        {
          id: "a",
          input: expression,
          legacyInput: { n: 1 },
          optional: true,
          legacyOptional: true,
        },
        // an older engine: the old fields alone
        {
          id: "b",
          legacyInput: { n: 1 },
          legacyDefinitionVersion: 2,
          legacyPermissive: false,
          steps: [{ id: "c", legacyInput: { n: 2 } }],
        },
      ],
    })),
  );
  const client = connect();
  const def = await client.getDefinition("d");
  assert.equal(JSON.stringify(def).includes("legacy"), false, JSON.stringify(def));
  const [a, b] = def.steps ?? [];
  assert.equal(a?.input, expression);
  assert.equal(a?.optional, true);
  assert.deepEqual(b?.input, { n: 1 });
  assert.equal(b?.definitionVersion, 2);
  assert.equal(b?.permissive, false);
  assert.deepEqual(b?.steps?.[0]?.input, { n: 2 });
  client.close();
});
