/**
 * The Connect protocol as the client's wire (`protocol: "connect"` or `BATON_PROTOCOL=connect`):
 * each REST call the client makes goes as the RPC that mirrors it, a binary protobuf POST to
 * `/rpc/workflow.v1.WorkflowEngine/<Method>`, and its answer comes back as the same JSON a REST
 * answer holds. Errors come back as the same problems (the problem travels in the Connect error's
 * details), so the client's errors, retries and the runner behave as over REST.
 *
 * The messages are the generated ones of `src/gen` (the engine's proto): REST JSON → message
 * (`fromJson`) → bytes, and bytes → message → REST JSON (64-bit integers as numbers, as REST
 * gives them).
 */
import {
  type DescField,
  type DescMessage,
  fromBinary,
  fromJson,
  type JsonValue,
  ScalarType,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import { ProblemSchema, WorkflowEngine } from "./gen/workflow/v1/engine_pb.js";

export const SERVICE = "workflow.v1.WorkflowEngine";
export const PROTO = "application/proto";
export const PROTOCOLS = ["rest", "connect"] as const;
export type Protocol = (typeof PROTOCOLS)[number];
export const ENV_PROTOCOL = "BATON_PROTOCOL";

const PARAM = /{(\w+)}/g;

// Each REST operation and its RPC, as the engine's baton.rpc.methods lists them (a unit test
// checks every RPC of the generated service is here): method, path template, RPC, and the field
// holding the whole REST body, if any.
const TWINS: readonly (readonly [string, string, string, string?])[] = [
  ["GET", "/v1/config", "GetConfig"],
  ["POST", "/v1/payloads", "CreatePayload"],
  ["GET", "/v1/openapi.json", "GetOpenApi"],
  ["GET", "/v1/health", "GetHealth"],
  ["DELETE", "/v1/definitions/{name}/versions/{version}", "DeleteDefinition"],
  ["DELETE", "/v1/instances/{id}", "DeleteInstance"],
  ["POST", "/v1/definitions", "RegisterDefinition"],
  ["GET", "/v1/definitions", "ListDefinitions"],
  ["GET", "/v1/definitions/{name}/versions/{version}", "GetDefinition"],
  ["GET", "/v1/definitions/{name}", "GetDefinition"],
  ["GET", "/v1/taskdefs", "ListTaskDefs"],
  ["PUT", "/v1/taskdefs/{name}", "PutTaskDef", "taskDef"],
  ["GET", "/v1/taskdefs/{name}", "GetTaskDef"],
  ["DELETE", "/v1/taskdefs/{name}", "DeleteTaskDef"],
  ["POST", "/v1/instances", "StartInstance"],
  ["POST", "/v1/instances/batch", "StartInstances"],
  ["GET", "/v1/instances", "SearchInstances"],
  ["GET", "/v1/instances/{id}", "GetInstance"],
  ["GET", "/v1/instances/{id}/steps", "ListSteps"],
  ["GET", "/v1/instances/{id}/history", "GetHistory"],
  ["POST", "/v1/instances/{id}/cancel", "CancelInstance"],
  ["POST", "/v1/instances/{id}/user-tasks/{stepId}/complete", "CompleteUserTask"],
  ["POST", "/v1/instances/{id}/signals/{stepId}", "Signal"],
  ["POST", "/v1/instances/{id}/retry", "RetryInstance"],
  ["POST", "/v1/instances/{id}/rerun", "RerunInstance"],
  ["POST", "/v1/instances/{id}/restart", "RestartInstance"],
  ["POST", "/v1/instances/{id}/pause", "PauseInstance"],
  ["POST", "/v1/instances/{id}/resume", "ResumeInstance"],
  ["POST", "/v1/jobs/poll", "PollJobs"],
  ["POST", "/v1/jobs/complete", "CompleteJob"],
  ["POST", "/v1/jobs/complete-batch", "CompleteBatch"],
  ["POST", "/v1/jobs/fail", "FailJob"],
  ["POST", "/v1/jobs/heartbeat", "Heartbeat"],
  ["POST", "/v1/jobs/{id}/claim", "ClaimJob"],
  ["POST", "/v1/workers/stop", "StopWorker"],
  ["POST", "/v1/queues/{name}/push", "Push"],
  ["GET", "/v1/queues/{name}/stats", "Stats"],
  ["GET", "/v1/queues/{name}/peek", "Peek"],
  ["DELETE", "/v1/queues/{name}", "Purge"],
  ["POST", "/v1/queues/{name}/dequeue", "Dequeue"],
  ["POST", "/v1/queues/{name}/tasks/{taskId}/ack", "Ack"],
  ["POST", "/v1/queues/{name}/tasks/{taskId}/nack", "Nack"],
  ["GET", "/v1/queues", "ListQueues"],
  ["GET", "/v1/queues/{name}/tasks", "ListQueueTasks"],
  ["POST", "/v1/queues/{name}/redrive", "Redrive"],
  ["POST", "/v1/schedules", "CreateSchedule"],
  ["GET", "/v1/schedules", "ListSchedules"],
  ["GET", "/v1/schedules/{id}", "GetSchedule"],
  ["PUT", "/v1/schedules/{id}", "ReplaceSchedule"],
  ["DELETE", "/v1/schedules/{id}", "DeleteSchedule"],
  ["POST", "/v1/schedules/{id}/pause", "PauseSchedule"],
  ["POST", "/v1/schedules/{id}/unpause", "UnpauseSchedule"],
  ["POST", "/v1/schedules/{id}/trigger", "TriggerSchedule"],
  ["POST", "/v1/schedules/{id}/backfill", "BackfillSchedule"],
];

/** The RPC names the codec routes (a test compares them with the generated service). */
export const RPC_NAMES: ReadonlySet<string> = new Set(TWINS.map((t) => t[2]));

interface Matcher {
  method: string;
  pattern: RegExp;
  rpc: string;
  bodyField: string | undefined;
}

const MATCHERS: Matcher[] = TWINS.map(([method, template, rpc, bodyField]) => ({
  method,
  pattern: new RegExp(`^${template.replace(PARAM, (_, name: string) => `(?<${name}>[^/]+)`)}$`),
  rpc,
  bodyField,
}));

const METHODS = new Map(Object.values(WorkflowEngine.method).map((m) => [m.name, m] as const));

/** One REST call as its RPC: the URL path, the binary body and the answer's message type. */
export interface RpcRequest {
  rpc: string;
  path: string;
  body: Uint8Array;
  output: DescMessage;
}

/** A REST call with no RPC twin (it cannot go over Connect). */
export class UnknownOperation extends TypeError {
  override name = "UnknownOperation";
}

/** The protocol chosen by an option, else `BATON_PROTOCOL`, else REST. */
export function chooseProtocol(
  option: string | undefined,
  env: Record<string, string | undefined> = process.env,
): Protocol {
  const chosen = option ?? (env[ENV_PROTOCOL] || "rest");
  if (!(PROTOCOLS as readonly string[]).includes(chosen)) {
    const from = option === undefined ? `${ENV_PROTOCOL}=${chosen}` : JSON.stringify(chosen);
    throw new TypeError(`protocol must be one of ${PROTOCOLS.join(", ")}, not ${from}`);
  }
  return chosen as Protocol;
}

/**
 * The Connect request of `method path` with its JSON `body` (already strict JSON, undefined
 * dropped) or its query. Throws a TypeError before anything is sent when the call has no RPC or
 * its body is not the RPC's message.
 */
export function rpcRequest(
  method: string,
  path: string,
  body: JsonValue | undefined,
  query: Record<string, string | number | boolean | undefined> | undefined,
): RpcRequest {
  for (const m of MATCHERS) {
    const match = m.method === method ? m.pattern.exec(path) : null;
    if (!match) continue;
    const fields: Record<string, JsonValue> = {};
    for (const [k, v] of Object.entries(match.groups ?? {})) fields[k] = decodeURIComponent(v);
    if (m.bodyField !== undefined) {
      if (body !== undefined) fields[m.bodyField] = body;
    } else if (body !== null && typeof body === "object" && !Array.isArray(body)) {
      Object.assign(fields, body);
    }
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) fields[k] = v === "true" ? true : v === "false" ? false : v;
    }
    const desc = METHODS.get(m.rpc);
    if (desc === undefined) throw new UnknownOperation(`${m.rpc} is not in the proto's service`);
    let bytes: Uint8Array;
    try {
      bytes = toBinary(desc.input, fromJson(desc.input, fields));
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new TypeError(`${method} ${path} cannot go as ${m.rpc}: ${why}`);
    }
    return { rpc: m.rpc, path: `/rpc/${SERVICE}/${m.rpc}`, body: bytes, output: desc.output };
  }
  throw new UnknownOperation(`${method} ${path} has no RPC twin`);
}

