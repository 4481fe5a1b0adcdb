/**
 * The HTTP side of `BatonClient`: credentials (an API key found as the Python SDK finds it, or
 * any `Auth`), strict-JSON bodies, problem+json errors, retries and payload offload, over
 * `node:http` keep-alive agents (or any `fetch`).
 *
 * A failed request is retried only when repeating it cannot do harm: no connection at all, a
 * 429 or a 503 for every request; another 5xx, a reset or a timeout after sending only for
 * idempotent ones. A 4xx is never retried.
 */
import { ApiKeyAuth, type Auth } from "./auth.js";
import { Backoff, NO_RETRY, type RetryPolicy, retryAllows, retryPolicy, sleep } from "./backoff.js";
import {
  chooseProtocol,
  PROTO,
  type Protocol,
  type RpcRequest,
  rpcProblem,
  rpcRequest,
  rpcResponse,
} from "./connect.js";
import { type ApiKeyFound, DEFAULT_URL, ENV_URL, findApiKey, localApiKeyPath } from "./env.js";
import { BatonApiError, problemError, TransportError } from "./errors.js";
import type { PayloadUploadJson, ServerConfigJson } from "./gen/workflow/v1/engine_pb.js";
import { fromFetch, type HttpAnswer, type HttpSend, nodeHttp } from "./http.js";
import { strictJson } from "./json.js";
import { type Logger, silentLogger } from "./log.js";
import { VERSION } from "./version.js";

export type JsonObject = { [key: string]: JsonValue };
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** The default retry policy of the client: 4 attempts, 0.1 s doubling up to 5 s. */
export const DEFAULT_RETRY: RetryPolicy = retryPolicy();

export interface ClientOptions {
  /** The API's base URL (default: `BATON_URL`, else `http://127.0.0.1:8080`). */
  url?: string;
  /** Sent as `x-api-key` (default: `BATON_API_KEY`, else a local `baton dev`'s key file). */
  apiKey?: string;
  /** Other credentials (e.g. {@link AwsSigV4Auth}); not together with `apiKey`. */
  auth?: Auth;
  /** Seconds before a request is given up (default 30; a long-poll adds its wait). */
  timeoutSeconds?: number;
  /** Retries of transient failures (default {@link DEFAULT_RETRY}; `null`: never). */
  retry?: RetryPolicy | null;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  logger?: Logger;
  /**
   * A `fetch`-compatible function to send requests with (default: `node:http` over a keep-alive
   * agent, which costs less CPU per request than the global fetch).
   */
  fetch?: typeof fetch;
  /**
   * The wire (default: `BATON_PROTOCOL`, else `"rest"`): `"rest"` (JSON), or `"connect"`: every
   * call goes as the RPC that mirrors it, binary protobuf over the Connect protocol
   * (`POST /rpc/workflow.v1.WorkflowEngine/<Method>`), with the same answers, errors and retries.
   */
  protocol?: Protocol;
}

/** Per-call options: `retry` overrides the client's policy (`null`: one attempt). */
export interface CallOptions {
  retry?: RetryPolicy | null;
  signal?: AbortSignal;
  timeoutSeconds?: number;
}

interface RequestOptions extends CallOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  idempotent?: boolean;
}

// Bodies up to this size are always sent inline, so small requests never cost a GET /v1/config.
export const OFFLOAD_FLOOR = 64 * 1024;
const PAYLOAD_RETRY = retryPolicy({ initialInterval: 0.2, maximumInterval: 2, maximumAttempts: 4 });
const NEVER = 2 ** 62;

/** The HTTP side of {@link BatonClient}: credentials, retries, errors, payloads. */
export class ClientCore {
  readonly url: string;
  readonly retry: RetryPolicy;
  readonly timeoutSeconds: number;
  readonly auth: Auth | undefined;
  /** Where the credentials came from, or why there are none (named on 401/403). */
  readonly credentialSource: string;
  /** The wire: `rest` or `connect`. */
  readonly protocol: Protocol;
  readonly #headers: Record<string, string>;
  readonly #http: HttpSend;
  readonly #log: Logger;
  #config: Promise<ServerConfigJson | undefined> | undefined;

