import assert from "node:assert/strict";
import { test } from "node:test";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { ApiKeyAuth, AwsSigV4Auth, BatonClient } from "../src/index.js";
import { FakeBaton } from "./fake.js";

const credentials = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  sessionToken: "tok",
};

test("SigV4: execute-api scope, signed host and content-type, session token, a fresh signature per body", async () => {
  const auth = new AwsSigV4Auth({ region: "eu-west-1", credentials });
  const url = new URL("https://abc.execute-api.eu-west-1.amazonaws.com/prod/v1/jobs/poll?x=1");
  const headers = await auth.headers({
    method: "POST",
    url,
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  const authorization = headers.authorization ?? "";
  assert.match(
    authorization,
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/,
  );
  assert.match(headers["x-amz-date"] ?? "", /^\d{8}T\d{6}Z$/);
  assert.equal(headers["x-amz-security-token"], "tok");
  assert.equal(headers.host, undefined, "fetch sets host itself");
  const other = await auth.headers({
    method: "POST",
    url,
    headers: { "content-type": "application/json" },
    body: '{"a":1}',
  });
  assert.notEqual(other.authorization, authorization);
});

test("SigV4: the signature is the AWS SDK signer's for the same request and time", async () => {
  const auth = new AwsSigV4Auth({ region: "us-east-1", credentials });
  const url = new URL("https://api.example.com/prod/v1/instances/a%20b");
  const headers = await auth.headers({ method: "GET", url, headers: {}, body: undefined });
  const date = headers["x-amz-date"] ?? "";
  const when = new Date(
    `${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`,
  );
  const reference = new SignatureV4({
    service: "execute-api",
    region: "us-east-1",
    credentials,
    sha256: Sha256,
  });
  const expected = await reference.sign(
    {
      method: "GET",
      protocol: "https:",
      hostname: "api.example.com",
      path: "/prod/v1/instances/a%20b",
      query: {},
      headers: { host: "api.example.com" },
    },
    { signingDate: when },
  );
  assert.equal(headers.authorization, expected.headers.authorization);
});

test("the client sends x-api-key, or the SigV4 headers, on every request", async () => {
  const fake = await new FakeBaton().start();
  try {
    fake.on("GET /v1/config", () => ({ body: {} }));
    await new BatonClient({ url: fake.url, auth: new ApiKeyAuth("secret") }).config();
    assert.equal(fake.seen[0]?.headers["x-api-key"], "secret");
    await new BatonClient({
      url: fake.url,
      auth: new AwsSigV4Auth({ region: "eu-west-1", credentials }),
    }).config();
    assert.match(
      String(fake.seen[1]?.headers.authorization),
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\//,
    );
    assert.equal(fake.seen[1]?.headers["x-api-key"], undefined);
    assert.equal(String(new ApiKeyAuth("secret")), "ApiKeyAuth(***)");
  } finally {
    await fake.close();
  }
});
