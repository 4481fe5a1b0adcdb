// A small in-process fake of Baton's HTTP API for runner and client tests: each route is a
// function of the parsed request; every request is recorded.
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fromBinary, fromJson, type JsonValue, toBinary, toJson } from "@bufbuild/protobuf";
import { ProblemSchema, WorkflowEngine } from "../src/gen/workflow/v1/engine_pb.js";

export interface Seen {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  // biome-ignore lint/suspicious/noExplicitAny: a test double reads whatever JSON came
  body: any;
  raw: string;
  /** The body's bytes (a binary Connect request). */
  bytes: Buffer;
  query: URLSearchParams;
  at: number;
  /** Resolves true if the client hung up before the answer was sent (an aborted request). */
  hungUp: Promise<boolean>;
  /** When the answer was sent (ms), once it was. */
  answeredAt?: number;
}

export interface Reply {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** A binary body (a Connect answer), sent as application/proto instead of `body`. */
  bytes?: Uint8Array;
  /** Hold the answer this many ms (a long-poll). */
  delayMs?: number;
}

export type Route = (req: Seen) => Reply | Promise<Reply>;

export class FakeBaton {
  readonly seen: Seen[] = [];
  readonly routes = new Map<string, Route>();
  #server: Server;
  url = "";

  constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  async start(): Promise<this> {
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    this.#server.close();
  }

  on(route: string, fn: Route): this {
    this.routes.set(route, fn);
    return this;
  }

  calls(path: string): Seen[] {
    return this.seen.filter((s) => s.path === path);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const bytes = Buffer.concat(chunks);
    const raw = bytes.toString("utf8");
    const [path = "/", search = ""] = (req.url ?? "/").split("?");
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const seen: Seen = {
      method: req.method ?? "GET",
      path,
      headers: req.headers,
      body,
      raw,
      bytes,
      query: new URLSearchParams(search),
      at: Date.now(),
      hungUp: new Promise((resolve) => res.once("close", () => resolve(!res.writableFinished))),
    };
    this.seen.push(seen);
    const route = this.routes.get(`${seen.method} ${path}`) ?? this.#prefix(seen.method, path);
    let reply: Reply;
    try {
      reply = route
        ? await route(seen)
        : { status: 404, body: { title: "Not found", status: 404, detail: `no route ${path}` } };
    } catch (error) {
      reply = { status: 500, body: { title: "Route failed", status: 500, detail: String(error) } };
    }
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (res.destroyed) return;
    const status = reply.status ?? 200;
    seen.answeredAt = Date.now();
    if (reply.bytes !== undefined) {
      res.writeHead(status, { "content-type": "application/proto", ...reply.headers });
      res.end(reply.bytes);
      return;
    }
    const type = status >= 400 ? "application/problem+json" : "application/json";
    res.writeHead(status, { "content-type": type, ...reply.headers });
    res.end(reply.body === undefined ? "" : JSON.stringify(reply.body));
  }

  #prefix(method: string, path: string): Route | undefined {
    for (const [key, fn] of this.routes) {
      const [m, p] = key.split(" ");
      if (m === method && p?.endsWith("*") && path.startsWith(p.slice(0, -1))) return fn;
    }
    return undefined;
  }
}

/**
 * Long-polls as Baton holds them: a poll with `waitSeconds` is held until the worker's stop
 * signal arrives, then answered with `atStop()` (the jobs the server had claimed by then), or
 * until its wait ends (answered empty); a poll without one answers at once from `queue`. With
 * `ignoreStop` a held poll is never answered (a server that does not end its wait on the
 * signal), until the client hangs up.
 */
export function holdLongPolls(
  fake: FakeBaton,
  options: {
    queue?: Record<string, unknown>[];
    atStop?: () => Record<string, unknown>[];
    ignoreStop?: boolean;
  } = {},
): void {
  const held = new Set<(jobs: Record<string, unknown>[]) => void>();
  fake.on("POST /v1/jobs/poll", async (req) => {
    const wait = Number(req.body.waitSeconds ?? 0);
    if (wait <= 0) return { body: { jobs: (options.queue ?? []).splice(0, req.body.maxJobs) } };
    const jobs = await new Promise<Record<string, unknown>[]>((resolve) => {
      const timer = options.ignoreStop ? undefined : setTimeout(() => answer([]), wait * 1000);
      const answer = (found: Record<string, unknown>[]) => {
        clearTimeout(timer);
        held.delete(answer);
        resolve(found);
      };
      if (!options.ignoreStop) held.add(answer);
      void req.hungUp.then(() => answer([]));
    });
    return { body: { jobs } };
  });
  fake.on("POST /v1/workers/stop", (req) => {
    for (const answer of [...held]) answer(options.atStop?.() ?? []);
    return { body: { workerId: req.body.workerId } };
  });
}

/** Resolves once `check()` is true; rejects after `seconds`. */
export async function waitUntil(
  check: () => boolean,
  seconds = 5,
  what = "condition",
): Promise<void> {
  const until = Date.now() + seconds * 1000;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function job(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id,
    instanceId: `i-${id}`,
    stepId: "s",
    stepExecutionId: `se-${id}`,
    jobType: "t",
    attempt: 1,
    retriesRemaining: 2,
    lockExpiresAt: new Date(Date.now() + 30_000).toISOString(),
    input: { n: 1 },
    ...extra,
  };
}

/** A batch route answering APPLIED for every item. */
export function applyAll(req: Seen): Reply {
  const results = (req.body.results as { jobId: string; failure?: unknown }[]).map((r) => ({
    jobId: r.jobId,
    outcome: "APPLIED",
    status: r.failure ? "RETRY_SCHEDULED" : "COMPLETED",
  }));
  return { body: { results } };
}

/**
 * A route answering the Connect RPC `rpc` (binary): `fn` gets the request message as proto3 JSON
 * and returns the response message as JSON, or `{ status, problem }` for a Connect error whose
 * detail carries that problem (as Baton sends it).
 */
export function rpcRoute(
  rpc: keyof typeof WorkflowEngine.method | string,
  fn: (message: JsonValue, req: Seen) => unknown,
): [string, Route] {
  const method = Object.values(WorkflowEngine.method).find((m) => m.name === rpc);
  if (method === undefined) throw new Error(`no RPC ${rpc}`);
  return [
    `POST /rpc/workflow.v1.WorkflowEngine/${rpc}`,
    (req) => {
      const message = toJson(method.input, fromBinary(method.input, req.bytes));
      const answer = fn(message, req);
      if (
        answer !== null &&
        typeof answer === "object" &&
        "problem" in answer &&
        "code" in answer
      ) {
        const { status, code, problem, headers } = answer as {
          status: number;
          code: string;
          problem: JsonValue;
          headers?: Record<string, string>;
        };
        const value = Buffer.from(
          toBinary(ProblemSchema, fromJson(ProblemSchema, problem)),
        ).toString("base64");
        return {
          status,
          headers: { "content-type": "application/json", ...headers },
          body: {
            code,
            message: String((problem as { detail?: string }).detail ?? code),
            details: [{ type: "workflow.v1.Problem", value, debug: problem }],
          },
        };
      }
      return { bytes: toBinary(method.output, fromJson(method.output, answer as JsonValue)) };
    },
  ];
}