  constructor(options: ClientOptions = {}) {
    if (options.apiKey && options.auth) throw new TypeError("give apiKey or auth, not both");
    this.url = (options.url || process.env[ENV_URL] || DEFAULT_URL).replace(/\/+$/, "");
    try {
      new URL(this.url);
    } catch {
      throw new TypeError(`not a URL: ${JSON.stringify(this.url)}`);
    }
    let auth = options.auth;
    let source: string;
    if (auth === undefined) {
      const found: ApiKeyFound | undefined = findApiKey(this.url, options.apiKey);
      auth = found && new ApiKeyAuth(found.key, found.source);
      source = found
        ? `the API key came from ${found.source}`
        : `no API key was found: pass apiKey, set BATON_API_KEY, or for a local baton dev ` +
          `keep its key in ${localApiKeyPath()}`;
    } else {
      source = auth.source ? `the credentials came from ${auth.source}` : "custom credentials";
    }
    this.protocol = chooseProtocol(options.protocol);
    this.auth = auth;
    this.credentialSource = source;
    this.retry = options.retry === null ? NO_RETRY : (options.retry ?? DEFAULT_RETRY);
    this.timeoutSeconds = options.timeoutSeconds ?? 30;
    this.#headers = { "user-agent": `baton-worker-typescript/${VERSION}`, ...options.headers };
    this.#http = options.fetch ? fromFetch(options.fetch) : nodeHttp();
    this.#log = options.logger ?? silentLogger;
  }

  toString(): string {
    return `BatonClient(${this.url})`;
  }

  /** Close idle connections; the client still works afterwards (it opens new ones). */
  close(): void {
    this.#http.close?.();
  }

  // --- external payloads ---------------------------------------------------------------------

