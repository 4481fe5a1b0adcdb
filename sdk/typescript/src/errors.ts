/**
 * The SDK's one error family. `BatonError` is the root, with two branches:
 *
 * - {@link JobError} is what a handler throws to fail its job on purpose: `nonRetryable` skips
 *   the step's remaining retries, `nextRetryDelaySeconds` replaces the step's delay for the one
 *   retry it schedules, `output` goes with the failure (the step keeps it when the failure ends
 *   it). {@link NonRetryableError} is the short spelling of a non-retryable one. Anything else a
 *   handler throws fails the job as retryable.
 * - {@link BatonApiError} is what the client throws when the API answers with an error (an RFC
 *   9457 problem: `status`, `title`, `detail`, `errors[]`), with one subclass per status family.
 *   {@link TransportError} covers requests that got no answer at all.
 */

/** The API's limit on `nextRetryDelaySeconds`: 365 days. */
export const MAX_RETRY_DELAY_SECONDS = 365 * 24 * 3600;

/** Root of every error the SDK throws on purpose. */
export class BatonError extends Error {
  override name = "BatonError";
}

export interface JobErrorOptions {
  /** Fail the job at once: the engine skips the step's remaining retries. */
  nonRetryable?: boolean;
  /** Seconds (0 to 365 days) before the retry this failure schedules, instead of the step's. */
  nextRetryDelaySeconds?: number;
  /**
   * What goes with the failure, a JSON object: the step keeps it as its output when this failure
   * ends the step (no retry follows), as Conductor keeps a failed task's `outputData`, so that an
   * `optional` step's successors can read it. The runner leaves out (with a warning naming why,
   * and still sends the failure) an output that is not strict JSON (NaN, Infinity, a BigInt, a
   * cycle, a function, a class instance...) or whose JSON is above the step output's soft limit
   * (`GET /v1/config`), and never more than {@link MAX_FAILURE_OUTPUT_BYTES}.
   */
  output?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * The largest failure output the runner sends (bytes of its JSON), or the server's soft limit for
 * step outputs when that is lower: a failure's output goes inline, it is never uploaded.
 */
export const MAX_FAILURE_OUTPUT_BYTES = 256 * 1024;

/**
 * Fail the current job with `message`; retried by the engine unless `nonRetryable`.
 *
 * ```ts
 * throw new JobError("gateway busy", { nextRetryDelaySeconds: 30 });
 * throw new JobError("card declined", { nonRetryable: true, output: { code: "declined" } });
 * ```
 */
export class JobError extends BatonError {
  override name = "JobError";
  readonly nonRetryable: boolean;
  readonly nextRetryDelaySeconds: number | undefined;
  /** What goes with the failure (see {@link JobErrorOptions.output}), or undefined. */
  readonly output: Record<string, unknown> | undefined;

  constructor(message: string, options: JobErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.nonRetryable = options.nonRetryable ?? false;
    const output = options.output;
    if (output !== undefined && output !== null) {
      if (typeof output !== "object" || Array.isArray(output)) {
        const kind = Array.isArray(output) ? "an array" : `a ${typeof output}`;
        throw new TypeError(`output must be an object (a Record<string, unknown>), not ${kind}`);
      }
    }
    this.output = output ?? undefined; // null (from JavaScript): none
    const delay = options.nextRetryDelaySeconds;
    if (delay !== undefined) {
      if (typeof delay !== "number" || !Number.isFinite(delay)) {
        throw new TypeError(`nextRetryDelaySeconds must be a finite number, not ${String(delay)}`);
      }
      if (delay < 0 || delay > MAX_RETRY_DELAY_SECONDS) {
        throw new RangeError(`nextRetryDelaySeconds must be between 0 and 365 days, not ${delay}`);
      }
    }
    this.nextRetryDelaySeconds = delay;
  }
}

/**
 * Fail the current job at once: the engine ignores the step's remaining retries. `output` goes
 * with the failure and is kept as the step's output (see {@link JobErrorOptions.output}).
 *
 * ```ts
 * throw new NonRetryableError("card declined", { output: { code: "declined", amount } });
 * ```
 */
export class NonRetryableError extends JobError {
  override name = "NonRetryableError";

  constructor(message: string, options: Pick<JobErrorOptions, "output" | "cause"> = {}) {
    super(message, { ...options, nonRetryable: true });
  }
}

/** One entry of a problem's `errors` list: where (a JSON path) and what. */
export interface ProblemItem {
  path: string;
  message: string;
}

export interface ApiErrorInit {
  status: number;
  title: string;
  detail?: string;
  errors?: ProblemItem[];
  type?: string | undefined;
  instance?: string | undefined;
  /** Seconds, from the Retry-After header. */
  retryAfter?: number | undefined;
  method?: string;
  url?: string;
  /** Appended to the message (e.g. where the API key came from, on 401/403). */
  hint?: string | undefined;
}

/** The API answered with an error status; carries the RFC 9457 problem's fields. */
export class BatonApiError extends BatonError {
  override name = "BatonApiError";
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly errors: readonly ProblemItem[];
  readonly type: string | undefined;
  readonly instance: string | undefined;
  readonly retryAfter: number | undefined;
  readonly method: string | undefined;
  readonly url: string | undefined;