/** The answer's message as the JSON a REST answer holds. */
export function rpcResponse(request: RpcRequest, bytes: Uint8Array): JsonValue {
  return restJson(request.output, fromBinary(request.output, bytes));
}

/**
 * A Connect error body as the REST status and problem it carries: the `workflow.v1.Problem`
 * detail when there is one, else a problem made of the error's code and message.
 */
export function rpcProblem(status: number, body: unknown): { status: number; problem: unknown } {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return { status, problem: body };
  }
  const b = body as { code?: unknown; message?: unknown; details?: unknown };
  for (const detail of Array.isArray(b.details) ? b.details : []) {
    const d = detail as { type?: unknown; value?: unknown } | null;
    if (d?.type === "workflow.v1.Problem" && typeof d.value === "string") {
      try {
        const problem = restJson(
          ProblemSchema,
          fromBinary(ProblemSchema, Buffer.from(d.value, "base64")),
        ) as Record<string, JsonValue>;
        const carried = Number(problem.status);
        return { status: carried > 0 ? carried : status, problem };
      } catch {
        // not a Problem after all: fall back on the code and message
      }
    }
  }
  const code = typeof b.code === "string" && b.code ? b.code : "unknown";
  const title = code.charAt(0).toUpperCase() + code.slice(1).replaceAll("_", " ");
  const detail = typeof b.message === "string" && b.message ? b.message : title;
  return { status, problem: { title, status, detail } };
}

