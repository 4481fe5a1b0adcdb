/**
 * The operator's side of {@link BatonClient}: task definitions, named queues and schedules. Bodies
 * and answers are the proto3 JSON mapping of `engine.proto` (the generated `...Json` types).
 */
import { type CallOptions, ClientCore, type JsonObject } from "./core.js";
import type {
  BackfillResponseJson,
  DeletedScheduleJson,
  PurgeResponseJson,
  PushResponseJson,
  QueuePageJson,
  QueueStatsJson,
  QueueSummaryJson,
  QueueTaskDetailJson,
  QueueTaskJson,
  QueueTaskPageJson,
  RedriveResponseJson,
  ScheduleJson,
  SchedulePageJson,
  ScheduleRequestJson,
  ScheduleTriggeredJson,
  SettleResponseJson,
  TaskDefJson,
  TaskDefPageJson,
} from "./gen/workflow/v1/engine_pb.js";

/** One page of a listing: its items and the token of the next page (absent on the last). */
export type Page = { nextPageToken?: string };

/** Every item of a paged listing, fetching the next page only when the caller gets there. */
export async function* pages<P extends Page, T>(
  fetchPage: (pageToken: string | undefined) => Promise<P>,
  items: (page: P) => T[] | undefined,
): AsyncGenerator<T, void, undefined> {
  let token: string | undefined;
  do {
    const page = await fetchPage(token);
    yield* items(page) ?? [];
    token = page.nextPageToken || undefined;
  } while (token !== undefined);
}

export function seg(value: string): string {
  return encodeURIComponent(value);
}

/** Task definitions, queues and schedules; {@link BatonClient} adds the rest of the API. */
export class AdminClient extends ClientCore {
  // --- task definitions ----------------------------------------------------------------------

  /** Create or replace the task definition of job type `name` (retries, timeouts, rate limits). */
  putTaskDef(name: string, taskDef: TaskDefJson, options?: CallOptions): Promise<TaskDefJson> {
    const body = { ...taskDef, name };
    return this.request("PUT", `/v1/taskdefs/${seg(name)}`, { ...options, body });
  }

  getTaskDef(name: string, options?: CallOptions): Promise<TaskDefJson> {
    return this.request("GET", `/v1/taskdefs/${seg(name)}`, options);
  }

  /**
   * Delete the task definition of job type `name`; resolves to it as it was. Running instances
   * keep their copy. Repeated only after a failure that surely changed nothing: after a lost
   * answer a repeat would report the deletion that happened as a 404.
   */
  deleteTaskDef(name: string, options?: CallOptions): Promise<TaskDefJson> {
    return this.request("DELETE", `/v1/taskdefs/${seg(name)}`, { ...options, idempotent: false });
  }

