/**
 * Baton's event-driven dispatch (`BATON_DISPATCH_MODE=outbox`): the engine's relay publishes each
 * claimable job's id to an SQS FIFO queue; this transport receives the messages (the AWS SDK v3's
 * SQS client), takes each job's lease with `POST /v1/jobs/{id}/claim` and deletes the message once
 * the claim answered. A duplicate or stale delivery is refused by the claim (409/404) and dropped;
 * a job type at its limit (429) is left on the queue to come again. The job then runs and
 * completes through the same REST API as a polled one.
 *
 * The message is only a wake-up: the lease lives in Baton's database, so deleting the message
 * right after the claim is safe (a worker that dies later loses its lease, and the engine
 * dispatches the next attempt as a new message).
 *
 * At a stop the receive in flight is aborted (it claimed nothing); a claim in flight is not: its
 * job is leased to this worker, so it is returned and runs in the drain, and the messages of that
 * receive not claimed yet are made visible again at once.
 */
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { BatonClient } from "./client.js";
import {
  DISPATCH_QUEUE_FILE,
  type DispatchQueue,
  dispatchQueueFromEnv,
  ENV_DATA_DIR,
  ENV_DISPATCH_QUEUE_URL,
} from "./env.js";
import { BatonApiError, ConflictError, NotFoundError, TransportError } from "./errors.js";
import type { JobJson } from "./gen/workflow/v1/engine_pb.js";
import { JsonLogger, type Logger } from "./log.js";
import type { JobTransport } from "./options.js";

const SQS_MAX_MESSAGES = 10; // ReceiveMessage returns at most 10
// Placeholder credentials for a `baton dev` queue: its local SQS accepts any.
const LOCAL_CREDENTIALS = { accessKeyId: "baton-local", secretAccessKey: "baton-local" };

export interface SqsTransportOptions {
  /** The queue the engine's relay publishes to (the stack's `DispatchQueueUrl` output). */
  queueUrl: string;
  /** An SQS client (default: one from `endpoint`/`region` and the AWS SDK's usual configuration). */
  sqs?: SQSClient;
  endpoint?: string;
  region?: string;
  /** A `baton dev` queue: reached with placeholder credentials. */
  local?: boolean;
  /** SQS's long poll, 0 to 20 seconds (default 1, so a stop is prompt). */
  waitSeconds?: number;
  /** A message for a job type this worker does not handle shows again after this (default 2 s). */
  foreignDelaySeconds?: number;
  logger?: Logger;
}

export class SqsTransport implements JobTransport {
  readonly waits = true;
  readonly queueUrl: string;
  /** Deliveries the claim refused (already claimed, finished, stale). */
  duplicates = 0;
  readonly #o: SqsTransportOptions;
  readonly #log: Logger;
  #sqs: Promise<SQSClient> | undefined;
  #commands: Promise<typeof import("@aws-sdk/client-sqs")> | undefined;

  constructor(
    readonly client: BatonClient,
    options: SqsTransportOptions,
  ) {
    const wait = options.waitSeconds ?? 1;
    if (!(Number.isInteger(wait) && wait >= 0 && wait <= 20)) {
      throw new RangeError("waitSeconds must be a whole number between 0 and 20 (SQS's long poll)");
    }
    this.queueUrl = options.queueUrl;
    this.#o = options;
    this.#log = options.logger ?? new JsonLogger("baton.sqs");
    if (options.sqs) this.#sqs = Promise.resolve(options.sqs);
  }

  /**
   * The transport for `BATON_DISPATCH_QUEUE_URL` (with `BATON_SQS_ENDPOINT`), else for the queue
   * a `baton dev` on this machine relays to (written into its data directory at every start).
   */
  static fromEnv(
    client: BatonClient,
    options: Partial<SqsTransportOptions> = {},
    env: Record<string, string | undefined> = process.env,
  ): SqsTransport {
    const found: DispatchQueue | undefined = dispatchQueueFromEnv(client.url, env);
    if (found === undefined) {
      throw new Error(
        `no dispatch queue: set ${ENV_DISPATCH_QUEUE_URL} (the stack's DispatchQueueUrl output), ` +
          `or run baton dev on this machine (it writes its queue into $${ENV_DATA_DIR}/` +
          `${DISPATCH_QUEUE_FILE}; BATON_DISPATCH_MODE=outbox makes it publish there)`,
      );
    }
    return new SqsTransport(client, {
      queueUrl: found.queueUrl,
      ...(found.endpoint === undefined ? {} : { endpoint: found.endpoint }),
      ...(found.region === undefined ? {} : { region: found.region }),
      local: found.local,
      ...options,
    });
  }