const INT64 = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
  ScalarType.SINT64,
]);

/**
 * REST JSON of a message: proto3 JSON with numbers, booleans and lists given at their defaults
 * (a job with no retries left has `retriesRemaining: 0`), empty texts left out (REST gives an
 * unset text as null or not at all), fields with presence only when set, 64-bit integers as
 * numbers. Well-known types (Struct, Timestamp...) are their proto3 JSON.
 */
function restJson(schema: DescMessage, message: Parameters<typeof toJson>[1]): JsonValue {
  const json = toJson(schema, message, { alwaysEmitImplicit: true });
  return reshape(schema, json);
}

function reshape(schema: DescMessage, json: JsonValue): JsonValue {
  if (schema.typeName.startsWith("google.protobuf.")) return json;
  if (json === null || typeof json !== "object" || Array.isArray(json)) return json;
  for (const field of schema.fields) {
    const value = json[field.jsonName];
    if (value === undefined) continue;
    if (field.fieldKind === "scalar" && value === "") {
      delete json[field.jsonName];
      continue;
    }
    json[field.jsonName] = reshapeField(field, value);
  }
  foldLegacy(schema, json);
  return json;
}

const LEGACY = "legacy_";

/**
 * Keeps each deprecated `legacy_<name>` field out of REST JSON. Such a field holds, under its
 * old number and narrower type, a value whose field `<name>` widened (a step's input, a Struct,
 * became a Value as it may be one `${...}`): the engine sets both, and an engine older than
 * this proto only the old one, whose value then stands for `<name>`.
 */
function foldLegacy(schema: DescMessage, json: { [key: string]: JsonValue }): void {
  for (const [old, next] of legacyPairs(schema)) {
    const value = json[old];
    delete json[old];
    if (value !== undefined && json[next] === undefined) json[next] = value;
  }
}

/** Each message type's legacy fields' JSON names with their fields', found once per type. */
const LEGACY_PAIRS = new WeakMap<DescMessage, Array<[string, string]>>();

function legacyPairs(schema: DescMessage): Array<[string, string]> {
  let pairs = LEGACY_PAIRS.get(schema);
  if (pairs === undefined) {
    pairs = [];
    for (const field of schema.fields) {
      if (!field.name.startsWith(LEGACY) || !field.deprecated) continue;
      const next = schema.fields.find((f) => f.name === field.name.slice(LEGACY.length));
      if (next !== undefined) pairs.push([field.jsonName, next.jsonName]);
    }
    LEGACY_PAIRS.set(schema, pairs);
  }
  return pairs;
}

function reshapeField(field: DescField, value: JsonValue): JsonValue {
  switch (field.fieldKind) {
    case "scalar":
      return INT64.has(field.scalar) ? int64(value) : value;
    case "message":
      return reshape(field.message, value);
    case "list":
      if (!Array.isArray(value)) return value;
      if (field.listKind === "message") return value.map((v) => reshape(field.message, v));
      if (field.listKind === "scalar" && INT64.has(field.scalar)) return value.map(int64);
      return value;
    case "map": {
      if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
      const out: Record<string, JsonValue> = {};
      for (const [k, v] of Object.entries(value)) {
        out[k] =
          field.mapKind === "message"
            ? reshape(field.message, v)
            : field.mapKind === "scalar" && INT64.has(field.scalar)
              ? int64(v)
              : v;
      }
      return out;
    }
    default:
      return value;
  }
}

function int64(value: JsonValue): JsonValue {
  if (typeof value !== "string") return value;
  const n = Number(value);
  return Number.isFinite(n) ? n : value;
}