  /** `GET /v1/config` (the payload limits), fetched once per client. */
  config(): Promise<ServerConfigJson | undefined> {
    if (this.#config === undefined) {
      this.#config = this.request<ServerConfigJson>("GET", "/v1/config").catch((error: unknown) => {
        if (error instanceof BatonApiError && !error.transient) return undefined; // older server
        this.#config = undefined; // no answer: ask again next time
        throw error;
      });
    }
    return this.#config;
  }

  /** The soft limit of `workflowInput`, `stepInput` or `stepOutput` (a server without one: never). */
  async softLimit(kind: "workflowInput" | "stepInput" | "stepOutput"): Promise<number> {
    let config: ServerConfigJson | undefined;
    try {
      config = await this.config();
    } catch {
      return NEVER;
    }
    const limit = config?.payloadLimits?.[kind]?.softLimitBytes;
    return limit === undefined ? NEVER : Number(limit);
  }

  protected async above(encoded: string, kind: "workflowInput" | "stepOutput"): Promise<boolean> {
    if (encoded.length <= OFFLOAD_FLOOR) return false; // UTF-16 units <= bytes
    return Buffer.byteLength(encoded, "utf8") > (await this.softLimit(kind));
  }

  /**
   * Upload `data` through a presigned PUT (`POST /v1/payloads`); resolves to its path. Transient
   * S3 failures are retried with a fresh grant each time.
   */
  async uploadPayload(
    kind: "WORKFLOW_INPUT" | "STEP_INPUT" | "STEP_OUTPUT",
    data: string,
  ): Promise<string> {
    const bytes = Buffer.from(data, "utf8");
    let path = "";
    await this.#presigned("upload", "PUT", async () => {
      const grant = await this.request<PayloadUploadJson>("POST", "/v1/payloads", {
        body: { kind, sizeBytes: bytes.length },
      });
      path = grant.path ?? "";
      return this.#http(new URL(grant.uploadUrl ?? ""), {
        method: "PUT",
        body: bytes,
        headers: grant.uploadHeaders ?? {},
        signal: AbortSignal.timeout(60_000),
      });
    });
    return path;
  }

  /** The JSON at a presigned GET URL (an offloaded input), retrying transient S3 failures. */
  async downloadPayload(url: string): Promise<JsonValue> {
    const response = await this.#presigned("download", "GET", () =>
      this.#http(new URL(url), { method: "GET", headers: {}, signal: AbortSignal.timeout(60_000) }),
    );
    return JSON.parse(await response.text()) as JsonValue;
  }

  async #presigned(
    what: string,
    method: string,
    send: () => Promise<HttpAnswer>,
  ): Promise<HttpAnswer> {
    const backoff = new Backoff(PAYLOAD_RETRY);
    for (let attempts = 1; ; attempts++) {
      let failure: string;
      try {
        const response = await send();
        if (response.status >= 200 && response.status < 300) return response;
        const text = (await response.text()).slice(0, 300);
        if (response.status < 500) {
          throw new TransportError(`payload ${what} refused: ${response.status} ${text}`, {
            sent: true,
            method,
            url: "(presigned)",
          });
        }
        failure = String(response.status);
      } catch (error) {
        if (error instanceof TransportError || error instanceof BatonApiError) {
          if (!(error instanceof BatonApiError && error.transient)) throw error;
        }
        failure = describeFetchError(error);
      }
      const delay = backoff.nextDelay();
      if (!retryAllows(PAYLOAD_RETRY, attempts, 0, delay)) {
        throw new TransportError(`payload ${what} failed: ${failure}`, {
          sent: true,
          method,
          url: "(presigned)",
        });
      }
      await sleep(delay);
    }
  }

  // --- the core ------------------------------------------------------------------------------

  /**
   * Send a request, retrying per policy; resolves to the decoded JSON of a 2xx answer. The body
   * is encoded once, as strict JSON: NaN, Infinity or a value that is not JSON throws a
   * TypeError before anything is sent.
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    let body: string | undefined =
      options.body === undefined ? undefined : strictJson(dropUndefined(options.body));
    let rpc: RpcRequest | undefined;
    let url: URL;
    if (this.protocol === "connect") {
      rpc = rpcRequest(
        method,
        path,
        body === undefined ? undefined : JSON.parse(body),
        options.query,
      );
      body = undefined;
      url = new URL(this.url + rpc.path);
    } else {
      url = new URL(this.url + path);
      for (const [k, v] of Object.entries(options.query ?? {})) {
        if (v !== undefined) url.searchParams.set(k, String(v));
      }
    }
    const idempotent = options.idempotent ?? ["GET", "PUT", "DELETE", "HEAD"].includes(method);
    const policy =
      options.retry === undefined ? this.retry : options.retry === null ? NO_RETRY : options.retry;
    const backoff = new Backoff(policy);
    const started = performance.now();
    for (let attempts = 1; ; attempts++) {
      try {
        return (
          rpc === undefined
            ? await this.#exchange(method, url, body, options)
            : await this.#exchange("POST", url, rpc.body, options, rpc)
        ) as T;
      } catch (error) {
        if (!(error instanceof TransportError || error instanceof BatonApiError)) throw error;
        if (options.signal?.aborted || !mayRetry(error, idempotent)) throw error;
        let delay = backoff.nextDelay();
        if (error instanceof BatonApiError && error.retryAfter) {
          delay = Math.max(delay, Math.min(error.retryAfter, policy.maximumInterval));
        }
        const elapsed = (performance.now() - started) / 1000;
        if (!retryAllows(policy, attempts, elapsed, delay)) throw error;
        this.#log.info("retrying after a transient failure", {
          method,
          path,
          attempt: attempts,
          delay_s: Math.round(delay * 1000) / 1000,
          error: error.message,
        });
        if (!(await sleep(delay, options.signal))) throw error;
      }
    }
  }

  async #exchange(
    method: string,
    url: URL,
    body: string | Uint8Array | undefined,
    options: CallOptions,
    rpc?: RpcRequest,
  ): Promise<unknown> {
    const headers: Record<string, string> = { ...this.#headers };
    if (rpc !== undefined) {
      // Accept names the binary type: API Gateway returns binary only when it does.
      headers.accept = PROTO;
      headers["content-type"] = PROTO;
      headers["connect-protocol-version"] = "1";
    } else {
      headers.accept = "application/json";
      if (body !== undefined) headers["content-type"] = "application/json";
    }
    if (this.auth) {
      Object.assign(
        headers,
        await this.auth.headers({ method, url, headers: { ...headers }, body }),
      );
    }
    // One controller per request, its timer cleared with the answer: AbortSignal.timeout would
    // leave a timer pending for the whole timeout after every request (and AbortSignal.any keeps
    // its signals alive), which cost the runner's drain CPU in timers and garbage collection.
    const seconds = options.timeoutSeconds ?? this.timeoutSeconds;
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new DOMException(`no answer within ${seconds} s`, "TimeoutError")),
      seconds * 1000,
    );
    const outer = options.signal;
    const relay = () => abort.abort(outer?.reason);
    if (outer?.aborted) relay();
    else outer?.addEventListener("abort", relay, { once: true });
    let response: HttpAnswer;
    let text = "";
    let bytes: Uint8Array | undefined;
    try {
      response = await this.#http(url, { method, headers, body, signal: abort.signal });
      if (rpc !== undefined && response.status === 200) bytes = await response.bytes();
      else text = await response.text();
    } catch (error) {
      const sent = !notConnected(error);
      const call = rpc === undefined ? `${method} ${url.pathname}` : rpc.rpc;
      const what = sent ? `${call} failed` : `cannot reach ${this.url}`;
      throw new TransportError(`${what}: ${describeFetchError(error)}`, {
        sent,
        method,
        url: url.href,
        cause: error,
      });
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", relay);
    }
    if (rpc !== undefined) return this.#rpcAnswer(rpc, response, bytes, text, url);
    if (response.status >= 200 && response.status < 300) {
      if (!text) return undefined;
      try {
        return JSON.parse(text);
      } catch {
        throw new BatonApiError({
          status: response.status,
          title: "Unexpected response",
          detail: `the body of ${method} ${url.pathname} is not JSON`,
          method,
          url: url.href,
        });
      }
    }
    let decoded: unknown = text;
    try {
      decoded = JSON.parse(text);
    } catch {
      // not JSON: the text says what it says
    }
    const hint =
      response.status === 401 || response.status === 403 ? this.credentialSource : undefined;
    throw problemError(response.status, decoded, {
      retryAfter: response.header("retry-after"),
      reason: response.statusText,
      method,
      url: url.href,
      hint,
    });
  }

  /** A Connect answer as REST's: the message as REST JSON, an error as the problem it carries. */
  #rpcAnswer(
    rpc: RpcRequest,
    response: HttpAnswer,
    bytes: Uint8Array | undefined,
    text: string,
    url: URL,
  ): unknown {
    if (bytes !== undefined) {
      try {
        return rpcResponse(rpc, bytes);
      } catch (error) {
        throw new BatonApiError({
          status: response.status,
          title: "Unexpected response",
          detail: `the answer of ${rpc.rpc} is not its message: ${String(error)}`,
          method: "POST",
          url: url.href,
        });
      }
    }
    let decoded: unknown = text;
    try {
      decoded = JSON.parse(text);
    } catch {
      // not JSON (a proxy's page): the text says what it says
    }
    const { status, problem } = rpcProblem(response.status, decoded);
    const hint = status === 401 || status === 403 ? this.credentialSource : undefined;
    throw problemError(status, problem, {
      retryAfter: response.header("retry-after"),
      reason: response.statusText,
      method: "POST",
      url: url.href,
      hint,
    });
  }
}

