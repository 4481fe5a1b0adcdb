package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.MethodDescriptor;
import com.google.protobuf.Descriptors.ServiceDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.ListValue;
import com.google.protobuf.MapEntry;
import com.google.protobuf.Message;
import com.google.protobuf.Struct;
import com.google.protobuf.Timestamp;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import com.google.protobuf.util.Timestamps;
import dev.baton.workflow.v1.EngineProto;
import dev.baton.workflow.v1.Problem;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Connect protocol as the client's wire ({@link Protocol#CONNECT}): each REST call goes as the
 * RPC that mirrors it, a binary protobuf POST to {@code /rpc/workflow.v1.WorkflowEngine/<Method>},
 * and its answer comes back as the JSON a REST answer holds (64-bit integers as numbers, numbers,
 * booleans and lists at their defaults too, whole {@code Struct} numbers as integers). A Connect
 * error comes back as the REST problem its details carry, so it raises the same {@link
 * BatonApiException} (status, type, field paths, {@code Retry-After}) as over REST.
 */
final class Connect {
  static final String SERVICE = "workflow.v1.WorkflowEngine";
  static final String PROTO = "application/proto";
  private static final Pattern PARAM = Pattern.compile("\\{(\\w+)}");
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final JsonFormat.Parser STRICT = JsonFormat.parser();
  private static final double EXACT = 9007199254740992.0; // 2^53

  /** A REST operation and its RPC: method, path template, RPC, the field holding a whole body. */
  record Twin(String method, String template, String rpc, String bodyField, Pattern pattern) {
    Twin(String method, String template, String rpc, String bodyField) {
      this(method, template, rpc, bodyField, compile(template));
    }

    private static Pattern compile(String template) {
      Matcher m = PARAM.matcher(template);
      StringBuilder regex = new StringBuilder("^");
      int last = 0;
      while (m.find()) {
        regex.append(Pattern.quote(template.substring(last, m.start())));
        regex.append("(?<").append(m.group(1)).append(">[^/]+)");
        last = m.end();
      }
      return Pattern.compile(regex.append(Pattern.quote(template.substring(last))).append('$').toString());
    }

    List<String> params() {
      return PARAM.matcher(template).results().map(r -> r.group(1)).toList();
    }
  }

