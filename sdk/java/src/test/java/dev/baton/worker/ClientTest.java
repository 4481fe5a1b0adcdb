package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ClientTest {
  FakeBaton fake;

  /** The wire under test ({@code *ConnectTest} runs these tests over Connect). */
  Protocol protocol() {
    return Protocol.REST;
  }

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeBaton(protocol());
  }

  @AfterEach
  void tearDown() {
    fake.close();
  }

  @Test
  void aForbiddenAnswerNamesWhereTheKeyCameFrom(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("api-key"), "local-key\n");
    fake.routes.put("/v1/jobs/poll", r -> FakeBaton.Answer.of(403, FakeBaton.problem(403, "Forbidden", "invalid API key")));
    BatonClient client = BatonClient.builder().url(fake.url()).protocol(protocol()).environment(Map.of(Env.DATA_DIR, dir.toString())).build();
    BatonApiException.Forbidden e = assertThrows(BatonApiException.Forbidden.class,
        () -> client.pollJobs("w", List.of("t"), 1, 0, RetryPolicy.NONE));
    assertEquals(403, e.status());
    assertEquals("invalid API key", e.detail());
    assertTrue(e.getMessage().contains(dir.resolve("api-key").toAbsolutePath().toString()), e.getMessage());
    assertTrue(e.getMessage().contains("$BATON_DATA_DIR"), e.getMessage());
    assertEquals("local-key", fake.requests.get(0).header("x-api-key"));
  }

  @Test
  void keyPrecedence(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("api-key"), "local-key");
    Map<String, String> env = Map.of(Env.DATA_DIR, dir.toString(), Env.API_KEY, "env-key");
    assertEquals("the API key from BATON_API_KEY", Env.apiKey("http://127.0.0.1:1", env).orElseThrow().describe());
    assertTrue(Env.apiKey("http://127.0.0.1:1", Map.of(Env.DATA_DIR, dir.toString())).isPresent());
    assertTrue(Env.apiKey("https://api.example.com", Map.of(Env.DATA_DIR, dir.toString())).isEmpty(),
        "a local key is never sent to another host");
    BatonClient explicit = BatonClient.builder().url(fake.url()).protocol(protocol()).apiKey("arg-key").environment(env).build();
    explicit.call("GET", "/v1/config", null, true);
    assertEquals("arg-key", fake.requests.get(0).header("x-api-key"));
  }

  @Test
  void unauthorizedWithoutAKeySaysHowToGiveOne() throws Exception {
    fake.routes.put("/v1/config", r -> FakeBaton.Answer.of(401, FakeBaton.problem(401, "Unauthorized", "missing x-api-key")));
    BatonClient client = BatonClient.builder().url(fake.url()).protocol(protocol()).environment(Map.of(Env.DATA_DIR, "/nonexistent")).build();
    BatonApiException e = assertThrows(BatonApiException.Unauthorized.class, () -> client.call("GET", "/v1/config", null, true));
    assertTrue(e.getMessage().contains("no credentials were sent"), e.getMessage());
  }

  @Test
  void retriesOn429And503ButNeverOnOther4xx() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    fake.routes.put("/v1/jobs/heartbeat", r -> calls.incrementAndGet() < 3
        ? FakeBaton.Answer.of(calls.get() == 1 ? 429 : 503, FakeBaton.problem(503, "Busy", "try later"))
        : null);
    BatonClient client = BatonClient.builder().url(fake.url()).protocol(protocol()).apiKey("k")
        .retry(RetryPolicy.builder().initialInterval(java.time.Duration.ofMillis(10)).build()).build();
    client.heartbeat("j", "w", 1, RetryPolicy.builder().initialInterval(java.time.Duration.ofMillis(10)).build());
    assertEquals(3, calls.get());

    AtomicInteger refused = new AtomicInteger();
    fake.routes.put("/v1/jobs/fail", r -> {
      refused.incrementAndGet();
      return FakeBaton.Answer.of(422, FakeBaton.problem(422, "Invalid", "errorMessage: too long"));
    });
    BatonApiException.Invalid e = assertThrows(BatonApiException.Invalid.class,
        () -> client.failJob("j", "w", "x", true, null, 1, RetryPolicy.DEFAULT));
    assertEquals(1, refused.get());
    assertEquals("errorMessage: too long", e.detail());
  }

  @Test
  void problemFieldsAreKept() {
    fake.routes.put("/v1/instances", r -> {
      var p = FakeBaton.problem(422, "Validation failed", "2 problems");
      p.putArray("errors").addObject().put("path", "$.definitionName").put("message", "required");
      return FakeBaton.Answer.of(422, p);
    });
    BatonApiException e = assertThrows(BatonApiException.class,
        () -> fake.client().api().startInstance(dev.baton.workflow.v1.StartInstanceRequest.getDefaultInstance()));
    assertEquals(422, e.status());
    assertEquals("Validation failed", e.title());
    assertEquals(List.of(new BatonApiException.ProblemItem("$.definitionName", "required")), e.errors());
    assertEquals("422 Validation failed: 2 problems ($.definitionName: required)", e.getMessage());
  }
}