  constructor(init: ApiErrorInit) {
    super(summarize(init) + (init.hint ? ` (${init.hint})` : ""));
    this.status = init.status;
    this.title = init.title;
    this.detail = init.detail ?? "";
    this.errors = init.errors ?? [];
    this.type = init.type;
    this.instance = init.instance;
    this.retryAfter = init.retryAfter;
    this.method = init.method;
    this.url = init.url;
  }

  /** One line: `404 Not found: definition 'x' not found` (plus listed problems). */
  summary(): string {
    return summarize(this);
  }

  /** True when the same request may succeed later (429 and 5xx). */
  get transient(): boolean {
    return this.status === 429 || this.status >= 500;
  }
}

function summarize(p: {
  status: number;
  title: string;
  detail?: string;
  errors?: readonly ProblemItem[];
}): string {
  let text = `${p.status} ${p.title}`;
  const detail = p.detail ?? "";
  if (detail && detail !== p.title) text += `: ${detail}`;
  const listed = (p.errors ?? []).filter((e) => !detail.includes(e.message));
  if (listed.length > 0) text += ` (${listed.map((e) => `${e.path}: ${e.message}`).join("; ")})`;
  return text;
}

/** 400: the request could not be parsed. */
export class BadRequestError extends BatonApiError {
  override name = "BadRequestError";
}
/** 401: no credentials, or credentials the API does not recognise. */
export class AuthenticationError extends BatonApiError {
  override name = "AuthenticationError";
}
/** 403: the credentials are not allowed to do this (or the API key is wrong). */
export class PermissionDeniedError extends BatonApiError {
  override name = "PermissionDeniedError";
}
/** 404: an unknown id, name or route. */
export class NotFoundError extends BatonApiError {
  override name = "NotFoundError";
}
/** 409: conflicts with the current state (e.g. another worker holds the job). */
export class ConflictError extends BatonApiError {
  override name = "ConflictError";
}
/** 413: the body or a payload is over the limit. */
export class PayloadTooLargeError extends BatonApiError {
  override name = "PayloadTooLargeError";
}
/** 422: schema or rule violations; `errors` lists every one. */
export class ValidationError extends BatonApiError {
  override name = "ValidationError";
}
/** 429: throttled; retry after `retryAfter` seconds. */
export class RateLimitedError extends BatonApiError {
  override name = "RateLimitedError";
}
/** 5xx: the server failed; the request may or may not have taken effect. */
export class ServerError extends BatonApiError {
  override name = "ServerError";
}
/** 503: a dependency is unavailable; retry after `retryAfter` seconds. */
export class UnavailableError extends ServerError {
  override name = "UnavailableError";
}

const BY_STATUS: Record<number, new (init: ApiErrorInit) => BatonApiError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
  429: RateLimitedError,
  503: UnavailableError,
};

/** No HTTP answer: the connection was refused, reset, or timed out. */
export class TransportError extends BatonError {
  override name = "TransportError";
  /** False when the request certainly never reached the server (safe to repeat). */
  readonly sent: boolean;
  readonly method: string;
  readonly url: string;

  constructor(
    message: string,
    init: { sent: boolean; method: string; url: string; cause?: unknown },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.sent = init.sent;
    this.method = init.method;
    this.url = init.url;
  }

  get transient(): boolean {
    return true;
  }
}

/** The right {@link BatonApiError} subclass for a status and a decoded body. */
export function problemError(
  status: number,
  body: unknown,
  extra: {
    retryAfter?: string | null;
    reason?: string;
    method?: string;
    url?: string;
    hint?: string | undefined;
  } = {},
): BatonApiError {
  const Cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : BatonApiError);
  let title = extra.reason || "HTTP error";
  let detail = "";
  const errors: ProblemItem[] = [];
  let type: string | undefined;
  let instance: string | undefined;
  if (body !== null && typeof body === "object" && !Array.isArray(body)) {
    const b = body as Record<string, unknown>;
    if (b.title) title = String(b.title);
    detail = String(b.detail ?? b.message ?? "");
    type = typeof b.type === "string" ? b.type : undefined;
    instance = typeof b.instance === "string" ? b.instance : undefined;
    if (Array.isArray(b.errors)) {
      for (const item of b.errors) {
        if (item !== null && typeof item === "object") {
          const i = item as Record<string, unknown>;
          errors.push({ path: String(i.path ?? "$"), message: String(i.message ?? "") });
        }
      }
    }
  } else if (typeof body === "string" && body.trim()) {
    detail = body.trim().slice(0, 500);
  }
  return new Cls({
    status,
    title,
    detail,
    errors,
    type,
    instance,
    retryAfter: parseRetryAfter(extra.retryAfter),
    method: extra.method ?? "",
    url: extra.url ?? "",
    hint: extra.hint,
  });
}

function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
}

/** Whether an error from the client is worth retrying later (no answer, 429, 5xx). */
export function isTransient(error: unknown): boolean {
  return error instanceof TransportError || (error instanceof BatonApiError && error.transient);
}