/** Whether `error` may be retried: no connection, 429 and 503 always; else only idempotent. */
export function mayRetry(error: TransportError | BatonApiError, idempotent: boolean): boolean {
  if (error instanceof TransportError) return !error.sent || idempotent;
  if (error.status === 429 || error.status === 503) return true;
  return error.status >= 500 && idempotent;
}

const NOT_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function notConnected(error: unknown): boolean {
  const code = (error as { code?: string })?.code;
  if (code && NOT_CONNECTED.has(code)) return true;
  const cause = (error as { cause?: { code?: string; errors?: { code?: string }[] } })?.cause;
  if (cause?.code && NOT_CONNECTED.has(cause.code)) return true;
  return cause?.errors?.some((e) => e.code !== undefined && NOT_CONNECTED.has(e.code)) ?? false;
}

function describeFetchError(error: unknown): string {
  if (error instanceof Error) {
    const reason = (error as { cause?: { name?: string } }).cause;
    if (error.name === "TimeoutError" || reason?.name === "TimeoutError") return "timed out";
    if (error.name === "AbortError") return "aborted";
    const code = (error as { code?: string }).code;
    if (code && code !== "ERR_INVALID_ARG_TYPE")
      return `${code}${error.message.includes(code) ? "" : `: ${error.message}`}`;
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const text = cause?.code ?? cause?.message ?? error.message;
    return text.length < 300 ? text : `${text.slice(0, 300)}...`;
  }
  return String(error);
}

/** A copy of a body without top-level undefined fields (the API's defaults apply). */
function dropUndefined(body: unknown): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return body;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (v !== undefined) out[k] = v;
  return out;
}