  listTaskDefs(
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<TaskDefPageJson> {
    return this.request("GET", "/v1/taskdefs", { ...options, query: { ...params } });
  }

  /** Every task definition, by name, following page tokens. */
  iterTaskDefs(params: { pageSize?: number } = {}): AsyncGenerator<TaskDefJson> {
    const limit = params.pageSize ?? 100;
    return pages(
      (pageToken) => this.listTaskDefs({ limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.taskDefs,
    );
  }

  // --- queues --------------------------------------------------------------------------------

  /** Push a task onto a named queue (higher `priority` first, then FIFO). */
  push(
    queue: string,
    task: { title: string; body?: string; priority?: number; maxRetries?: number },
    options?: CallOptions,
  ): Promise<PushResponseJson> {
    const body = { body: "", priority: 0, ...task };
    return this.request("POST", `/v1/queues/${seg(queue)}/push`, { ...options, body });
  }

  /** Task counts of a queue by state. */
  queueStats(queue: string, options?: CallOptions): Promise<QueueStatsJson> {
    return this.request("GET", `/v1/queues/${seg(queue)}/stats`, options);
  }

  /** Pending tasks in dequeue order, without claiming them (default 10, at most 100). */
  async peek(
    queue: string,
    params: { limit?: number } = {},
    options?: CallOptions,
  ): Promise<QueueTaskJson[]> {
    const path = `/v1/queues/${seg(queue)}/peek`;
    const answer = await this.request<{ tasks?: QueueTaskJson[] }>("GET", path, {
      ...options,
      query: { ...params },
    });
    return answer.tasks ?? [];
  }

  /** Delete every task of a queue. */
  purge(queue: string, options?: CallOptions): Promise<PurgeResponseJson> {
    return this.request("DELETE", `/v1/queues/${seg(queue)}`, options);
  }

  /** One page of queues (those holding a task), by name, with their counts. */
  listQueues(
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<QueuePageJson> {
    return this.request("GET", "/v1/queues", { ...options, query: { ...params } });
  }

  /** Every queue, by name, following page tokens. */
  iterQueues(params: { pageSize?: number } = {}): AsyncGenerator<QueueSummaryJson> {
    const limit = params.pageSize ?? 100;
    return pages(
      (pageToken) => this.listQueues({ limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.queues,
    );
  }

  /** One page of a queue's tasks, oldest first (`status: "dead"`: its dead letters). */
  listQueueTasks(
    queue: string,
    params: { status?: string; limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<QueueTaskPageJson> {
    const path = `/v1/queues/${seg(queue)}/tasks`;
    return this.request("GET", path, { ...options, query: { ...params } });
  }

  /** Every task of a queue (of one `status`), oldest first, following page tokens. */
  iterQueueTasks(
    queue: string,
    params: { status?: string; pageSize?: number } = {},
  ): AsyncGenerator<QueueTaskDetailJson> {
    const { pageSize, ...filter } = params;
    const limit = pageSize ?? 100;
    return pages(
      (pageToken) =>
        this.listQueueTasks(queue, { ...filter, limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.tasks,
    );
  }

  /**
   * Move dead tasks back to pending with their retry count reset: the named ones, or (no
   * `taskIds`) a batch of every dead task, `remaining` saying how many are left. Safe to repeat.
   */
  redrive(
    queue: string,
    params: { taskIds?: string[] } = {},
    options?: CallOptions,
  ): Promise<RedriveResponseJson> {
    const path = `/v1/queues/${seg(queue)}/redrive`;
    return this.request("POST", path, { ...options, body: { ...params }, idempotent: true });
  }

  /** Claim up to `maxTasks` tasks; each carries the `receipt` to ack or nack it with. */
  async dequeue(
    queue: string,
    request: { consumerId: string; maxTasks?: number; visibilityTimeoutSecs?: number },
    options?: CallOptions,
  ): Promise<QueueTaskJson[]> {
    const path = `/v1/queues/${seg(queue)}/dequeue`;
    const body = { maxTasks: 1, ...request };
    const answer = await this.request<{ tasks?: QueueTaskJson[] }>("POST", path, {
      ...options,
      body,
    });
    return answer.tasks ?? [];
  }

  /** Acknowledge a dequeued task (done). Safe to repeat. */
  ack(
    queue: string,
    taskId: string,
    receipt: string,
    options?: CallOptions,
  ): Promise<SettleResponseJson> {
    const path = `/v1/queues/${seg(queue)}/tasks/${seg(taskId)}/ack`;
    return this.request("POST", path, { ...options, body: { receipt }, idempotent: true });
  }

  /** Fail a dequeued task: retried later, or dead-lettered after its maximum retries. */
  nack(
    queue: string,
    taskId: string,
    params: { receipt: string; error?: string; retryable?: boolean },
    options?: CallOptions,
  ): Promise<SettleResponseJson> {
    const path = `/v1/queues/${seg(queue)}/tasks/${seg(taskId)}/nack`;
    return this.request("POST", path, { ...options, body: { retryable: true, ...params } });
  }

  // --- schedules -----------------------------------------------------------------------------

  /**
   * Create a schedule: `{ id?, definitionName, definitionVersion?, input?, spec: { cron?: [...],
   * interval?, timeZone?, jitterSeconds?, startAt?, endAt? }, overlapPolicy?,
   * catchupWindowSeconds?, pauseOnFailure?, paused? }`; answers it with its `nextFireTimes`.
   */
  createSchedule(schedule: ScheduleRequestJson, options?: CallOptions): Promise<ScheduleJson> {
    return this.request("POST", "/v1/schedules", { ...options, body: schedule });
  }

  /** A schedule with its next fire times and its last actions. */
  getSchedule(id: string, options?: CallOptions): Promise<ScheduleJson> {
    return this.request("GET", `/v1/schedules/${seg(id)}`, options);
  }

  listSchedules(
    params: { limit?: number; pageToken?: string } = {},
    options?: CallOptions,
  ): Promise<SchedulePageJson> {
    return this.request("GET", "/v1/schedules", { ...options, query: { ...params } });
  }

  /** Every schedule, by id, following page tokens. */
  iterSchedules(params: { pageSize?: number } = {}): AsyncGenerator<ScheduleJson> {
    const limit = params.pageSize ?? 100;
    return pages(
      (pageToken) => this.listSchedules({ limit, ...(pageToken ? { pageToken } : {}) }),
      (p) => p.schedules,
    );
  }

  /** Replace a schedule whole (its slots not fired yet follow the new spec). */
  replaceSchedule(
    id: string,
    schedule: ScheduleRequestJson,
    options?: CallOptions,
  ): Promise<ScheduleJson> {
    return this.request("PUT", `/v1/schedules/${seg(id)}`, { ...options, body: schedule });
  }

  /** Delete a schedule (the instances it started are kept). */
  deleteSchedule(id: string, options?: CallOptions): Promise<DeletedScheduleJson> {
    return this.request("DELETE", `/v1/schedules/${seg(id)}`, options);
  }

  /** Pause a schedule: no slot fires until it is unpaused (nor afterwards, for the paused time). */
  pauseSchedule(
    id: string,
    params: { note?: string } = {},
    options?: CallOptions,
  ): Promise<ScheduleJson> {
    const path = `/v1/schedules/${seg(id)}/pause`;
    return this.request("POST", path, { ...options, body: { ...params }, idempotent: true });
  }

  /** Unpause a schedule: it fires from now on. */
  unpauseSchedule(id: string, options?: CallOptions): Promise<ScheduleJson> {
    const path = `/v1/schedules/${seg(id)}/unpause`;
    return this.request("POST", path, { ...options, body: {}, idempotent: true });
  }

  /** Fire a schedule now (its overlap policy applies), even while paused. */
  triggerSchedule(id: string, options?: CallOptions): Promise<ScheduleTriggeredJson> {
    return this.request("POST", `/v1/schedules/${seg(id)}/trigger`, { ...options, body: {} });
  }

  /**
   * Fire the slots of the spec between `from` and `to` (ISO 8601 times, or Dates), in order,
   * whatever the catch-up window. Repeating it adds nothing (a slot fires once).
   */
  backfillSchedule(
    id: string,
    range: { from: string | Date; to: string | Date },
    options?: CallOptions,
  ): Promise<BackfillResponseJson> {
    const body = { from: iso(range.from), to: iso(range.to) };
    const path = `/v1/schedules/${seg(id)}/backfill`;
    return this.request("POST", path, { ...options, body, idempotent: true });
  }

  // --- other ---------------------------------------------------------------------------------

  /** The API's OpenAPI document. */
  openapi(options?: CallOptions): Promise<JsonObject> {
    return this.request("GET", "/v1/openapi.json", options);
  }
}

function iso(time: string | Date): string {
  return time instanceof Date ? time.toISOString() : time;
}
