/**
 * `BatonClient`: a typed client for Baton's REST API. Bodies and answers are the proto3 JSON
 * mapping of `proto/workflow/v1/engine.proto`; the types are the `...Json` types protoc-gen-es
 * generated from it (`src/gen`). The HTTP side (credentials, retries, errors, payloads) is
 * {@link ClientCore}.
 */
import { AdminClient, pages, seg } from "./admin.js";
import type { CallOptions, JsonObject, JsonValue } from "./core.js";
import type {
  BatchOutcomeJson,
  BatchResultItemJson,
  CompleteJobResponseJson,
  DefinitionJson,
  DefinitionPageJson,
  DeletedInstanceJson,
  FailJobResponseJson,
  HeartbeatResponseJson,
  HistoryEventJson,
  HistoryPageJson,
  InstanceJson,
  InstancePageJson,
  JobJson,
  StartOutcomeJson,
  StepExecutionJson,
  StepExecutionPageJson,
  StopWorkerResponseJson,
} from "./gen/workflow/v1/engine_pb.js";
import { strictJson } from "./json.js";

export { AdminClient, type Page, pages } from "./admin.js";

export {
  type CallOptions,
  ClientCore,
  type ClientOptions,
  DEFAULT_RETRY,
  type JsonObject,
  type JsonValue,
  mayRetry,
  OFFLOAD_FLOOR,
} from "./core.js";

/** What starts one instance (of {@link BatonClient.startInstance} and each of a batch). */
export interface StartRequest {
  definitionName?: string;
  definitionVersion?: number;
  definition?: DefinitionJson;
  input?: JsonObject;
  correlationId?: string;
  idempotencyKey?: string;
}

/** The most instances one {@link BatonClient.startInstances} call starts (the API's limit). */
export const MAX_BATCH_STARTS = 100;

/**
 * The whole API: definitions and instances here, the worker's job calls, and (from
 * {@link AdminClient}) task definitions, queues and schedules.
 */
export class BatonClient extends AdminClient {
  // --- definitions ---------------------------------------------------------------------------

  registerDefinition(definition: DefinitionJson, options?: CallOptions): Promise<DefinitionJson> {
    return this.request("POST", "/v1/definitions", { ...options, body: definition });
  }

  getDefinition(name: string, version?: number, options?: CallOptions): Promise<DefinitionJson> {
    const path =
      version === undefined
        ? `/v1/definitions/${seg(name)}`
        : `/v1/definitions/${seg(name)}/versions/${version}`;
    return this.request("GET", path, options);
  }

