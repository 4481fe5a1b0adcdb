// The REST bodies are the proto3 JSON mapping of engine.proto: a poll answer as the server sends
// it parses into the generated message and back unchanged, and the bodies the SDK builds parse
// strictly (unknown fields refused) into their request messages.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  CompleteBatchRequestSchema,
  CompleteJobRequestSchema,
  FailJobRequestSchema,
  PollJobsRequestSchema,
  PollJobsResponseSchema,
} from "../src/gen/workflow/v1/engine_pb.js";
import { BatonClient } from "../src/index.js";

const strict = { ignoreUnknownFields: false };
/** A JSON document as protobuf-es reads it. */
const j = (value: unknown): JsonValue => value as JsonValue;

test("a poll answer round-trips through PollJobsResponse", () => {
  const answer = {
    jobs: [
      {
        id: "5fa298b7-6973-42df-833d-ca27bc8f67f9",
        instanceId: "b0b778d0-69a2-40a6-bb3a-c2a6b682b31c",
        stepId: "charge",
        stepExecutionId: "0c6f6a43-8d51-4d3e-a7a6-5a3c1f0f7b11",
        jobType: "charge-card",
        attempt: 2,
        retriesRemaining: 1,
        lockExpiresAt: "2026-11-26T05:14:13.714402Z",
        input: {
          orderId: "A-1001",
          amount: 59.9,
          items: [{ sku: "BOOK-42", qty: 2 }],
          gift: false,
          note: null,
        },
      },
      {
        id: "j2",
        jobType: "import-rows",
        attempt: 1,
        lockExpiresAt: "2026-11-26T05:14:43Z",
        inputPayloadPath: "payloads/step-input/abc",
        inputDownloadUrl:
          "http://127.0.0.1:39851/baton-payloads/payloads/step-input/abc?X-Amz-Signature=x",
      },
    ],
  };
  const message = fromJson(PollJobsResponseSchema, j(answer), strict);
  assert.equal(message.jobs[0]?.attempt, 2);
  assert.equal(message.jobs[0]?.lockExpiresAt?.nanos, 714402000);
  assert.equal(message.jobs[1]?.inputPayloadPath, "payloads/step-input/abc");
  assert.deepEqual(toJson(PollJobsResponseSchema, message), answer);
});

test("the completions, failures and polls the SDK sends are valid proto3 JSON", async () => {
  const client = new BatonClient({ url: "http://127.0.0.1:1", apiKey: "k" });
  const done = await client.completion({
    jobId: "j1",
    workerId: "w",
    variables: { receipt: "R-1", n: [1, 2] },
    attempt: 3,
  });
  const single = fromJson(CompleteJobRequestSchema, j(done), strict);
  assert.equal(single.attempt, 3);
  assert.deepEqual(toJson(CompleteJobRequestSchema, single), done);
  const failed = BatonClient.failure({
    jobId: "j2",
    workerId: "w",
    errorMessage: "rate limited",
    nextRetryDelaySeconds: 30,
    attempt: 1,
    output: { code: 42, detail: { retryAfter: 30 } },
  });
  const batch = { results: [done, failed] };
  const parsed = fromJson(CompleteBatchRequestSchema, j(batch), strict);
  assert.equal(parsed.results[1]?.failure?.nextRetryDelaySeconds, 30);
  assert.equal(parsed.results[1]?.failure?.retryable, true);
  assert.deepEqual(parsed.results[1]?.failure?.output, { code: 42, detail: { retryAfter: 30 } });
  assert.deepEqual(toJson(CompleteBatchRequestSchema, parsed), batch);
  const fail = {
    jobId: "j2",
    workerId: "w",
    errorMessage: "x",
    retryable: false,
    attempt: 1,
    output: { code: 42 },
  };
  assert.deepEqual(
    toJson(FailJobRequestSchema, fromJson(FailJobRequestSchema, fail, strict), {
      alwaysEmitImplicit: true,
    }),
    {
      ...fail,
    },
  );
  const poll = { workerId: "w", jobTypes: ["a", "b"], maxJobs: 10, waitSeconds: 10 };
  assert.deepEqual(
    toJson(PollJobsRequestSchema, fromJson(PollJobsRequestSchema, poll, strict)),
    poll,
  );
});
