package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.baton.workflow.v1.CancelInstanceRequest;
import dev.baton.workflow.v1.CompleteUserTaskRequest;
import dev.baton.workflow.v1.Definition;
import dev.baton.workflow.v1.GetHistoryRequest;
import dev.baton.workflow.v1.HistoryPage;
import dev.baton.workflow.v1.Instance;
import dev.baton.workflow.v1.SignalRequest;
import dev.baton.workflow.v1.StartInstanceRequest;
import dev.baton.workflow.v1.TaskDef;

/**
 * The typed calls of Baton's API beyond the worker's: each takes and returns the message generated
 * from {@code engine.proto} ({@code dev.baton.workflow.v1}); the wire is its proto3 JSON mapping.
 * Reached through {@link BatonClient#api()}.
 */
public final class TypedApi {
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
}