  listDefinitions(
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<DefinitionPageJson> {
    return this.request("GET", "/v1/definitions", { ...options, query: { ...params } });
  }

  /** Every definition (latest version of each name), following page tokens. */
  iterDefinitions(params: { pageSize?: number } = {}): AsyncGenerator<DefinitionJson> {
    const limit = params.pageSize ?? 100;
    return pages(
      (pageToken) => this.listDefinitions({ limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.definitions,
    );
  }

  /**
   * Delete one version of a definition; resolves to it as it was. Instances running it keep
   * their copy. A NotFoundError if there is no such version; repeated only after a failure that
   * surely changed nothing (as {@link AdminClient.deleteTaskDef}).
   */
  deleteDefinition(name: string, version: number, options?: CallOptions): Promise<DefinitionJson> {
    const path = `/v1/definitions/${seg(name)}/versions/${version}`;
    return this.request("DELETE", path, { ...options, idempotent: false });
  }

  // --- instances -----------------------------------------------------------------------------

  /**
   * Start an instance of a stored definition (or an inline `definition`). With an
   * `idempotencyKey` a repeated start returns the first instance, so it is also retried after
   * an ambiguous failure. An input above the server's soft limit is uploaded to S3 first.
   */
  async startInstance(request: StartRequest, options?: CallOptions): Promise<InstanceJson> {
    return this.request("POST", "/v1/instances", {
      ...options,
      body: await this.#startBody(request),
      idempotent: request.idempotencyKey !== undefined,
    });
  }

  /**
   * Start up to {@link MAX_BATCH_STARTS} instances in one call (`POST /v1/instances/batch`).
   * One outcome per request, in order (`index`): `STARTED`, `EXISTING` (an `idempotencyKey`
   * seen before: the first instance), `INVALID` or `NOT_FOUND` (with `error` and `problem`); one
   * bad item does not stop the others. Retried after an ambiguous failure only when every item
   * has an `idempotencyKey`. Inputs above the soft limit are uploaded to S3 first.
   */
  async startInstances(
    requests: StartRequest[],
    options?: CallOptions,
  ): Promise<StartOutcomeJson[]> {
    if (requests.length < 1 || requests.length > MAX_BATCH_STARTS) {
      throw new RangeError(
        `startInstances takes 1 to ${MAX_BATCH_STARTS} requests, not ${requests.length}: split the list`,
      );
    }
    const instances = [];
    for (const request of requests) instances.push(await this.#startBody(request));
    const answer = await this.request<{ results?: StartOutcomeJson[] }>(
      "POST",
      "/v1/instances/batch",
      {
        ...options,
        body: { instances },
        idempotent: requests.every((r) => r.idempotencyKey !== undefined),
      },
    );
    return answer.results ?? [];
  }

  async #startBody(request: StartRequest): Promise<Record<string, unknown>> {
    const body: Record<string, unknown> = { ...request };
    if (request.input !== undefined) {
      const encoded = strictJson(request.input);
      if (await this.above(encoded, "workflowInput")) {
        delete body.input;
        body.inputPayloadPath = await this.uploadPayload("WORKFLOW_INPUT", encoded);
      }
    }
    return body;
  }

  getInstance(
    id: string,
    params: { includeSteps?: boolean } = {},
    options?: CallOptions,
  ): Promise<InstanceJson> {
    const query = params.includeSteps === false ? { includeSteps: "false" } : undefined;
    return this.request("GET", `/v1/instances/${seg(id)}`, { ...options, query });
  }

  searchInstances(
    params: {
      status?: string;
      definitionName?: string;
      correlationId?: string;
      createdAfter?: string;
      createdBefore?: string;
      limit?: number;
      pageToken?: string;
    } = {},
    options?: CallOptions,
  ): Promise<InstancePageJson> {
    return this.request("GET", "/v1/instances", { ...options, query: { ...params } });
  }

  /** Every matching instance, newest first, following page tokens. */
  iterInstances(
    params: {
      status?: string;
      definitionName?: string;
      correlationId?: string;
      pageSize?: number;
    } = {},
  ): AsyncGenerator<InstanceJson> {
    const { pageSize, ...filter } = params;
    const limit = pageSize ?? 100;
    return pages(
      (pageToken) =>
        this.searchInstances({ ...filter, limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.instances,
    );
  }

  listSteps(
    id: string,
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<StepExecutionPageJson> {
    return this.request("GET", `/v1/instances/${seg(id)}/steps`, { ...options, query: params });
  }

  /** Every step execution of an instance, in the order they were created. */
  iterSteps(id: string, params: { pageSize?: number } = {}): AsyncGenerator<StepExecutionJson> {
    const limit = params.pageSize ?? 500;
    return pages(
      (pageToken) => this.listSteps(id, { limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.steps,
    );
  }

  getHistory(
    id: string,
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<HistoryPageJson> {
    return this.request("GET", `/v1/instances/${seg(id)}/history`, { ...options, query: params });
  }

  /** An instance's whole history, oldest first. */
  iterHistory(id: string, params: { pageSize?: number } = {}): AsyncGenerator<HistoryEventJson> {
    const limit = params.pageSize ?? 500;
    return pages(
      (pageToken) => this.getHistory(id, { limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.events,
    );
  }

  /**
   * Delete a finished instance with its steps, jobs and history. A ConflictError while it runs
   * (cancel it first), NotFoundError if there is none; repeated only after a failure that surely
   * changed nothing.
   */
  deleteInstance(id: string, options?: CallOptions): Promise<DeletedInstanceJson> {
    return this.request("DELETE", `/v1/instances/${seg(id)}`, { ...options, idempotent: false });
  }

  /** Terminate a running or paused instance (its open jobs and children are cancelled). */
  cancelInstance(id: string, reason?: string, options?: CallOptions): Promise<InstanceJson> {
    const body = reason === undefined ? {} : { reason };
    return this.request("POST", `/v1/instances/${seg(id)}/cancel`, { ...options, body });
  }

  retryInstance(id: string, options?: CallOptions): Promise<InstanceJson> {
    return this.request("POST", `/v1/instances/${seg(id)}/retry`, { ...options, body: {} });
  }

  /**
   * Run an ended instance again from the start with the same input (same id, its next run);
   * `useLatestDefinition` runs its definition's newest version.
   */
  restartInstance(
    id: string,
    params: { useLatestDefinition?: boolean } = {},
    options?: CallOptions,
  ): Promise<InstanceJson> {
    const body = params.useLatestDefinition ? { useLatestDefinition: true } : {};
    return this.request("POST", `/v1/instances/${seg(id)}/restart`, { ...options, body });
  }

  /**
   * Run an ended instance again from one of its step executions (`fromStepExecutionId`;
   * none: from the start): what came after it is removed and it runs again in its place, with
   * `stepInput` if given; `input` and `correlationId` replace the instance's; `atJoin` rejoins
   * a PARALLEL or MAP over its branches as they ended.
   */
  rerunInstance(
    id: string,
    params: {
      fromStepExecutionId?: string;
      input?: Record<string, unknown>;
      stepInput?: Record<string, unknown>;
      correlationId?: string;
      atJoin?: boolean;
    } = {},
    options?: CallOptions,
  ): Promise<InstanceJson> {
    const body: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(params)) {
      if (value !== undefined && value !== false) body[key] = value;
    }
    return this.request("POST", `/v1/instances/${seg(id)}/rerun`, { ...options, body });
  }

  pauseInstance(id: string, options?: CallOptions): Promise<InstanceJson> {
    return this.request("POST", `/v1/instances/${seg(id)}/pause`, { ...options, body: {} });
  }

  resumeInstance(id: string, options?: CallOptions): Promise<InstanceJson> {
    return this.request("POST", `/v1/instances/${seg(id)}/resume`, { ...options, body: {} });
  }

  /** Complete a waiting USER_TASK step, setting `variables` on the instance. */
  completeUserTask(
    instanceId: string,
    stepId: string,
    params: { variables?: JsonObject; stepExecutionId?: string } = {},
    options?: CallOptions,
  ): Promise<InstanceJson> {
    const path = `/v1/instances/${seg(instanceId)}/user-tasks/${seg(stepId)}/complete`;
    const body = { variablesToSet: params.variables, stepExecutionId: params.stepExecutionId };
    return this.request("POST", path, { ...options, body });
  }

  /** Deliver a signal to a waiting SIGNAL step; `payload` becomes its output. */
  signal(
    instanceId: string,
    stepId: string,
    params: { payload?: JsonValue; stepExecutionId?: string } = {},
    options?: CallOptions,
  ): Promise<InstanceJson> {
    const path = `/v1/instances/${seg(instanceId)}/signals/${seg(stepId)}`;
    const body = { payload: params.payload, stepExecutionId: params.stepExecutionId };
    return this.request("POST", path, { ...options, body });
  }

  // --- jobs (the worker's side) --------------------------------------------------------------

  /** Claim up to `maxJobs` jobs; with `waitSeconds` (0 to 20) the server holds an empty poll. */
  async pollJobs(
    request: { workerId: string; jobTypes: string[]; maxJobs: number; waitSeconds?: number },
    options: CallOptions = {},
  ): Promise<JobJson[]> {
    const wait = request.waitSeconds ?? 0;
    const answer = await this.request<{ jobs?: JobJson[] }>("POST", "/v1/jobs/poll", {
      ...options,
      body: { ...request, waitSeconds: wait > 0 ? wait : undefined },
      idempotent: false,
      timeoutSeconds: (options.timeoutSeconds ?? this.timeoutSeconds) + wait,
    });
    return answer.jobs ?? [];
  }

  /** Take the lease on one job by id (event-driven dispatch). 409 when not claimable. */
  claimJob(
    jobId: string,
    request: { workerId: string; attempt?: number },
    options?: CallOptions,
  ): Promise<JobJson> {
    return this.request("POST", `/v1/jobs/${seg(jobId)}/claim`, { ...options, body: request });
  }

  /** Complete a claimed job; a repeat is accepted (`applied` false). */
  async completeJob(
    request: { jobId: string; workerId: string; variables?: JsonObject; attempt?: number },
    options?: CallOptions,
  ): Promise<CompleteJobResponseJson> {
    return this.sendCompletion(await this.completion(request), options);
  }

  /** `POST /v1/jobs/complete` with a body built by {@link completion}. */
  sendCompletion(
    item: BatchResultItemJson,
    options?: CallOptions,
  ): Promise<CompleteJobResponseJson> {
    return this.request("POST", "/v1/jobs/complete", { ...options, body: item, idempotent: true });
  }

  /**
   * The body of a completion (single, or one item of a batch): `variablesToSet`, or above the
   * step output soft limit the output uploaded to S3 and its `outputPayloadPath`. Throws a
   * TypeError for variables that are not strict JSON (unless `checked` says they were found so).
   */
  async completion(
    request: {
      jobId: string;
      workerId: string;
      variables?: JsonObject | undefined;
      attempt?: number | undefined;
    },
    checked = false,
  ): Promise<BatchResultItemJson> {
    const item: BatchResultItemJson = { jobId: request.jobId, workerId: request.workerId };
    if (request.attempt !== undefined) item.attempt = request.attempt;
    if (request.variables !== undefined) {
      // `checked`: the caller already found them strict JSON (the runner, with resultProblem).
      const encoded = checked ? JSON.stringify(request.variables) : strictJson(request.variables);
      if (await this.above(encoded, "stepOutput")) {
        item.outputPayloadPath = await this.uploadPayload("STEP_OUTPUT", encoded);
      } else {
        item.variablesToSet = request.variables;
      }
    }
    return item;
  }

  /**
   * One failure as an item of {@link completeBatch}. `output` (a JSON object) is kept as the
   * step's output when this failure ends the step (no retry follows).
   */
  static failure(request: {
    jobId: string;
    workerId: string;
    errorMessage: string;
    retryable?: boolean;
    nextRetryDelaySeconds?: number | undefined;
    attempt?: number | undefined;
    output?: JsonObject | undefined;
  }): BatchResultItemJson {
    const item: BatchResultItemJson = {
      jobId: request.jobId,
      workerId: request.workerId,
      failure: {
        errorMessage: request.errorMessage,
        retryable: request.retryable ?? true,
        ...(request.nextRetryDelaySeconds === undefined
          ? {}
          : { nextRetryDelaySeconds: request.nextRetryDelaySeconds }),
        ...(request.output === undefined ? {} : { output: request.output }),
      },
    };
    if (request.attempt !== undefined) item.attempt = request.attempt;
    return item;
  }

  /** Up to 100 results in one call; one answer per item, in order. Safe to repeat. */
  async completeBatch(
    results: BatchResultItemJson[],
    options?: CallOptions,
  ): Promise<BatchOutcomeJson[]> {
    const answer = await this.request<{ results?: BatchOutcomeJson[] }>(
      "POST",
      "/v1/jobs/complete-batch",
      { ...options, body: { results }, idempotent: true },
    );
    return answer.results ?? [];
  }

  /**
   * Fail a claimed job: retried per the step's policy when `retryable` (default true). `output`
   * (a JSON object) is kept as the step's output when this failure ends the step (no retry
   * follows); one that is not strict JSON is a TypeError before anything is sent.
   */
  failJob(
    request: {
      jobId: string;
      workerId: string;
      errorMessage: string;
      retryable?: boolean;
      nextRetryDelaySeconds?: number;
      attempt?: number;
      output?: JsonObject;
    },
    options?: CallOptions,
  ): Promise<FailJobResponseJson> {
    const body = { retryable: true, ...request };
    return this.request("POST", "/v1/jobs/fail", { ...options, body, idempotent: true });
  }

  /** Extend the lease of a claimed job (of its `attempt`) by the step's response timeout. */
  heartbeat(
    request: { jobId: string; workerId: string; attempt?: number },
    options?: CallOptions,
  ): Promise<HeartbeatResponseJson> {
    return this.request("POST", "/v1/jobs/heartbeat", {
      ...options,
      body: request,
      idempotent: true,
    });
  }

  /** The worker's stop signal: a long-poll of `workerId` waiting now claims nothing more. */
  stopWorker(workerId: string, options?: CallOptions): Promise<StopWorkerResponseJson> {
    return this.request("POST", "/v1/workers/stop", {
      ...options,
      body: { workerId },
      idempotent: true,
    });
  }
}
