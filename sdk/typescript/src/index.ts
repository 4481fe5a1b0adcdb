/**
 * Baton's worker SDK for TypeScript.
 *
 * ```ts
 * const registry = new Registry();
 * registry.register("charge-card", async (job) => ({ receipt: await charge(job.input.amount) }));
 * await new Runner(registry).run({ handleSignals: true });
 * ```
 */
export {
  API_KEY_HEADER,
  ApiKeyAuth,
  type Auth,
  type AuthRequest,
  AwsSigV4Auth,
  type AwsSigV4Options,
} from "./auth.js";
export { Backoff, NO_RETRY, type RetryPolicy, retryPolicy } from "./backoff.js";
export {
  AdminClient,
  BatonClient,
  type CallOptions,
  ClientCore,
  type ClientOptions,
  DEFAULT_RETRY,
  type JsonObject,
  type JsonValue,
  MAX_BATCH_STARTS,
  mayRetry,
  type Page,
  pages,
  type StartRequest,
} from "./client.js";
export { ENV_PROTOCOL, PROTOCOLS, type Protocol } from "./connect.js";
export {
  API_KEY_FILE,
  DEFAULT_DATA_DIR,
  DEFAULT_URL,
  type DispatchQueue,
  dispatchQueueFromEnv,
  ENV_API_KEY,
  ENV_DATA_DIR,
  ENV_DISPATCH_QUEUE_URL,
  ENV_SQS_ENDPOINT,
  ENV_URL,
  findApiKey,
  localApiKeyPath,
} from "./env.js";
export {
  AuthenticationError,
  BadRequestError,
  BatonApiError,
  BatonError,
  ConflictError,
  isTransient,
  JobError,
  type JobErrorOptions,
  MAX_FAILURE_OUTPUT_BYTES,
  MAX_RETRY_DELAY_SECONDS,
  NonRetryableError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  type ProblemItem,
  problemError,
  RateLimitedError,
  ServerError,
  TransportError,
  UnavailableError,
  ValidationError,
} from "./errors.js";
export type * from "./gen/workflow/v1/engine_pb.js";
export { type Job, LeaseLostError } from "./job.js";
export { jsonProblem } from "./json.js";
export {
  JsonLogger,
  type LogFields,
  type Logger,
  type LogLevel,
  silentLogger,
  withFields,
} from "./log.js";
export { InMemoryMetrics, type MetricsHook, type MetricsSnapshot } from "./metrics.js";
export { type Handler, type HandlerResult, Registry } from "./registry.js";
export {
  defaultWorkerId,
  type JobTransport,
  Runner,
  type RunnerOptions,
  type RunOptions,
} from "./runner.js";
export { SqsTransport, type SqsTransportOptions } from "./sqs.js";
export { JobEnvironment, type JobEnvironmentOptions, RejectedResult } from "./testing.js";
export { VERSION } from "./version.js";