  /** Each REST operation and its RPC, as the engine's {@code baton.rpc.methods} lists them. */
  static final List<Twin> TWINS =
      List.of(
          new Twin("GET", "/v1/config", "GetConfig", null),
          new Twin("POST", "/v1/payloads", "CreatePayload", null),
          new Twin("GET", "/v1/openapi.json", "GetOpenApi", null),
          new Twin("GET", "/v1/health", "GetHealth", null),
          new Twin("DELETE", "/v1/definitions/{name}/versions/{version}", "DeleteDefinition", null),
          new Twin("DELETE", "/v1/instances/{id}", "DeleteInstance", null),
          new Twin("POST", "/v1/definitions", "RegisterDefinition", null),
          new Twin("GET", "/v1/definitions", "ListDefinitions", null),
          new Twin("GET", "/v1/definitions/{name}/versions/{version}", "GetDefinition", null),
          new Twin("GET", "/v1/definitions/{name}", "GetDefinition", null),
          new Twin("GET", "/v1/taskdefs", "ListTaskDefs", null),
          new Twin("PUT", "/v1/taskdefs/{name}", "PutTaskDef", "taskDef"),
          new Twin("GET", "/v1/taskdefs/{name}", "GetTaskDef", null),
          new Twin("DELETE", "/v1/taskdefs/{name}", "DeleteTaskDef", null),
          new Twin("POST", "/v1/instances", "StartInstance", null),
          new Twin("POST", "/v1/instances/batch", "StartInstances", null),
          new Twin("GET", "/v1/instances", "SearchInstances", null),
          new Twin("GET", "/v1/instances/{id}", "GetInstance", null),
          new Twin("GET", "/v1/instances/{id}/steps", "ListSteps", null),
          new Twin("GET", "/v1/instances/{id}/history", "GetHistory", null),
          new Twin("POST", "/v1/instances/{id}/cancel", "CancelInstance", null),
          new Twin("POST", "/v1/instances/{id}/user-tasks/{stepId}/complete", "CompleteUserTask", null),
          new Twin("POST", "/v1/instances/{id}/signals/{stepId}", "Signal", null),
          new Twin("POST", "/v1/instances/{id}/retry", "RetryInstance", null),
          new Twin("POST", "/v1/instances/{id}/rerun", "RerunInstance", null),
          new Twin("POST", "/v1/instances/{id}/restart", "RestartInstance", null),
          new Twin("POST", "/v1/instances/{id}/pause", "PauseInstance", null),
          new Twin("POST", "/v1/instances/{id}/resume", "ResumeInstance", null),
          new Twin("POST", "/v1/jobs/poll", "PollJobs", null),
          new Twin("POST", "/v1/jobs/complete", "CompleteJob", null),
          new Twin("POST", "/v1/jobs/complete-batch", "CompleteBatch", null),
          new Twin("POST", "/v1/jobs/fail", "FailJob", null),
          new Twin("POST", "/v1/jobs/heartbeat", "Heartbeat", null),
          new Twin("POST", "/v1/jobs/{id}/claim", "ClaimJob", null),
          new Twin("POST", "/v1/workers/stop", "StopWorker", null),
          new Twin("POST", "/v1/queues/{name}/push", "Push", null),
          new Twin("GET", "/v1/queues/{name}/stats", "Stats", null),
          new Twin("GET", "/v1/queues/{name}/peek", "Peek", null),
          new Twin("DELETE", "/v1/queues/{name}", "Purge", null),
          new Twin("POST", "/v1/queues/{name}/dequeue", "Dequeue", null),
          new Twin("POST", "/v1/queues/{name}/tasks/{taskId}/ack", "Ack", null),
          new Twin("POST", "/v1/queues/{name}/tasks/{taskId}/nack", "Nack", null),
          new Twin("GET", "/v1/queues", "ListQueues", null),
          new Twin("GET", "/v1/queues/{name}/tasks", "ListQueueTasks", null),
          new Twin("POST", "/v1/queues/{name}/redrive", "Redrive", null),
          new Twin("POST", "/v1/schedules", "CreateSchedule", null),
          new Twin("GET", "/v1/schedules", "ListSchedules", null),
          new Twin("GET", "/v1/schedules/{id}", "GetSchedule", null),
          new Twin("PUT", "/v1/schedules/{id}", "ReplaceSchedule", null),
          new Twin("DELETE", "/v1/schedules/{id}", "DeleteSchedule", null),
          new Twin("POST", "/v1/schedules/{id}/pause", "PauseSchedule", null),
          new Twin("POST", "/v1/schedules/{id}/unpause", "UnpauseSchedule", null),
          new Twin("POST", "/v1/schedules/{id}/trigger", "TriggerSchedule", null),
          new Twin("POST", "/v1/schedules/{id}/backfill", "BackfillSchedule", null));

  static final ServiceDescriptor SERVICE_DESCRIPTOR = EngineProto.getDescriptor().findServiceByName("WorkflowEngine");

  /** One REST call as its RPC: the URL path, the binary body and the answer's type. */
  record Call(String rpc, String path, byte[] body) {}

  private Connect() {}

