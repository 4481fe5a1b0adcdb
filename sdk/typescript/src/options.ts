/** The runner's options, and the interface of a source of jobs other than Baton's poll. */

import type { Auth } from "./auth.js";
import type { RetryPolicy } from "./backoff.js";
import type { BatonClient } from "./client.js";
import type { Protocol } from "./connect.js";
import type { JobJson } from "./gen/workflow/v1/engine_pb.js";
import type { Logger } from "./log.js";
import type { MetricsHook } from "./metrics.js";

/** Where jobs come from: Baton's poll (the default), or e.g. {@link SqsTransport}. */
export interface JobTransport {
  /** True when `fetch` waits for work itself (a long poll): no pause after an empty fetch. */
  readonly waits: boolean;
  /** Up to `maxJobs` jobs of `jobTypes`, each already leased to `workerId`. */
  fetch(request: {
    workerId: string;
    jobTypes: string[];
    maxJobs: number;
    signal: AbortSignal;
  }): Promise<JobJson[]>;
}

export interface RunnerOptions {
  /** The client (default: one from `url`/`apiKey`/`auth`, else `BATON_URL`, `BATON_API_KEY`...). */
  client?: BatonClient;
  url?: string;
  apiKey?: string;
  /** Credentials other than an API key (e.g. `new AwsSigV4Auth()`), for the client made here. */
  auth?: Auth;
  /** The client's wire, `"rest"` or `"connect"` (default: `BATON_PROTOCOL`, else REST). */
  protocol?: Protocol;
  /** Who claims jobs (default `<host>-<pid>`). */
  workerId?: string;
  /** The types polled for (default: every registered type). */
  jobTypes?: string[];
  /** Jobs running at once (default 8). */
  parallelism?: number;
  /** The most one poll asks for (default 100, the API's limit): a poll asks for every free slot. */
  maxJobsPerPoll?: number;
  /** Claimed jobs allowed to wait for a running slot (default min(parallelism, maxJobsPerPoll)). */
  prefetch?: number;
  /** Seconds of pause after an empty short poll (default 0.5)... */
  pollInterval?: number;
  /** ...doubled per further empty poll up to this (default 2). */
  maxPollInterval?: number;
  /** How long the server may hold a poll that follows an empty or short one (default 10; 0: short polls). */
  longPollWait?: number;
  /** While jobs run, how long a poll may wait for more slots to free (default 0.01 s). */
  gatherInterval?: number;
  /** Backoff after a failed poll (default 0.5 s doubling to 30 s, never gives up). */
  pollErrors?: RetryPolicy;
  /** Retries of a result's report (default 0.2 s doubling to 5 s, for up to 5 minutes). */
  reportRetry?: RetryPolicy;
  /** Heartbeat running jobs at half their lease (default true). */
  autoHeartbeat?: boolean;
  /** Report outcomes in batches through `POST /v1/jobs/complete-batch` (default true). */
  batchResults?: boolean;
  /** How long a result may wait for others before its batch is sent (default 0.005 s). */
  flushInterval?: number;
  /** A batch is sent at once when this many results wait (default 100, the API's limit). */
  maxResultsPerFlush?: number;
  /** Seconds the drain waits for in-flight jobs before giving up on them (default: no limit). */
  drainTimeout?: number;
  /** Where jobs come from (default: Baton's poll). */
  transport?: JobTransport;
  logger?: Logger;
  /** Told of polls, handler calls and outcomes (see {@link MetricsHook}; e.g. InMemoryMetrics). */
  metrics?: MetricsHook;
}

export interface RunOptions {
  /** Aborting it stops the runner gracefully; `run` resolves after the drain. */
  signal?: AbortSignal;
  /**
   * Stop gracefully on SIGINT/SIGTERM (default false); a second signal exits at once, leaving
   * in-flight jobs to their leases.
   */
  handleSignals?: boolean;
}
