package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.baton.workflow.v1.BackfillRequest;
import dev.baton.workflow.v1.BackfillResponse;
import dev.baton.workflow.v1.CancelInstanceRequest;
import dev.baton.workflow.v1.CompleteUserTaskRequest;
import dev.baton.workflow.v1.Definition;
import dev.baton.workflow.v1.DeletedSchedule;
import dev.baton.workflow.v1.GetHistoryRequest;
import dev.baton.workflow.v1.HistoryPage;
import dev.baton.workflow.v1.Instance;
import dev.baton.workflow.v1.ListSchedulesRequest;
import dev.baton.workflow.v1.PauseScheduleRequest;
import dev.baton.workflow.v1.Schedule;
import dev.baton.workflow.v1.SchedulePage;
import dev.baton.workflow.v1.ScheduleRequest;
import dev.baton.workflow.v1.ScheduleTriggered;
import dev.baton.workflow.v1.SignalRequest;
import dev.baton.workflow.v1.StartInstanceRequest;
import dev.baton.workflow.v1.StartInstancesRequest;
import dev.baton.workflow.v1.StartInstancesResponse;
import dev.baton.workflow.v1.TaskDef;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * The typed calls of Baton's API beyond the worker's: each takes and returns the message generated
 * from {@code engine.proto} ({@code dev.baton.workflow.v1}); the wire is its proto3 JSON mapping.
 * Reached through {@link BatonClient#api()}.
 *
 * <p>Numbers left at the proto's default (0, "" or false) are not sent, so the server's default
 * applies (a schedule's {@code catchupWindowSeconds} has presence: one set to 0 is sent as 0).
 */
public final class TypedApi {
  /** Most instances one {@link #startInstances} call may start ({@code POST /v1/instances/batch}). */
  public static final int MAX_BATCH_START = 100;

  private final ApiHttp http;

  TypedApi(ApiHttp http) {
    this.http = http;
  }

  /** Registers a definition; the server assigns the next version when it has none. */
  public Definition registerDefinition(Definition definition) {
    JsonNode answer = http.call("POST", "/v1/definitions", ProtoJson.toJson(definition), false, http.retry, null);
    return ProtoJson.merge(answer, Definition.newBuilder()).build();
  }

  /** Registers a definition written as JSON (e.g. a file), read through the proto first. */
  public Definition registerDefinition(String json) {
    return registerDefinition(ProtoJson.merge(json, Definition.newBuilder()).build());
  }

  /** The latest version of a definition. */
  public Definition getDefinition(String name) {
    JsonNode answer = http.call("GET", "/v1/definitions/" + BatonClient.segment(name), null, true, http.retry, null);
    return ProtoJson.merge(answer, Definition.newBuilder()).build();
  }

  /** Creates or replaces the task definition of job type {@code taskDef.getName()}. */
  public TaskDef putTaskDef(TaskDef taskDef) {
    String path = "/v1/taskdefs/" + BatonClient.segment(taskDef.getName());
    JsonNode answer = http.call("PUT", path, ProtoJson.toJson(taskDef), true, http.retry, null);
    return ProtoJson.merge(answer, TaskDef.newBuilder()).build();
  }

  /**
   * Starts an instance of a stored definition (or an inline one). With an idempotency key a
   * repeated start returns the first instance, so the call is retried after an ambiguous failure.
   */
  public Instance startInstance(StartInstanceRequest request) {
    boolean idempotent = !request.getIdempotencyKey().isEmpty();
    JsonNode answer =
        http.call("POST", "/v1/instances", ProtoJson.toJson(request), idempotent, http.retry, null);
    return ProtoJson.merge(answer, Instance.newBuilder()).build();
  }

  /**
   * Starts up to {@link #MAX_BATCH_START} instances in one request ({@code POST
   * /v1/instances/batch}). Each item is answered on its own, in the request's order: {@code
   * STARTED}, {@code EXISTING} (its idempotency key started one already), {@code INVALID} or
   * {@code NOT_FOUND} (with {@code error} and the {@code problem} a single start would have
   * answered); one bad item does not stop the others. The call is retried after an ambiguous
   * failure only when every item has an idempotency key (a repeat then answers {@code EXISTING}).
   */
  public StartInstancesResponse startInstances(StartInstancesRequest request) {
    int n = request.getInstancesCount();
    if (n < 1 || n > MAX_BATCH_START) {
      throw new IllegalArgumentException(
          "startInstances takes 1 to " + MAX_BATCH_START + " instances (got " + n + "); split the list");
    }
    boolean idempotent = request.getInstancesList().stream().noneMatch(i -> i.getIdempotencyKey().isEmpty());
    JsonNode answer =
        http.call("POST", "/v1/instances/batch", ProtoJson.toJson(request), idempotent, http.retry, null);
    return ProtoJson.merge(answer, StartInstancesResponse.newBuilder()).build();
  }

  /** As {@link #startInstances(StartInstancesRequest)}, for a list of starts. */
  public StartInstancesResponse startInstances(List<StartInstanceRequest> instances) {
    return startInstances(StartInstancesRequest.newBuilder().addAllInstances(instances).build());
  }

  /** An instance with its step executions. */
  public Instance getInstance(String instanceId) {
    JsonNode answer = http.call("GET", "/v1/instances/" + BatonClient.segment(instanceId), null, true, http.retry, null);
    return ProtoJson.merge(answer, Instance.newBuilder()).build();
  }

  /** Terminates a running or paused instance (its open jobs and children are cancelled). */
  public Instance cancelInstance(String instanceId, String reason) {
    CancelInstanceRequest.Builder request = CancelInstanceRequest.newBuilder().setId(instanceId);
    if (reason != null) {
      request.setReason(reason);
    }
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    String path = "/v1/instances/" + BatonClient.segment(instanceId) + "/cancel";
    return ProtoJson.merge(http.call("POST", path, body, false, http.retry, null), Instance.newBuilder()).build();
  }

  /** Delivers a signal to a waiting SIGNAL step; its payload becomes the step's output. */
  public Instance signal(SignalRequest request) {
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    body.remove("stepId");
    String path =
        "/v1/instances/" + BatonClient.segment(request.getId()) + "/signals/" + BatonClient.segment(request.getStepId());
    return ProtoJson.merge(http.call("POST", path, body, false, http.retry, null), Instance.newBuilder()).build();
  }

  /** Completes a waiting USER_TASK step, setting its variables on the instance. */
  public Instance completeUserTask(CompleteUserTaskRequest request) {
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    body.remove("stepId");
    String path =
        "/v1/instances/"
            + BatonClient.segment(request.getId())
            + "/user-tasks/"
            + BatonClient.segment(request.getStepId())
            + "/complete";
    return ProtoJson.merge(http.call("POST", path, body, false, http.retry, null), Instance.newBuilder()).build();
  }

  /** One page of what happened to an instance, oldest first. */
  public HistoryPage getHistory(GetHistoryRequest request) {
    StringBuilder path =
        new StringBuilder("/v1/instances/").append(BatonClient.segment(request.getId())).append("/history");
    String sep = "?";
    if (request.getLimit() > 0) {
      path.append(sep).append("limit=").append(request.getLimit());
      sep = "&";
    }
    if (!request.getPageToken().isEmpty()) {
      path.append(sep).append("pageToken=").append(BatonClient.segment(request.getPageToken()));
    }
    JsonNode answer = http.call("GET", path.toString(), null, true, http.retry, null);
    return ProtoJson.merge(answer, HistoryPage.newBuilder()).build();
  }

  // --- schedules ------------------------------------------------------------------------------

  /**
   * Creates a schedule ({@code POST /v1/schedules}): {@code definitionName}, a {@code spec} (cron
   * expressions or an interval) and the options; the server chooses the id when it has none. Not
   * retried after an ambiguous failure unless it has an id (a repeat then answers 409).
   */
  public Schedule createSchedule(ScheduleRequest request) {
    JsonNode answer = http.call("POST", "/v1/schedules", ProtoJson.toJson(request), false, http.retry, null);
    return ProtoJson.merge(answer, Schedule.newBuilder()).build();
  }

  /** A schedule with its next ten fire times and its last ten actions. */
  public Schedule getSchedule(String scheduleId) {
    JsonNode answer = http.call("GET", schedulePath(scheduleId, ""), null, true, http.retry, null);
    return ProtoJson.merge(answer, Schedule.newBuilder()).build();
  }

  /** One page of schedules, by id ({@code limit} 0: the server's default page size). */
  public SchedulePage listSchedules(ListSchedulesRequest request) {
    StringBuilder path = new StringBuilder("/v1/schedules");
    String sep = "?";
    if (request.getLimit() > 0) {
      path.append(sep).append("limit=").append(request.getLimit());
      sep = "&";
    }
    if (!request.getPageToken().isEmpty()) {
      path.append(sep).append("pageToken=").append(BatonClient.segment(request.getPageToken()));
    }
    JsonNode answer = http.call("GET", path.toString(), null, true, http.retry, null);
    return ProtoJson.merge(answer, SchedulePage.newBuilder()).build();
  }

  /** Every schedule, by id, read a page of {@code pageSize} at a time as it is iterated. */
  public Iterable<Schedule> allSchedules(int pageSize) {
    if (pageSize < 1) {
      throw new IllegalArgumentException("pageSize must be at least 1");
    }
    return () -> new Iterator<>() {
      private Iterator<Schedule> page = List.<Schedule>of().iterator();
      private String token = "";
      private boolean last;

      @Override
      public boolean hasNext() {
        while (!page.hasNext() && !last) {
          SchedulePage next =
              listSchedules(ListSchedulesRequest.newBuilder().setLimit(pageSize).setPageToken(token).build());
          page = next.getSchedulesList().iterator();
          token = next.getNextPageToken();
          last = token.isEmpty();
        }
        return page.hasNext();
      }

      @Override
      public Schedule next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return page.next();
      }
    };
  }

  /** Replaces schedule {@code request.getId()} whole ({@code PUT}); slots not fired yet follow it. */
  public Schedule replaceSchedule(ScheduleRequest request) {
    String id = request.getId();
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    JsonNode answer = http.call("PUT", schedulePath(id, ""), body, true, http.retry, null);
    return ProtoJson.merge(answer, Schedule.newBuilder()).build();
  }

  /** Deletes a schedule (the instances it started are kept). */
  public DeletedSchedule deleteSchedule(String scheduleId) {
    JsonNode answer = http.call("DELETE", schedulePath(scheduleId, ""), null, false, http.retry, null);
    return ProtoJson.merge(answer, DeletedSchedule.newBuilder()).build();
  }

  /** Pauses a schedule (with an optional note): no slot fires until it is unpaused. */
  public Schedule pauseSchedule(PauseScheduleRequest request) {
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    JsonNode answer = http.call("POST", schedulePath(request.getId(), "/pause"), body, true, http.retry, null);
    return ProtoJson.merge(answer, Schedule.newBuilder()).build();
  }

  /** Unpauses a schedule: it fires from now on. */
  public Schedule unpauseSchedule(String scheduleId) {
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    JsonNode answer = http.call("POST", schedulePath(scheduleId, "/unpause"), body, true, http.retry, null);
    return ProtoJson.merge(answer, Schedule.newBuilder()).build();
  }

  /** Fires a schedule now (its overlap policy applies), even while paused. Not retried. */
  public ScheduleTriggered triggerSchedule(String scheduleId) {
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    JsonNode answer = http.call("POST", schedulePath(scheduleId, "/trigger"), body, false, http.retry, null);
    return ProtoJson.merge(answer, ScheduleTriggered.newBuilder()).build();
  }

  /**
   * Fires the spec's slots between {@code from} and {@code to}, in order, whatever the catch-up
   * window. A repeat adds nothing (a slot fires once), so it is retried.
   */
  public BackfillResponse backfillSchedule(BackfillRequest request) {
    if (!request.hasFrom() || !request.hasTo()) {
      throw new IllegalArgumentException("backfillSchedule needs both from and to");
    }
    ObjectNode body = ProtoJson.toJson(request);
    body.remove("id");
    JsonNode answer = http.call("POST", schedulePath(request.getId(), "/backfill"), body, true, http.retry, null);
    return ProtoJson.merge(answer, BackfillResponse.newBuilder()).build();
  }

  private static String schedulePath(String scheduleId, String tail) {
    if (scheduleId == null || scheduleId.isEmpty()) {
      throw new IllegalArgumentException("a schedule id is required");
    }
    return "/v1/schedules/" + BatonClient.segment(scheduleId) + tail;
  }
}
