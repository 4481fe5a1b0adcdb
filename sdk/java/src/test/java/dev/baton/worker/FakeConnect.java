package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Descriptors.MethodDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.util.JsonFormat;
import com.sun.net.httpserver.HttpExchange;
import dev.baton.workflow.v1.EngineProto;
import dev.baton.workflow.v1.Problem;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;

/**
 * The fake's Connect side, written as the engine serves it (docs/rpc.md) and independently of the
 * SDK's codec: a binary RPC becomes the REST request it mirrors (path parameters into the path,
 * the rest into the query or the body), the fake's REST answer becomes the response message, a
 * problem the Connect error carrying it.
 */
final class FakeConnect {
  static final String PREFIX = "/rpc/workflow.v1.WorkflowEngine/";

  private FakeConnect() {}

  static void handle(FakeBaton fake, HttpExchange exchange) throws IOException {
    int status;
    byte[] out;
    String type = "application/json";
    try {
      String rpc = exchange.getRequestURI().getPath().substring(PREFIX.length());
      MethodDescriptor method = EngineProto.getDescriptor().findServiceByName("WorkflowEngine").findMethodByName(rpc);
      if (method == null || !"POST".equals(exchange.getRequestMethod())
          || !Connect.PROTO.equals(exchange.getRequestHeaders().getFirst("content-type"))) {
        send(exchange, 404, error("unimplemented", "no " + rpc + " (POST application/proto)", null), "application/json");
        return;
      }
      byte[] raw = exchange.getRequestBody().readAllBytes();
      DynamicMessage message = DynamicMessage.parseFrom(method.getInputType(), raw);
      ObjectNode fields = (ObjectNode) FakeBaton.JSON.readTree(JsonFormat.printer().print(message));
      Connect.Twin twin = twin(rpc, fields);
      String path = twin.template();
      for (String name : twin.params()) {
        String value = fields.remove(name).asText();
        path = path.replace("{" + name + "}", value); // as the REST side records it: decoded
      }
      JsonNode body = null;
      StringBuilder query = new StringBuilder();
      if (twin.method().equals("GET") || twin.method().equals("DELETE")) {
        for (Map.Entry<String, JsonNode> e : fields.properties()) {
          query.append(query.length() == 0 ? "" : "&").append(e.getKey()).append('=')
              .append(URLEncoder.encode(e.getValue().asText(), StandardCharsets.UTF_8));
        }
      } else {
        body = twin.bodyField() != null ? fields.get(twin.bodyField()) : fields;
      }
      FakeBaton.Request request =
          new FakeBaton.Request(twin.method(), path, Map.copyOf(exchange.getRequestHeaders()), body, raw,
              query.length() == 0 ? null : query.toString());
      FakeBaton.Answer answer = fake.answer(request);
      answer.headers().forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
      if (answer.status() < 300) {
        DynamicMessage.Builder response = DynamicMessage.newBuilder(method.getOutputType());
        if (answer.body() != null) {
          JsonFormat.parser().ignoringUnknownFields().merge(FakeBaton.JSON.writeValueAsString(answer.body()), response);
        }
        status = 200;
        out = response.build().toByteArray();
        type = Connect.PROTO;
      } else {
        JsonNode problem = FakeBaton.JSON.valueToTree(answer.body());
        status = httpStatus(answer.status());
        out = error(code(answer.status()), problem.path("detail").asText(""), problem);
      }
    } catch (Exception e) {
      status = 500;
      out = error("internal", e.toString(), null);
    }
    send(exchange, status, out, type);
  }

  private static Connect.Twin twin(String rpc, ObjectNode fields) {
    for (Connect.Twin twin : Connect.TWINS) {
      if (twin.rpc().equals(rpc) && twin.params().stream().allMatch(p -> !fields.path(p).asText("").isEmpty())) {
        return twin;
      }
    }
    throw new IllegalArgumentException(rpc + " lacks a path field");
  }

  static String code(int status) {
    switch (status) {
      case 400: case 422: return "invalid_argument";
      case 401: case 403: return "unauthenticated";
      case 404: return "not_found";
      case 409: return "failed_precondition";
      case 413: case 429: return "resource_exhausted";
      case 503: return "unavailable";
      default: return "internal";
    }
  }

  static int httpStatus(int rest) {
    switch (rest) {
      case 422: case 409: return 400;
      case 413: return 429;
      default: return rest;
    }
  }

  static byte[] error(String code, String message, JsonNode problem) throws IOException {
    ObjectNode body = FakeBaton.JSON.createObjectNode().put("code", code).put("message", message);
    if (problem != null && problem.isObject()) {
      Problem.Builder p = Problem.newBuilder();
      JsonFormat.parser().ignoringUnknownFields().merge(FakeBaton.JSON.writeValueAsString(problem), p);
      ArrayNode details = body.putArray("details");
      details.addObject().put("type", "workflow.v1.Problem")
          .put("value", Base64.getEncoder().withoutPadding().encodeToString(p.build().toByteArray()))
          .set("debug", problem);
    }
    return FakeBaton.JSON.writeValueAsBytes(body);
  }

  private static void send(HttpExchange exchange, int status, byte[] out, String type) throws IOException {
    exchange.getResponseHeaders().add("content-type", type);
    exchange.sendResponseHeaders(status, out.length == 0 ? -1 : out.length);
    if (out.length > 0) {
      try (OutputStream os = exchange.getResponseBody()) {
        os.write(out);
      }
    }
    exchange.close();
  }
}
