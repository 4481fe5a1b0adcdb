import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  AuthenticationError,
  BatonClient,
  findApiKey,
  NotFoundError,
  PermissionDeniedError,
  retryPolicy,
  TransportError,
  ValidationError,
} from "../src/index.js";
import { FakeBaton } from "./fake.js";

const fast = retryPolicy({ initialInterval: 0.001, maximumInterval: 0.005, maximumAttempts: 4 });
let fake: FakeBaton;
before(async () => {
  fake = await new FakeBaton().start();
});
after(() => fake.close());

test("a problem+json answer becomes the error of its status, with every field", async () => {
  fake.on("GET /v1/instances/nope", () => ({
    status: 404,
    body: {
      type: "about:blank",
      title: "Not found",
      status: 404,
      detail: "instance 'nope' not found",
    },
  }));
  fake.on("POST /v1/definitions", () => ({
    status: 422,
    body: {
      title: "Invalid definition",
      status: 422,
      detail: "2 problems",
      errors: [
        { path: "steps[0].id", message: "required" },
        { path: "name", message: "too long" },
      ],
    },
  }));
  const client = new BatonClient({ url: fake.url, apiKey: "k", retry: fast });
  await assert.rejects(client.getInstance("nope"), (e: unknown) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.title, "Not found");
    assert.equal(e.detail, "instance 'nope' not found");
    return true;
  });
  const before = fake.calls("/v1/definitions").length;
  await assert.rejects(client.registerDefinition({ name: "x" }), (e: unknown) => {
    assert.ok(e instanceof ValidationError);
    assert.deepEqual(e.errors, [
      { path: "steps[0].id", message: "required" },
      { path: "name", message: "too long" },
    ]);
    assert.match(e.message, /steps\[0\]\.id: required; name: too long/);
    return true;
  });
  assert.equal(fake.calls("/v1/definitions").length - before, 1, "a 4xx is never retried");
});

test("503 and 429 are retried, honouring Retry-After, then the answer comes", async () => {
  let n = 0;
  fake.on("GET /v1/instances/flaky", () => {
    n += 1;
    if (n === 1) return { status: 503, body: { title: "Unavailable", status: 503 } };
    if (n === 2)
      return {
        status: 429,
        body: { title: "Too many", status: 429 },
        headers: { "retry-after": "0" },
      };
    return { body: { id: "flaky", status: "RUNNING" } };
  });
  const client = new BatonClient({ url: fake.url, apiKey: "k", retry: fast });
  const instance = await client.getInstance("flaky");
  assert.equal(instance.status, "RUNNING");
  assert.equal(n, 3);
});

test("a poll (not idempotent) is not repeated after a 500, but is after a 503", async () => {
  let n = 0;
  fake.on("POST /v1/jobs/poll", () => {
    n += 1;
    return { status: n === 1 ? 500 : 503, body: { title: "x", status: n === 1 ? 500 : 503 } };
  });
  const client = new BatonClient({ url: fake.url, apiKey: "k", retry: fast });
  await assert.rejects(client.pollJobs({ workerId: "w", jobTypes: ["t"], maxJobs: 1 }));
  assert.equal(n, 1);
  await assert.rejects(client.pollJobs({ workerId: "w", jobTypes: ["t"], maxJobs: 1 }));
  assert.equal(n, 5, "503 retried up to maximumAttempts (4)");
});

test("no server at all: a TransportError saying it was never sent", async () => {
  const closed = await new FakeBaton().start();
  await closed.close();
  const client = new BatonClient({ url: closed.url, apiKey: "k", retry: fast });
  await assert.rejects(client.getInstance("x"), (e: unknown) => {
    assert.ok(e instanceof TransportError);
    assert.equal(e.sent, false);
    assert.ok(e.message.startsWith(`cannot reach ${closed.url}: ECONNREFUSED`), e.message);
    return true;
  });
});

test("a body that is not strict JSON is refused before anything is sent", async () => {
  const client = new BatonClient({ url: fake.url, apiKey: "k" });
  const before = fake.seen.length;
  await assert.rejects(
    client.startInstance({ definitionName: "d", input: { x: Number.NaN } }),
    /\$\.input\.x is NaN|\$\.x is NaN/,
  );
  assert.equal(fake.seen.length, before);
});

test("401 and 403 name where the key came from", async () => {
  fake.on("GET /v1/instances/secret", (req) => ({
    status: req.headers["x-api-key"] ? 403 : 401,
    body: { title: req.headers["x-api-key"] ? "Forbidden" : "Unauthorized", status: 0 },
  }));
  const dir = mkdtempSync(join(tmpdir(), "baton-key-"));
  writeFileSync(join(dir, "api-key"), "from-file\n");
  const saved = { ...process.env };
  try {
    process.env.BATON_API_KEY = "from-env";
    await assert.rejects(new BatonClient({ url: fake.url }).getInstance("secret"), (e: unknown) => {
      assert.ok(e instanceof PermissionDeniedError);
      assert.match(e.message, /^403 Forbidden \(the API key came from \$BATON_API_KEY\)$/);
      return true;
    });
    delete process.env.BATON_API_KEY;
    process.env.BATON_DATA_DIR = dir;
    const fromFile = new BatonClient({ url: fake.url });
    await assert.rejects(fromFile.getInstance("secret"), (e: unknown) => {
      assert.ok(e instanceof PermissionDeniedError);
      assert.ok(e.message.includes(`the key file ${join(dir, "api-key")}`), e.message);
      return true;
    });
    process.env.BATON_DATA_DIR = join(dir, "none");
    await assert.rejects(new BatonClient({ url: fake.url }).getInstance("secret"), (e: unknown) => {
      assert.ok(e instanceof AuthenticationError);
      assert.match(e.message, /no API key was found: pass apiKey, set BATON_API_KEY/);
      return true;
    });
  } finally {
    process.env = saved;
  }
});

test("key discovery: option, then BATON_API_KEY, then the local key file (loopback only)", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-key-"));
  writeFileSync(join(dir, "api-key"), " k-file \n");
  const env = { BATON_DATA_DIR: dir };
  assert.equal(
    findApiKey("http://127.0.0.1:8080", "k-opt", { ...env, BATON_API_KEY: "k-env" })?.key,
    "k-opt",
  );
  assert.equal(
    findApiKey("http://127.0.0.1:8080", undefined, { ...env, BATON_API_KEY: "k-env" })?.key,
    "k-env",
  );
  assert.equal(findApiKey("http://localhost:8080", undefined, env)?.key, "k-file");
  assert.equal(findApiKey("https://api.example.com", undefined, env), undefined);
});