  #module(): Promise<typeof import("@aws-sdk/client-sqs")> {
    this.#commands ??= import("@aws-sdk/client-sqs");
    return this.#commands;
  }

  #client(): Promise<SQSClient> {
    this.#sqs ??= this.#module().then(({ SQSClient }) => {
      const o = this.#o;
      return new SQSClient({
        ...(o.endpoint ? { endpoint: o.endpoint } : {}),
        ...(o.region || o.local ? { region: o.region ?? "us-east-1" } : {}),
        ...(o.local ? { credentials: LOCAL_CREDENTIALS } : {}),
      });
    });
    return this.#sqs;
  }

  async fetch(request: {
    workerId: string;
    jobTypes: string[];
    maxJobs: number;
    signal: AbortSignal;
  }): Promise<JobJson[]> {
    const sqs = await this.#client();
    const { ReceiveMessageCommand } = await this.#module();
    let messages: { ReceiptHandle?: string; Body?: string }[];
    try {
      const answer = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: this.queueUrl,
          MaxNumberOfMessages: Math.max(1, Math.min(request.maxJobs, SQS_MAX_MESSAGES)),
          WaitTimeSeconds: this.#o.waitSeconds ?? 1,
          MessageAttributeNames: ["All"],
        }),
        { abortSignal: request.signal },
      );
      messages = answer.Messages ?? [];
    } catch (error) {
      if (request.signal.aborted) return [];
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode) {
        throw error; // SQS answered: a real refusal (no such queue, access denied)
      }
      throw new TransportError(
        `cannot reach the dispatch queue ${this.queueUrl}: ${String(error)}`,
        {
          sent: false,
          method: "ReceiveMessage",
          url: this.queueUrl,
          cause: error,
        },
      );
    }
    // A claim is never aborted: once sent, its job may be leased to this worker, so it is
    // returned and runs (also after a stop). A stop only ends the claiming: messages not claimed
    // yet are made visible again at once, for another worker.
    const jobs: JobJson[] = [];
    for (const [i, message] of messages.entries()) {
      if (request.signal.aborted) {
        await this.#releaseAll(messages.slice(i));
        break;
      }
      let job: JobJson | undefined;
      try {
        job = await this.#claim(message, request.workerId, request.jobTypes);
      } catch (error) {
        if (jobs.length === 0) throw error;
        // The jobs claimed already are leased to this worker: run them, do not drop them.
        this.#log.warn("a claim failed; running the jobs claimed before it", {
          workerId: request.workerId,
          error: String(error),
        });
        await this.#releaseAll(messages.slice(i + 1));
        break;
      }
      if (job) jobs.push(job);
    }
    return jobs;
  }

  async #releaseAll(messages: { ReceiptHandle?: string }[]): Promise<void> {
    for (const message of messages) {
      try {
        await this.#release(message.ReceiptHandle ?? "", 0);
      } catch (error) {
        this.#log.debug("a message not released; it shows again after its visibility timeout", {
          error: String(error),
        });
      }
    }
  }

  async #claim(
    message: { ReceiptHandle?: string; Body?: string },
    workerId: string,
    jobTypes: string[],
  ): Promise<JobJson | undefined> {
    const receipt = message.ReceiptHandle ?? "";
    let jobId: string;
    let attempt: number;
    let jobType: string;
    try {
      const delivered = JSON.parse(message.Body ?? "") as Record<string, unknown>;
      if (
        typeof delivered.jobId !== "string" ||
        typeof delivered.attempt !== "number" ||
        typeof delivered.jobType !== "string"
      ) {
        throw new TypeError("not a dispatch");
      }
      ({ jobId, attempt, jobType } = delivered as {
        jobId: string;
        attempt: number;
        jobType: string;
      });
    } catch {
      this.#log.warn("dropping a message that is not a Baton dispatch", {
        body: (message.Body ?? "").slice(0, 200),
      });
      await this.#delete(receipt);
      return undefined;
    }
    const fields = { jobId, attempt, workerId };
    if (!jobTypes.includes(jobType)) {
      this.#log.warn("delivered a job type this worker does not handle", { ...fields, jobType });
      await this.#release(receipt, this.#o.foreignDelaySeconds ?? 2);
      return undefined;
    }
    let job: JobJson;
    try {
      job = await this.client.claimJob(jobId, { workerId, attempt }, { retry: null });
    } catch (error) {
      if (error instanceof ConflictError || error instanceof NotFoundError) {
        this.duplicates += 1;
        this.#log.info("delivery not claimable; dropped", { ...fields, reason: error.message });
        await this.#delete(receipt);
        return undefined;
      }
      if (error instanceof BatonApiError && error.transient) {
        // Throttled (a job type's limit) or unavailable: let SQS deliver it again later.
        await this.#release(receipt, Math.ceil(error.retryAfter ?? 1));
        return undefined;
      }
      throw error;
    }
    try {
      await this.#delete(receipt);
    } catch (error) {
      // The job is leased to this worker either way: run it. The message shows again after its
      // visibility timeout, and its claim is then refused (a duplicate, dropped).
      this.#log.warn("a claimed job's message not deleted; running the job", {
        ...fields,
        error: String(error),
      });
    }
    return job;
  }

  async #delete(receipt: string): Promise<void> {
    const { DeleteMessageCommand } = await this.#module();
    await (await this.#client()).send(
      new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: receipt }),
    );
  }

  async #release(receipt: string, seconds: number): Promise<void> {
    const { ChangeMessageVisibilityCommand } = await this.#module();
    await (await this.#client()).send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.queueUrl,
        ReceiptHandle: receipt,
        VisibilityTimeout: Math.max(0, seconds),
      }),
    );
  }
}
