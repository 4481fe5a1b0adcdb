package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.baton.workflow.v1.Definition;
import dev.baton.workflow.v1.Job;
import dev.baton.workflow.v1.PollJobsResponse;
import dev.baton.workflow.v1.Step;
import java.security.MessageDigest;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;

/** The Connect wire itself: what goes out, how answers and errors come back. */
class ConnectTest {
  private FakeBaton fake;

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeBaton(Protocol.CONNECT);
  }

  @AfterEach
  void tearDown() {
    fake.close();
  }

  @Test
  void oneSettingChoosesTheWire() {
    Map<String, String> env = Map.of(Env.PROTOCOL, "connect");
    assertEquals(Protocol.CONNECT, BatonClient.builder().url(fake.url()).environment(env).build().protocol());
    assertEquals(Protocol.REST, BatonClient.builder().url(fake.url()).environment(Map.of()).build().protocol());
    assertEquals(Protocol.REST,
        BatonClient.builder().url(fake.url()).environment(env).protocol(Protocol.REST).build().protocol(),
        "the builder's option wins over BATON_PROTOCOL");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> BatonClient.builder().url(fake.url()).environment(Map.of(Env.PROTOCOL, "grpc")).build());
    assertEquals("BATON_PROTOCOL must be rest or connect, not 'grpc'", e.getMessage());
  }

  @Test
  void aCallGoesAsItsRpcInBinary() throws Exception {
    fake.addJob("charge", Map.of("amount", 3));
    List<JsonNode> jobs = fake.client().pollJobs("w1", List.of("charge"), 5, 0, RetryPolicy.NONE);
    FakeBaton.Request poll = fake.requests("/v1/jobs/poll").get(0);
    assertEquals(Connect.PROTO, poll.header("content-type"));
    assertEquals(Connect.PROTO, poll.header("accept"), "API Gateway answers binary only when Accept names it");
    assertEquals("1", poll.header("connect-protocol-version"));
    assertEquals("w1", poll.body().path("workerId").asText());
    assertEquals(5, poll.body().path("maxJobs").asInt());
    assertEquals(1, jobs.size());
    JsonNode job = jobs.get(0);
    assertTrue(job.path("input").path("amount").isInt(), "a whole Struct number stays an integer: " + job);
    assertEquals(2, job.path("retriesRemaining").asInt());
  }

  @Test
  void answersReadAsRestJson() throws Exception {
    Job job = Job.newBuilder().setId("j1").setJobType("t").setAttempt(1).setRetriesRemaining(0)
        .setInput(Value.newBuilder().setStructValue(
            Struct.newBuilder().putFields("n", Value.newBuilder().setNumberValue(3).build())
                .putFields("x", Value.newBuilder().setNumberValue(1.5).build())))
        .build();
    byte[] bytes = PollJobsResponse.newBuilder().addJobs(job).build().toByteArray();
    JsonNode answer = Connect.response("POST", "/v1/jobs/poll", bytes);
    JsonNode read = answer.path("jobs").get(0);
    assertEquals(0, read.path("retriesRemaining").asInt());
    assertTrue(read.path("retriesRemaining").isNumber(), "numbers at their defaults are given, as REST does");
    assertFalse(read.has("instanceId"), "an empty text is left out, as REST leaves it null");
    assertTrue(read.path("input").path("n").isInt(), read.toString());
    assertEquals(1.5, read.path("input").path("x").asDouble());
  }

  @Test
  void pathAndQueryFieldsGoInTheMessage() {
    fake.routes.put("/v1/jobs/a b/claim", r -> FakeBaton.Answer.of(200, Map.of("id", "a b", "jobType", "t")));
    JsonNode claimed = fake.client().claimJob("a b", "w1", 2);
    assertEquals("a b", claimed.path("id").asText());
    FakeBaton.Request claim = fake.requests("/v1/jobs/a b/claim").get(0);
    assertEquals("w1", claim.body().path("workerId").asText());
    assertFalse(claim.body().has("id"), "the id goes in the path, not the body");
    fake.routes.put("/v1/instances", r -> FakeBaton.Answer.of(200, Map.of("items", List.of())));
    fake.client().call("GET", "/v1/instances?definitionName=order&limit=5", null, true);
    String query = fake.requests("/v1/instances").get(0).query();
    assertTrue(query.contains("definitionName=order") && query.contains("limit=5"), query);
  }

  @Test
  void aProblemComesBackAsTheSameException() {
    fake.routes.put("/v1/jobs/poll", r -> {
      ObjectNode p = FakeBaton.problem(422, "Validation failed", "1 problem found");
      p.put("type", "https://baton.dev/problems/validation-failed");
      p.putArray("errors").addObject().put("path", "maxJobs").put("message", "maxJobs must be at most 100");
      return FakeBaton.Answer.of(422, p);
    });
    BatonApiException.Invalid e = assertThrows(BatonApiException.Invalid.class,
        () -> fake.client().pollJobs("w", List.of("t"), 1, 0, RetryPolicy.NONE));
    assertEquals(422, e.status(), "the problem's status, not the Connect error's 400");
    assertEquals("https://baton.dev/problems/validation-failed", e.type());
    assertEquals("maxJobs", e.errors().get(0).path());
    assertEquals("1 problem found", e.detail());
  }

  @Test
  void aThrottledCallIsRetriedAfterItsRetryAfter() {
    int[] calls = {0};
    fake.routes.put("/v1/jobs/heartbeat", r -> ++calls[0] == 1
        ? new FakeBaton.Answer(429, FakeBaton.problem(429, "Too Many Requests", "slow down"), Map.of("Retry-After", "0.05"))
        : null);
    BatonClient client = BatonClient.builder().url(fake.url()).apiKey("k").environment(Map.of())
        .protocol(Protocol.CONNECT)
        .retry(RetryPolicy.builder().initialInterval(Duration.ofMillis(1)).maximumAttempts(3).build())
        .build();
    client.call("POST", "/v1/jobs/heartbeat", Map.of("jobId", "j", "workerId", "w"), true);
    assertEquals(2, calls[0]);
  }

  @Test
  void anErrorWithoutAProblemKeepsItsCodeAndMessage() {
    ObjectNode problem = Connect.problem(
        404, "{\"code\":\"unimplemented\",\"message\":\"no such method\"}".getBytes(java.nio.charset.StandardCharsets.UTF_8));
    assertEquals("Unimplemented", problem.path("title").asText());
    assertEquals("no such method", problem.path("detail").asText());
    assertEquals(404, problem.path("status").asInt());
    ObjectNode refused = Connect.problem(
        403, "{\"code\":\"unauthenticated\",\"message\":\"the API key is not valid\"}".getBytes(java.nio.charset.StandardCharsets.UTF_8));
    assertEquals("Forbidden", refused.path("title").asText(), "titled as REST's 403");
  }

  @Test
  void aCallWithoutAnRpcIsRefusedBeforeItIsSent() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> fake.client().call("GET", "/v1/metrics", null, true));
    assertTrue(e.getMessage().contains("GET /v1/metrics has no RPC twin"), e.getMessage());
    assertTrue(fake.requests.isEmpty());
  }

  @Test
  void sigV4SignsThePostOfTheBinaryBody() throws Exception {
    AwsSigV4Auth auth = AwsSigV4Auth.builder()
        .credentials(StaticCredentialsProvider.create(AwsBasicCredentials.create("AKID", "SECRET")))
        .region("us-east-1").service("execute-api")
        .clock(Clock.fixed(Instant.parse("2026-11-26T12:00:00Z"), ZoneOffset.UTC))
        .build();
    BatonClient client = BatonClient.builder().url(fake.url()).auth(auth).environment(Map.of())
        .protocol(Protocol.CONNECT).build();
    client.pollJobs("w1", List.of("t"), 1, 0, RetryPolicy.NONE);
    FakeBaton.Request poll = fake.requests("/v1/jobs/poll").get(0);
    String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(poll.raw()));
    assertEquals(sha, poll.header("x-amz-content-sha256"), "the signature covers the protobuf bytes sent");
    String authorization = poll.header("authorization");
    assertTrue(authorization.contains("SignedHeaders=connect-protocol-version;content-type;host;"), authorization);
  }

  /**
   * A step's four widened fields kept their old numbers as deprecated legacy_* fields: they never
   * show in REST JSON, and an engine older than this proto, which sets only them, still reads.
   */
  @Test
  @SuppressWarnings("deprecation")
  void aStepsLegacyFieldsNeverShowInRestJson() throws Exception {
    Struct old = Struct.newBuilder().putFields("n", Value.newBuilder().setNumberValue(1).build()).build();
    Definition definition = Definition.newBuilder()
        .setName("d")
        .addSteps(Step.newBuilder().setId("a") // today's engine: both, the new field wins
            .setInput(Value.newBuilder().setStringValue("${workflow.input}"))
            .setLegacyInput(old)
            .setOptional(Value.newBuilder().setBoolValue(true))
            .setLegacyOptional(true))
        .addSteps(Step.newBuilder().setId("b") // an older engine: the old fields alone
            .setLegacyInput(old)
            .setLegacyDefinitionVersion(2)
            .setLegacyPermissive(false)
            .addSteps(Step.newBuilder().setId("c").setLegacyInput(old)))
        .build();
    JsonNode read = Connect.response("GET", "/v1/definitions/d", definition.toByteArray());
    JsonNode typed = ProtoJson.toJson(definition); // what the typed API sends
    for (JsonNode json : List.of(read, typed)) {
      assertFalse(json.toString().contains("legacy"), json.toString());
      JsonNode a = json.path("steps").get(0);
      JsonNode b = json.path("steps").get(1);
      assertEquals("${workflow.input}", a.path("input").asText(), json.toString());
      assertTrue(a.path("optional").asBoolean(), json.toString());
      assertEquals(1, b.path("input").path("n").asInt(), json.toString());
      assertEquals(2, b.path("definitionVersion").asInt(), json.toString());
      assertTrue(b.path("permissive").isBoolean() && !b.path("permissive").asBoolean(), json.toString());
      assertEquals(1, b.path("steps").get(0).path("input").path("n").asInt(), json.toString());
    }
  }
}