  /** The RPC of {@code method path} (a query string allowed) with its JSON {@code body}. */
  static Call request(String method, String pathAndQuery, JsonNode body) {
    int q = pathAndQuery.indexOf('?');
    String path = q < 0 ? pathAndQuery : pathAndQuery.substring(0, q);
    Twin twin = match(method, path);
    if (twin == null) {
      throw new IllegalArgumentException(
          method + " " + path + " has no RPC twin: it cannot go over the Connect protocol");
    }
    Matcher m = twin.pattern().matcher(path);
    if (!m.matches()) {
      throw new IllegalStateException("unreachable");
    }
    ObjectNode fields = NODES.objectNode();
    for (String name : twin.params()) {
      fields.put(name, URLDecoder.decode(m.group(name).replace("+", "%2B"), StandardCharsets.UTF_8));
    }
    if (twin.bodyField() != null) {
      if (body != null) {
        fields.set(twin.bodyField(), body);
      }
    } else if (body != null && body.isObject()) {
      fields.setAll((ObjectNode) body);
    }
    if (q >= 0) {
      for (String pair : pathAndQuery.substring(q + 1).split("&")) {
        if (pair.isEmpty()) {
          continue;
        }
        int eq = pair.indexOf('=');
        String name = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
        String value = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
        fields.put(name, value); // proto3 JSON reads numbers and booleans from text too
      }
    }
    MethodDescriptor rpc = SERVICE_DESCRIPTOR.findMethodByName(twin.rpc());
    DynamicMessage.Builder message = DynamicMessage.newBuilder(rpc.getInputType());
    try {
      STRICT.merge(ApiHttp.JSON.writeValueAsString(fields), message);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          method + " " + path + " cannot go as " + twin.rpc() + ": " + e.getMessage(), e);
    }
    return new Call(
        twin.rpc(), "/rpc/" + SERVICE + "/" + twin.rpc(), message.build().toByteArray());
  }

  static Twin match(String method, String path) {
    for (Twin twin : TWINS) {
      if (twin.method().equals(method) && twin.pattern().matcher(path).matches()) {
        return twin;
      }
    }
    return null;
  }

  /** The answer to {@code method path}'s RPC as the JSON a REST answer holds. */
  static JsonNode response(String method, String pathAndQuery, byte[] content)
      throws InvalidProtocolBufferException {
    int q = pathAndQuery.indexOf('?');
    Twin twin = match(method, q < 0 ? pathAndQuery : pathAndQuery.substring(0, q));
    if (twin == null) {
      throw new IllegalArgumentException(method + " " + pathAndQuery + " has no RPC twin");
    }
    Descriptor type = SERVICE_DESCRIPTOR.findMethodByName(twin.rpc()).getOutputType();
    return toJson(DynamicMessage.parseFrom(type, content == null ? new byte[0] : content));
  }

  /**
   * A Connect error body as the REST problem it carries (the {@code workflow.v1.Problem} detail);
   * without one, a problem made of its code and message. The status is the problem's.
   */
  static ObjectNode problem(int status, byte[] body) {
    JsonNode doc;
    try {
      doc = body == null || body.length == 0 ? null : ApiHttp.JSON.readTree(body);
    } catch (IOException e) {
      doc = null;
    }
    if (doc == null || !doc.isObject()) {
      return null;
    }
    for (JsonNode detail : doc.path("details")) {
      if ("workflow.v1.Problem".equals(detail.path("type").asText())) {
        try {
          byte[] raw = Base64.getDecoder().decode(pad(detail.path("value").asText("")));
          return (ObjectNode) toJson(Problem.parseFrom(raw));
        } catch (IllegalArgumentException | InvalidProtocolBufferException e) {
          break; // a detail we cannot read: fall back to the code and message
        }
      }
    }
    String code = doc.path("code").asText("unknown");
    // No problem rides on a refused key (the engine answers before any handler): titled as
    // REST's answer is, so the message reads the same over either wire.
    String title =
        status == 401
            ? "Unauthorized"
            : status == 403
                ? "Forbidden"
                : Character.toUpperCase(code.charAt(0)) + code.substring(1).replace('_', ' ');
    ObjectNode problem = NODES.objectNode();
    problem.put("title", title).put("status", status).put("detail", doc.path("message").asText(title));
    return problem;
  }

  private static <T> T as(com.google.protobuf.Parser<T> parser, Message message) {
    try {
      return parser.parseFrom(message.toByteString());
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String pad(String base64) {
    String s = base64.replace('-', '+').replace('_', '/');
    return s + "=".repeat((4 - s.length() % 4) % 4);
  }

  /** REST JSON of a message: see the class comment. */
  static JsonNode toJson(Message message) {
    Descriptor type = message.getDescriptorForType();
    switch (type.getFullName()) {
      case "google.protobuf.Struct":
        return struct(as(Struct.parser(), message));
      case "google.protobuf.Value":
        return value(as(Value.parser(), message));
      case "google.protobuf.ListValue":
        return list(as(ListValue.parser(), message));
      case "google.protobuf.Timestamp":
        return NODES.textNode(Timestamps.toString(as(Timestamp.parser(), message)));
      default:
        break;
    }
    ObjectNode out = NODES.objectNode();
    for (FieldDescriptor field : type.getFields()) {
      if (field.isMapField()) {
        ObjectNode map = out.putObject(field.getJsonName());
        FieldDescriptor valueField = field.getMessageType().findFieldByName("value");
        for (Object entry : (List<?>) message.getField(field)) {
          Message e = (Message) entry;
          Object key = e instanceof MapEntry ? ((MapEntry<?, ?>) e).getKey() : e.getField(e.getDescriptorForType().findFieldByName("key"));
          map.set(String.valueOf(key), scalar(valueField, e.getField(valueField)));
        }
      } else if (field.isRepeated()) {
        ArrayNode items = out.putArray(field.getJsonName());
        for (Object item : (List<?>) message.getField(field)) {
          items.add(scalar(field, item));
        }
      } else {
        // Numbers and booleans are given at their defaults too (a job with no retries left has
        // retriesRemaining 0); texts only when not empty, fields with presence only when set.
        if (field.hasPresence() && !message.hasField(field)) {
          continue;
        }
        Object value = message.getField(field);
        if ("".equals(value)) {
          continue;
        }
        out.set(field.getJsonName(), scalar(field, value));
      }
    }
    ProtoJson.foldLegacy(type, out, false); // the messages within were read by this, folded
    return out;
  }

  private static JsonNode scalar(FieldDescriptor field, Object value) {
    switch (field.getJavaType()) {
      case MESSAGE:
        return toJson((Message) value);
      case ENUM:
        return NODES.textNode(((EnumValueDescriptor) value).getName());
      case BYTE_STRING:
        return NODES.textNode(Base64.getEncoder().encodeToString(((ByteString) value).toByteArray()));
      case LONG:
        return NODES.numberNode((Long) value);
      case INT:
        return NODES.numberNode((Integer) value);
      case DOUBLE:
        return NODES.numberNode((Double) value);
      case FLOAT:
        return NODES.numberNode((Float) value);
      case BOOLEAN:
        return NODES.booleanNode((Boolean) value);
      default:
        return NODES.textNode(String.valueOf(value));
    }
  }

  private static ObjectNode struct(Struct struct) {
    ObjectNode out = NODES.objectNode();
    for (Map.Entry<String, Value> e : struct.getFieldsMap().entrySet()) {
      out.set(e.getKey(), value(e.getValue()));
    }
    return out;
  }

  private static ArrayNode list(ListValue list) {
    ArrayNode out = NODES.arrayNode();
    list.getValuesList().forEach(v -> out.add(value(v)));
    return out;
  }

  private static JsonNode value(Value value) {
    switch (value.getKindCase()) {
      case NUMBER_VALUE: {
        double d = value.getNumberValue();
        if (d == Math.rint(d) && Math.abs(d) <= EXACT && !Double.isInfinite(d)) {
          long whole = (long) d;
          return whole == (int) whole ? NODES.numberNode((int) whole) : NODES.numberNode(whole);
        }
        return NODES.numberNode(d);
      }
      case STRING_VALUE:
        return NODES.textNode(value.getStringValue());
      case BOOL_VALUE:
        return NODES.booleanNode(value.getBoolValue());
      case STRUCT_VALUE:
        return struct(value.getStructValue());
      case LIST_VALUE:
        return list(value.getListValue());
      default:
        return NODES.nullNode();
    }
  }
}
