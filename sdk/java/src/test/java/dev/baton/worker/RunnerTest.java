package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class RunnerTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
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

  private Runner runner(Registry registry, RunnerOptions.Builder options) {
    return Runner.builder(registry).client(fake.client()).options(options.workerId("w1").build()).build();
  }

  @Test
  void completesInBatchesWithTheAttempt() throws Exception {
    for (int i = 0; i < 20; i++) {
      fake.addJob("echo", Map.of("n", i));
    }
    Registry registry = new Registry().register("echo", job -> Map.of("echoed", job.input()));
    try (Runner runner = runner(registry, RunnerOptions.builder().parallelism(4).flushInterval(Duration.ofMillis(50)))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 20, WAIT, "20 results");
    }
    List<JsonNode> items = fake.batchItems();
    assertTrue(fake.requests("/v1/jobs/complete-batch").size() < 20, "results were batched");
    for (JsonNode item : items) {
      assertEquals(1, item.path("attempt").asInt(), "the attempt goes back with the result");
      assertEquals("w1", item.path("workerId").asText());
      assertTrue(item.path("variablesToSet").path("echoed").has("n"));
    }
    assertEquals(0, fake.requests("/v1/jobs/complete").size());
  }

  @Test
  void pollsNeverAskForMoreThanFreeSlots() throws Exception {
    for (int i = 0; i < 30; i++) {
      fake.addJob("slow", Map.of());
    }
    AtomicInteger running = new AtomicInteger();
    AtomicInteger most = new AtomicInteger();
    Registry registry = new Registry().register("slow", job -> {
      most.accumulateAndGet(running.incrementAndGet(), Math::max);
      Thread.sleep(20);
      running.decrementAndGet();
      return null;
    });
    try (Runner runner = runner(registry, RunnerOptions.builder().parallelism(3).prefetch(2).maxJobsPerPoll(10))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 30, WAIT, "30 results");
    }
    assertTrue(most.get() <= 3, "at most 3 handlers at once, saw " + most.get());
    for (FakeBaton.Request poll : fake.requests("/v1/jobs/poll")) {
      assertTrue(poll.body().path("maxJobs").asInt() <= 5, "a poll asked for " + poll.body());
    }
  }

  @Test
  void byDefaultOnePollFillsTheRunningAndThePrefetchedSlots() throws Exception {
    for (int i = 0; i < 64; i++) {
      fake.addJob("echo", Map.of("n", i));
    }
    Registry registry = new Registry().register("echo", job -> Map.of("echoed", job.input()));
    try (Runner runner = runner(registry, RunnerOptions.builder().parallelism(8))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 64, WAIT, "64 results");
    }
    // 8 running and 8 prefetched: the first poll asks for 16, and 64 jobs take few polls.
    assertEquals(16, fake.requests("/v1/jobs/poll").get(0).body().path("maxJobs").asInt());
    assertTrue(fake.requests("/v1/jobs/poll").size() <= 12, fake.requests("/v1/jobs/poll").size() + " polls");
  }

  @Test
  void heartbeatsExtendTheLeaseWithTheAttempt() throws Exception {
    fake.lease = Duration.ofMillis(600);
    fake.addJob("long", Map.of());
    Registry registry = new Registry().register("long", job -> {
      Thread.sleep(1500);
      return Map.of("done", true);
    });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 1, WAIT, "the result");
    }
    List<FakeBaton.Request> beats = fake.requests("/v1/jobs/heartbeat");
    assertTrue(beats.size() >= 2, "heartbeats at half the lease: " + beats.size());
    assertEquals(1, beats.get(0).body().path("attempt").asInt());
    assertEquals("w1", beats.get(0).body().path("workerId").asText());
  }

  @Test
  void aLostLeaseInterruptsTheHandler() throws Exception {
    fake.lease = Duration.ofMillis(400);
    fake.routes.put("/v1/jobs/heartbeat", r -> FakeBaton.Answer.of(409, FakeBaton.problem(409, "Conflict", "job is held by another worker")));
    fake.addJob("long", Map.of());
    AtomicBoolean interrupted = new AtomicBoolean();
    AtomicBoolean sawLost = new AtomicBoolean();
    CountDownLatch done = new CountDownLatch(1);
    Registry registry = new Registry().register("long", job -> {
      try {
        Thread.sleep(5000);
      } catch (InterruptedException e) {
        interrupted.set(true);
        sawLost.set(job.isLeaseLost());
        throw e;
      } finally {
        done.countDown();
      }
      return null;
    });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      assertTrue(done.await(3, TimeUnit.SECONDS), "the handler stopped before its 5 s sleep");
    }
    assertTrue(interrupted.get());
    assertTrue(sawLost.get());
  }

  @Test
  void backsOffOn503AndKeepsPolling() throws Exception {
    AtomicInteger refusals = new AtomicInteger();
    fake.routes.put("/v1/jobs/poll", r -> refusals.incrementAndGet() <= 2
        ? new FakeBaton.Answer(503, FakeBaton.problem(503, "Service Unavailable", "database unavailable"), Map.of("retry-after", "0"))
        : null);
    fake.addJob("echo", Map.of());
    Registry registry = new Registry().register("echo", job -> Map.of());
    RetryPolicy fast = RetryPolicy.builder().initialInterval(Duration.ofMillis(20)).maximumInterval(Duration.ofMillis(50)).maximumAttempts(0).build();
    try (Runner runner = runner(registry, RunnerOptions.builder().pollErrors(fast))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 1, WAIT, "the result after two 503s");
    }
    assertTrue(refusals.get() >= 3);
  }

  @Test
  void aRefusedResultIsNotRetriedButFailsTheJob() throws Exception {
    AtomicInteger batches = new AtomicInteger();
    fake.routes.put("/v1/jobs/complete-batch", r -> {
      batches.incrementAndGet();
      JsonNode item = r.body().path("results").get(0);
      if (item.has("failure")) {
        return null;
      }
      return FakeBaton.Answer.of(200, Map.of("results", List.of(Map.of("jobId", item.path("jobId").asText(), "outcome", "INVALID", "error", "variablesToSet: too deep"))));
    });
    fake.addJob("echo", Map.of());
    Registry registry = new Registry().register("echo", job -> Map.of("x", 1));
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> batches.get() == 2, WAIT, "the completion, then the failure");
      Thread.sleep(100);
    }
    List<JsonNode> items = fake.batchItems();
    assertEquals(2, items.size(), "no retry of a refused result: " + items);
    JsonNode failure = items.get(1).path("failure");
    assertFalse(failure.path("retryable").asBoolean(true));
    assertTrue(failure.path("errorMessage").asText().contains("too deep"));
  }

  @Test
  void aNaNResultFailsTheJobNonRetryably() throws Exception {
    fake.addJob("bad", Map.of());
    Registry registry = new Registry().register("bad", job -> Map.of("value", List.of(1, Double.NaN)));
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 1, WAIT, "the failure");
    }
    JsonNode failure = fake.batchItems().get(0).path("failure");
    assertFalse(failure.path("retryable").asBoolean(true));
    assertEquals("the handler's result cannot be sent: $.value[1] is NaN, which is not JSON", failure.path("errorMessage").asText());
  }

  @Test
  void handlerOutcomes() throws Exception {
    String plain = fake.addJob("plain", Map.of());
    String delayed = fake.addJob("delayed", Map.of());
    String refused = fake.addJob("refused", Map.of());
    Registry registry = new Registry()
        .register("plain", job -> { throw new IllegalStateException("boom"); })
        .register("delayed", job -> { throw new JobException("later", Duration.ofMillis(1500)); })
        .register("refused", job -> { throw new NonRetryableException("no"); });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 3, WAIT, "three failures");
    }
    for (JsonNode item : fake.batchItems()) {
      JsonNode f = item.path("failure");
      String id = item.path("jobId").asText();
      if (id.equals(plain)) {
        assertEquals("IllegalStateException: boom", f.path("errorMessage").asText());
        assertTrue(f.path("retryable").asBoolean());
        assertFalse(f.has("nextRetryDelaySeconds"));
      } else if (id.equals(delayed)) {
        assertEquals(1.5, f.path("nextRetryDelaySeconds").asDouble());
        assertTrue(f.path("retryable").asBoolean());
      } else {
        assertEquals(refused, id);
        assertFalse(f.path("retryable").asBoolean());
      }
    }
  }

  /** The item of {@code jobId} among the batch items sent. */
  private JsonNode itemOf(String jobId) {
    return fake.batchItems().stream().filter(i -> i.path("jobId").asText().equals(jobId)).findFirst()
        .orElseThrow(() -> new AssertionError("no item for " + jobId + ": " + fake.batchItems()));
  }

  /** The /v1/jobs/fail body of {@code jobId}. */
  private JsonNode failOf(String jobId) {
    return fake.requests("/v1/jobs/fail").stream().map(FakeBaton.Request::body)
        .filter(b -> b.path("jobId").asText().equals(jobId)).findFirst()
        .orElseThrow(() -> new AssertionError("no /v1/jobs/fail for " + jobId));
  }

  /** What the SDK logged (slf4j-simple writes to System.err) while {@code body} ran. */
  private static String logged(ThrowingRunnable body) throws Exception {
    PrintStream saved = System.err;
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    System.setErr(new PrintStream(buffer, true, StandardCharsets.UTF_8));
    try {
      body.run();
    } finally {
      System.setErr(saved);
    }
    String text = buffer.toString(StandardCharsets.UTF_8);
    saved.print(text);
    return text;
  }

  interface ThrowingRunnable {
    void run() throws Exception;
  }

  @Test
  void aFailureCarriesItsOutputInTheBatch() throws Exception {
    String refused = fake.addJob("refused", Map.of("k", "v"));
    String delayed = fake.addJob("delayed", Map.of());
    String plain = fake.addJob("plain", Map.of());
    Registry registry = new Registry()
        .register("refused", job -> { throw new NonRetryableException("refused", Map.of("code", 42, "input", job.input())); })
        .register("delayed", job -> { throw new JobException("later", Duration.ofSeconds(2), Map.of("partial", List.of(1, 2))); })
        .register("plain", job -> { throw new NonRetryableException("no output"); });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 3, WAIT, "three failures");
    }
    JsonNode f = itemOf(refused).path("failure");
    assertEquals("refused", f.path("errorMessage").asText());
    assertFalse(f.path("retryable").asBoolean(true));
    assertEquals(42, f.path("output").path("code").asInt());
    assertEquals("v", f.path("output").path("input").path("k").asText());
    f = itemOf(delayed).path("failure");
    assertTrue(f.path("retryable").asBoolean());
    assertEquals(2.0, f.path("nextRetryDelaySeconds").asDouble());
    assertEquals(2, f.path("output").path("partial").get(1).asInt());
    f = itemOf(plain).path("failure");
    assertFalse(f.has("output"), "no output when none was given: " + f);
    assertEquals(0, fake.requests("/v1/jobs/fail").size());
  }

  @Test
  void withoutBatchingAFailureCarriesItsOutputOnTheFailRoute() throws Exception {
    String with = fake.addJob("with", Map.of("k", "v"));
    String without = fake.addJob("without", Map.of());
    Registry registry = new Registry()
        .register("with", job -> { throw new NonRetryableException("refused", Map.of("code", 42, "input", job.input())); })
        .register("without", job -> { throw new JobException("plain"); });
    try (Runner runner = runner(registry, RunnerOptions.builder().batchResults(false))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.requests("/v1/jobs/fail").size() == 2, WAIT, "two failures");
    }
    JsonNode body = failOf(with);
    assertEquals("refused", body.path("errorMessage").asText());
    assertFalse(body.path("retryable").asBoolean(true));
    assertEquals(42, body.path("output").path("code").asInt());
    assertEquals("v", body.path("output").path("input").path("k").asText());
    assertFalse(failOf(without).has("output"), "no output when none was given");
    assertEquals(0, fake.requests("/v1/jobs/complete-batch").size());
  }

  @Test
  void aServerWithoutTheBatchRouteGetsTheFailureOutputOnTheFailRoute() throws Exception {
    fake.routes.put("/v1/jobs/complete-batch", r -> FakeBaton.Answer.of(404, FakeBaton.problem(404, "Not Found", "no route")));
    String id = fake.addJob("with", Map.of());
    Registry registry = new Registry()
        .register("with", job -> { throw new JobException("retry me", Map.of("code", 42)); });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.requests("/v1/jobs/fail").size() == 1, WAIT, "the failure, alone");
    }
    JsonNode body = failOf(id);
    assertTrue(body.path("retryable").asBoolean());
    assertEquals(42, body.path("output").path("code").asInt());
  }

  @Test
  void aFailureOutputThatIsNotJsonIsLeftOutAndTheFailureStillGoes() throws Exception {
    String nan = fake.addJob("nan", Map.of());
    String object = fake.addJob("object", Map.of());
    String time = fake.addJob("time", Map.of());
    String cycle = fake.addJob("cycle", Map.of());
    Map<String, Object> itself = new HashMap<>();
    itself.put("me", itself);
    Registry registry = new Registry()
        .register("cycle", job -> { throw new NonRetryableException("cycle", itself); })
        .register("nan", job -> { throw new NonRetryableException("nan", Map.of("value", List.of(1, Double.NaN))); })
        .register("object", job -> { throw new NonRetryableException("object", Map.of("thing", new Object())); })
        .register("time", job -> { throw new JobException("time", Duration.ZERO, Map.of("at", Instant.now())); });
    String log = logged(() -> {
      try (Runner runner = runner(registry, RunnerOptions.builder())) {
        runner.start();
        FakeBaton.waitFor(() -> fake.batchItems().size() == 4, WAIT, "four failures");
      }
    });
    for (String id : List.of(nan, object, time, cycle)) {
      JsonNode f = itemOf(id).path("failure");
      assertFalse(f.has("output"), "the output is left out: " + f);
      assertTrue(f.has("errorMessage") && f.has("retryable"), "the failure goes: " + f);
    }
    assertEquals("nan", itemOf(nan).path("failure").path("errorMessage").asText());
    assertFalse(itemOf(nan).path("failure").path("retryable").asBoolean(true));
    assertEquals(0.0, itemOf(time).path("failure").path("nextRetryDelaySeconds").asDouble(-1));
    assertTrue(log.contains("the failure's output cannot be sent: $.value[1] is NaN, which is not JSON; the failure is sent without it"), log);
    assertTrue(log.contains("the failure's output cannot be sent: it does not serialise to JSON (No serializer found for class java.lang.Object"), log);
    assertTrue(log.contains("java.time.Instant"), log);
    assertTrue(log.contains("the failure's output cannot be sent: it is nested too deeply (or contains itself)"), log);
  }

  @Test
  void aFailureOutputAboveTheStepOutputSoftLimitIsLeftOut() throws Exception {
    // The fake's stepOutput soft limit is 100 000 bytes.
    String big = fake.addJob("big", Map.of());
    String small = fake.addJob("small", Map.of());
    Registry registry = new Registry()
        .register("big", job -> { throw new NonRetryableException("big", Map.of("blob", "x".repeat(100_000))); })
        .register("small", job -> { throw new NonRetryableException("small", Map.of("blob", "x".repeat(99_000))); });
    String log = logged(() -> {
      try (Runner runner = runner(registry, RunnerOptions.builder())) {
        runner.start();
        FakeBaton.waitFor(() -> fake.batchItems().size() == 2, WAIT, "two failures");
      }
    });
    assertFalse(itemOf(big).path("failure").has("output"));
    assertEquals("big", itemOf(big).path("failure").path("errorMessage").asText());
    assertEquals(99_000, itemOf(small).path("failure").path("output").path("blob").asText().length());
    assertTrue(log.contains("the failure's output cannot be sent: it is 100011 bytes of JSON, above the 100000-byte limit"), log);
    assertEquals(0, fake.requests("/v1/payloads").size(), "a failure's output is never offloaded");
  }

  @Test
  void aFailureOutputIsNeverAbove256KiBWhateverTheSoftLimit() throws Exception {
    fake.routes.put("/v1/config", r -> FakeBaton.Answer.of(200,
        Map.of("payloadLimits", Map.of("stepOutput", Map.of("softLimitBytes", 10_000_000, "hardLimitBytes", 100_000_000)))));
    String big = fake.addJob("big", Map.of());
    String small = fake.addJob("small", Map.of());
    Registry registry = new Registry()
        .register("big", job -> { throw new NonRetryableException("big", Map.of("blob", "x".repeat(300_000))); })
        .register("small", job -> { throw new NonRetryableException("small", Map.of("blob", "x".repeat(200_000))); });
    String log = logged(() -> {
      try (Runner runner = runner(registry, RunnerOptions.builder())) {
        runner.start();
        FakeBaton.waitFor(() -> fake.batchItems().size() == 2, WAIT, "two failures");
      }
    });
    assertFalse(itemOf(big).path("failure").has("output"));
    assertEquals(200_000, itemOf(small).path("failure").path("output").path("blob").asText().length());
    assertTrue(log.contains("above the 262144-byte limit"), log);
  }

  @Test
  void aFailureRefusedWithItsOutputIsSentAgainWithout() throws Exception {
    fake.routes.put("/v1/jobs/complete-batch", r -> {
      JsonNode item = r.body().path("results").get(0);
      if (!item.path("failure").has("output")) {
        return null;
      }
      return FakeBaton.Answer.of(200, Map.of("results", List.of(Map.of("jobId", item.path("jobId").asText(), "outcome", "INVALID", "error", "failure.output: unknown field"))));
    });
    fake.addJob("with", Map.of());
    Registry registry = new Registry()
        .register("with", job -> { throw new NonRetryableException("refused", Map.of("code", 42)); });
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 2, WAIT, "the failure, then again without its output");
      Thread.sleep(100);
    }
    List<JsonNode> items = fake.batchItems();
    assertEquals(2, items.size(), "sent again once: " + items);
    assertTrue(items.get(0).path("failure").has("output"));
    JsonNode again = items.get(1).path("failure");
    assertFalse(again.has("output"));
    assertEquals("refused", again.path("errorMessage").asText());
    assertFalse(again.path("retryable").asBoolean(true));
  }

  @Test
  void withoutBatchingAFailureRefusedWithItsOutputIsSentAgainWithout() throws Exception {
    fake.routes.put("/v1/jobs/fail", r -> r.body().has("output")
        ? FakeBaton.Answer.of(400, FakeBaton.problem(400, "Bad Request", "output: unknown field"))
        : null);
    fake.addJob("with", Map.of());
    Registry registry = new Registry()
        .register("with", job -> { throw new NonRetryableException("refused", Map.of("code", 42)); });
    try (Runner runner = runner(registry, RunnerOptions.builder().batchResults(false))) {
      runner.start();
      FakeBaton.waitFor(() -> fake.requests("/v1/jobs/fail").size() == 2, WAIT, "the failure, then again without its output");
      Thread.sleep(100);
    }
    List<FakeBaton.Request> fails = fake.requests("/v1/jobs/fail");
    assertEquals(2, fails.size(), "sent again once");
    assertTrue(fails.get(0).body().has("output"));
    assertFalse(fails.get(1).body().has("output"));
    assertEquals("refused", fails.get(1).body().path("errorMessage").asText());
  }

  @Test
  void stopDrainsInFlightJobsAndClaimsNothingMore() throws Exception {
    fake.addJob("slow", Map.of());
    CountDownLatch started = new CountDownLatch(1);
    Registry registry = new Registry().register("slow", job -> {
      started.countDown();
      Thread.sleep(500);
      return Map.of("slept", true);
    });
    Runner runner = runner(registry, RunnerOptions.builder());
    runner.start();
    assertTrue(started.await(5, TimeUnit.SECONDS));
    fake.addJob("slow", Map.of()); // claimable, but the runner is stopping
    int pollsBefore = fake.requests("/v1/jobs/poll").size();
    long t0 = System.nanoTime();
    runner.stop();
    assertTrue(System.nanoTime() - t0 > TimeUnit.MILLISECONDS.toNanos(200), "stop waited for the handler");
    assertEquals(1, fake.batchItems().size(), "the in-flight result was sent before stop returned");
    assertEquals(1, fake.queue.size(), "the second job was not claimed");
    assertTrue(fake.requests("/v1/jobs/poll").size() <= pollsBefore + 1);
    assertFalse(runner.isRunning());
    assertEquals(1, fake.requests("/v1/workers/stop").size(), "the stop signal says no more claims");
  }

  /**
   * Every slot busy, so the poll loop waits for one: a stop wakes that wait, and the stop signal
   * goes out at once, while the handler still runs, not when it frees its slot.
   */
  @Test
  void aStopWhileEverySlotIsBusySendsTheStopSignalBeforeTheHandlerEnds() throws Exception {
    fake.addJob("slow", Map.of());
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicBoolean signalledWhileRunning = new AtomicBoolean();
    Registry registry = new Registry().register("slow", job -> {
      started.countDown();
      assertTrue(release.await(20, TimeUnit.SECONDS));
      signalledWhileRunning.set(fake.stopSignalled);
      return Map.of("done", true);
    });
    Runner runner = runner(registry, RunnerOptions.builder().parallelism(1).prefetch(0));
    runner.start();
    assertTrue(started.await(5, TimeUnit.SECONDS));
    runner.requestStop();
    FakeBaton.waitFor(() -> fake.stopSignalled, WAIT, "the stop signal while the handler runs");
    release.countDown();
    assertTrue(runner.awaitTermination(WAIT));
    assertTrue(signalledWhileRunning.get());
    assertEquals(1, fake.batchItems().size(), "the in-flight result was sent");
    assertEquals(1, fake.requests("/v1/workers/stop").size(), "the stop signal, sent once");
  }

  @Test
  void stopSendsTheStopSignalWhenALongPollWaits() throws Exception {
    Registry registry = new Registry().register("idle", job -> null);
    Runner runner = runner(registry, RunnerOptions.builder().longPollWait(Duration.ofSeconds(20)));
    runner.start();
    FakeBaton.waitFor(() -> fake.requests("/v1/jobs/poll").stream().anyMatch(r -> r.body().has("waitSeconds")), WAIT, "a long-poll");
    long t0 = System.nanoTime();
    assertTrue(runner.stop(Duration.ofSeconds(5)));
    assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
    assertEquals("w1", fake.requests("/v1/workers/stop").get(0).body().path("workerId").asText());
  }

  /**
   * The race CI hit: the stop comes while a long-poll is held on the server, which then claims a
   * job for it (the fake claims one once it has the stop signal, as a server answering with what
   * it had claimed). That job is leased to this worker: it must run in the drain, not be dropped.
   */
  @Test
  void aStopDuringALongPollRunsTheJobsThatPollClaimed() throws Exception {
    CountDownLatch held = new CountDownLatch(1);
    fake.routes.put("/v1/jobs/poll", r -> {
      if (r.body().has("waitSeconds")) {
        held.countDown();
        FakeBaton.waitFor(() -> fake.stopSignalled, WAIT, "the stop signal");
        fake.addJob("work", Map.of("n", 1)); // the default answer claims it
      }
      return null;
    });
    AtomicBoolean shuttingDown = new AtomicBoolean();
    Registry registry = new Registry().register("work", job -> {
      shuttingDown.set(job.isShuttingDown());
      return Map.of("ran", true);
    });
    Runner runner = runner(registry, RunnerOptions.builder().longPollWait(Duration.ofSeconds(20)));
    runner.start();
    assertTrue(held.await(10, TimeUnit.SECONDS), "a long-poll is held");
    assertTrue(runner.stop(WAIT), "the runner stopped");
    List<JsonNode> items = fake.batchItems();
    assertEquals(1, items.size(), "the claimed job ran and its result was sent before stop returned: " + items);
    assertTrue(items.get(0).path("variablesToSet").path("ran").asBoolean());
    assertTrue(shuttingDown.get(), "the handler sees the stop");
    assertEquals(1, fake.requests("/v1/workers/stop").size(), "the stop signal, sent once");
    assertEquals(1, fake.requests("/v1/jobs/poll").stream().filter(r -> r.body().has("waitSeconds")).count(), "no poll after the stop");
    assertFalse(runner.isRunning());
  }

  /** A held long-poll that never answers: the stop aborts it after the grace, and returns. */
  @Test
  void aStopAbortsALongPollThatDoesNotAnswerWithinTheGrace() throws Exception {
    CountDownLatch held = new CountDownLatch(1);
    fake.routes.put("/v1/jobs/poll", r -> {
      if (r.body().has("waitSeconds")) {
        held.countDown();
        Thread.sleep(60_000); // ends when the fake closes
      }
      return null;
    });
    Set<Thread> before = longPollThreads();
    Registry registry = new Registry().register("idle", job -> null);
    Runner runner = runner(registry, RunnerOptions.builder().longPollWait(Duration.ofSeconds(20)));
    runner.start();
    assertTrue(held.await(10, TimeUnit.SECONDS), "a long-poll is held");
    long t0 = System.nanoTime();
    assertTrue(runner.stop(WAIT), "the runner stopped");
    assertTrue(System.nanoTime() - t0 >= Runner.STOP_POLL_GRACE.toNanos(), "the stop waited the grace for the poll's answer");
    assertEquals(1, fake.requests("/v1/workers/stop").size(), "the stop signal, sent once");
    FakeBaton.waitFor(() -> { Set<Thread> now = longPollThreads(); now.removeAll(before); return now.isEmpty(); },
        WAIT, "the aborted long-poll's thread to end");
    assertEquals(1, fake.requests("/v1/jobs/poll").stream().filter(r -> r.body().has("waitSeconds")).count(), "the aborted poll was not sent again");
  }

  /**
   * Another transport (the outbox's SQS) fetches on the poller thread: a fetch under way at the
   * stop (a received message being claimed) finishes, and the job it claimed runs in the drain.
   */
  @Test
  void aStopDuringATransportFetchRunsTheJobsItClaimed() throws Exception {
    fake.addJob("work", Map.of());
    CountDownLatch fetching = new CountDownLatch(1);
    CountDownLatch stopAsked = new CountDownLatch(1);
    AtomicInteger fetches = new AtomicInteger();
    JobTransport transport = (workerId, jobTypes, maxJobs) -> {
      if (fetches.incrementAndGet() > 1) {
        return List.of();
      }
      fetching.countDown();
      try {
        assertTrue(stopAsked.await(10, TimeUnit.SECONDS));
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
      JsonNode job = fake.queue.poll(); // claimed for this worker while the runner is stopping
      ((ObjectNode) job).put("lockExpiresAt", Instant.now().plusSeconds(30).toString());
      return List.of(job);
    };
    Registry registry = new Registry().register("work", job -> Map.of("ran", true));
    Runner runner = Runner.builder(registry).client(fake.client()).transport(transport).options(RunnerOptions.builder().workerId("w1").build()).build();
    runner.start();
    assertTrue(fetching.await(10, TimeUnit.SECONDS), "a fetch is under way");
    runner.requestStop();
    stopAsked.countDown();
    assertTrue(runner.awaitTermination(WAIT), "the runner stopped");
    assertEquals(1, fake.batchItems().size(), "the job the fetch claimed ran and its result was sent");
    assertEquals(1, fetches.get(), "no fetch after the stop");
  }

  private static Set<Thread> longPollThreads() {
    Set<Thread> threads = new HashSet<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().equals("baton-long-poll") && t.isAlive()) {
        threads.add(t);
      }
    }
    return threads;
  }

  @Test
  void offloadedInputIsDownloadedAndABigOutputUploaded() throws Exception {
    fake.blobs.put("in/1", FakeBaton.JSON.writeValueAsBytes(Map.of("blob", "y".repeat(1000))));
    String id = fake.addJob("big", null);
    fake.queue.peek().put("inputPayloadPath", "in/1").put("inputDownloadUrl", fake.url() + "/s3/in/1");
    fake.queue.peek().remove("input");
    Registry registry = new Registry().register("big", job -> Map.of("length", ((String) job.input().get("blob")).length(), "out", "x".repeat(200_000)));
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 1, WAIT, "the result");
    }
    JsonNode item = fake.batchItems().get(0);
    assertEquals(id, item.path("jobId").asText());
    assertFalse(item.has("variablesToSet"));
    String path = item.path("outputPayloadPath").asText();
    JsonNode uploaded = FakeBaton.JSON.readTree(fake.blobs.get(path));
    assertEquals(1000, uploaded.path("length").asInt());
    assertEquals(200_000, uploaded.path("out").asText().length());
    assertEquals("STEP_OUTPUT", fake.requests("/v1/payloads").get(0).body().path("kind").asText());
  }

  @Test
  void jobFieldsAndTheMdc() throws Exception {
    String id = fake.addJob("info", Map.of("k", "v"));
    Registry registry = new Registry().register("info", job -> Map.of(
        "id", job.id(), "attempt", job.attempt(), "retriesRemaining", job.retriesRemaining(),
        "logged", job.logger().fields().get("job_id"), "expires", job.lockExpiresAt().isAfter(Instant.now())));
    try (Runner runner = runner(registry, RunnerOptions.builder())) {
      runner.start();
      FakeBaton.waitFor(() -> fake.batchItems().size() == 1, WAIT, "the result");
    }
    JsonNode vars = fake.batchItems().get(0).path("variablesToSet");
    assertEquals(id, vars.path("id").asText());
    assertEquals(id, vars.path("logged").asText());
    assertEquals(2, vars.path("retriesRemaining").asInt());
    assertTrue(vars.path("expires").asBoolean());
  }
}
