package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.Timestamps;
import dev.baton.workflow.v1.BackfillRequest;
import dev.baton.workflow.v1.BackfillResponse;
import dev.baton.workflow.v1.DeletedSchedule;
import dev.baton.workflow.v1.ListSchedulesRequest;
import dev.baton.workflow.v1.PauseScheduleRequest;
import dev.baton.workflow.v1.Schedule;
import dev.baton.workflow.v1.SchedulePage;
import dev.baton.workflow.v1.ScheduleRequest;
import dev.baton.workflow.v1.ScheduleSpec;
import dev.baton.workflow.v1.ScheduleTriggered;
import dev.baton.workflow.v1.StartInstanceRequest;
import dev.baton.workflow.v1.StartInstancesResponse;
import dev.baton.workflow.v1.StartOutcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The typed batch-start and schedule calls against the in-process fake server. */
class TypedApiTest {
  FakeBaton fake;
  private TypedApi api;

  /** The wire under test ({@code *ConnectTest} runs these tests over Connect). */
  Protocol protocol() {
    return Protocol.REST;
  }

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeBaton(protocol());
    api =
        BatonClient.builder()
            .url(fake.url())
            .protocol(protocol())
            .apiKey("k")
            .environment(java.util.Map.of())
            .retry(RetryPolicy.builder().initialInterval(Duration.ofMillis(5)).maximumAttempts(3).build())
            .build()
            .api();
  }

  @AfterEach
  void tearDown() {
    fake.close();
  }

  private static StartInstanceRequest start(String name, String key) {
    StartInstanceRequest.Builder b =
        StartInstanceRequest.newBuilder()
            .setDefinitionName(name)
            .setInput(Struct.newBuilder().putFields("n", Value.newBuilder().setNumberValue(1).build()));
    if (key != null) {
      b.setIdempotencyKey(key);
    }
    return b.build();
  }

  /** Answers a batch start item by item: STARTED, except "missing" (NOT_FOUND). */
  private static FakeBaton.Answer batchAnswer(FakeBaton.Request r) {
    ObjectNode out = FakeBaton.JSON.createObjectNode();
    ArrayNode results = out.putArray("results");
    int i = 0;
    for (JsonNode item : r.body().path("instances")) {
      ObjectNode o = results.addObject().put("index", i);
      if (item.path("definitionName").asText().equals("missing")) {
        o.put("outcome", "NOT_FOUND").put("error", "no definition named 'missing'");
        o.set("problem", FakeBaton.problem(404, "Not Found", "no definition named 'missing'"));
      } else {
        o.put("outcome", "STARTED");
        o.putObject("instance").put("id", "inst-" + i).put("definitionName", item.path("definitionName").asText())
            .put("status", "RUNNING").put("createdAt", "2026-11-26T08:00:00Z").put("futureField", 1);
      }
      i++;
    }
    return FakeBaton.Answer.of(200, out);
  }

  @Test
  void startInstancesSendsOneBatchAndReadsEachItemsOutcome() {
    fake.routes.put("/v1/instances/batch", TypedApiTest::batchAnswer);
    StartInstancesResponse answer = api.startInstances(List.of(start("orders", "k1"), start("missing", null)));

    assertEquals(1, fake.requests("/v1/instances/batch").size());
    FakeBaton.Request sent = fake.requests("/v1/instances/batch").get(0);
    assertEquals("POST", sent.method());
    assertEquals("orders", sent.body().path("instances").get(0).path("definitionName").asText());
    assertEquals("k1", sent.body().path("instances").get(0).path("idempotencyKey").asText());
    assertEquals(1, sent.body().path("instances").get(0).path("input").path("n").asInt());
    assertFalse(sent.body().path("instances").get(1).has("idempotencyKey"));

    StartOutcome started = answer.getResults(0);
    assertEquals("STARTED", started.getOutcome());
    assertEquals("inst-0", started.getInstance().getId());
    assertEquals("2026-11-26T08:00:00Z", Timestamps.toString(started.getInstance().getCreatedAt()));
    StartOutcome missing = answer.getResults(1);
    assertEquals(1, missing.getIndex());
    assertEquals("NOT_FOUND", missing.getOutcome());
    assertEquals(404, missing.getProblem().getStatus());
    assertTrue(missing.getError().contains("missing"));
  }

  @Test
  void startInstancesRefusesAnEmptyOrOversizedListWithoutARequest() {
    IllegalArgumentException none =
        assertThrows(IllegalArgumentException.class, () -> api.startInstances(List.of()));
    assertTrue(none.getMessage().contains("1 to 100"), none.getMessage());
    List<StartInstanceRequest> many = new ArrayList<>(Collections.nCopies(101, start("orders", null)));
    assertThrows(IllegalArgumentException.class, () -> api.startInstances(many));
    assertTrue(fake.requests.isEmpty());
  }

  @Test
  void startInstancesIsRetriedAfterA500OnlyWhenEveryItemHasAnIdempotencyKey() {
    AtomicInteger calls = new AtomicInteger();
    fake.routes.put("/v1/instances/batch", r -> calls.incrementAndGet() == 1
        ? FakeBaton.Answer.of(500, FakeBaton.problem(500, "Internal Server Error", "boom"))
        : batchAnswer(r));
    assertEquals(2, api.startInstances(List.of(start("a", "k1"), start("b", "k2"))).getResultsCount());
    assertEquals(2, calls.get());

    calls.set(0);
    BatonApiException e = assertThrows(BatonApiException.class,
        () -> api.startInstances(List.of(start("a", "k1"), start("b", null))));
    assertEquals(500, e.status());
    assertEquals(1, calls.get(), "a start without a key may have happened: not repeated");
  }

  private static ObjectNode schedule(String id, JsonNode request) {
    ObjectNode s = FakeBaton.JSON.createObjectNode();
    s.put("id", id).put("definitionName", request == null ? "nightly" : request.path("definitionName").asText());
    s.set("spec", request == null ? FakeBaton.JSON.createObjectNode().set("cron", FakeBaton.JSON.createArrayNode().add("0 3 * * *")) : request.path("spec"));
    s.put("overlapPolicy", "SKIP").put("catchupWindowSeconds", 60).put("pauseOnFailure", false).put("paused", false);
    s.put("createdAt", "2026-11-26T08:00:00Z").put("updatedAt", "2026-11-26T08:00:00Z");
    s.putArray("nextFireTimes").add("2026-11-27T03:00:00Z").add("2026-11-28T03:00:00Z");
    s.putArray("recentActions").addObject().put("slotTime", "2026-11-26T03:00:00Z").put("kind", "SCHEDULED")
        .put("outcome", "STARTED").put("instanceId", "inst-1");
    return s;
  }

  @Test
  void createGetAndReplaceASchedule() {
    fake.routes.put("/v1/schedules", r -> FakeBaton.Answer.of(201, schedule("nightly-report", r.body())));
    fake.routes.put("/v1/schedules/nightly report", r ->
        FakeBaton.Answer.of(200, schedule("nightly report", r.body())));
    ScheduleRequest request =
        ScheduleRequest.newBuilder()
            .setId("nightly-report")
            .setDefinitionName("report")
            .setSpec(ScheduleSpec.newBuilder().addCron("0 3 * * *").setTimeZone("Europe/Paris"))
            .setOverlapPolicy("BUFFER_ONE")
            .setInput(Struct.newBuilder().putFields("at", Value.newBuilder().setStringValue("${schedule.time}").build()))
            .build();
    Schedule created = api.createSchedule(request);
    JsonNode body = fake.requests("/v1/schedules").get(0).body();
    assertEquals("nightly-report", body.path("id").asText());
    assertEquals("report", body.path("definitionName").asText());
    assertEquals("0 3 * * *", body.path("spec").path("cron").get(0).asText());
    assertEquals("Europe/Paris", body.path("spec").path("timeZone").asText());
    assertEquals("BUFFER_ONE", body.path("overlapPolicy").asText());
    assertEquals("${schedule.time}", body.path("input").path("at").asText());
    assertFalse(body.has("catchupWindowSeconds"), "0 is left to the server's default");
    assertEquals("nightly-report", created.getId());
    assertEquals(2, created.getNextFireTimesCount());
    assertEquals("2026-11-27T03:00:00Z", Timestamps.toString(created.getNextFireTimes(0)));
    assertEquals("inst-1", created.getRecentActions(0).getInstanceId());

    Schedule read = api.getSchedule("nightly report");
    assertEquals("GET", fake.requests("/v1/schedules/nightly report").get(0).method());
    assertEquals("nightly report", read.getId());

    api.replaceSchedule(request.toBuilder().setId("nightly report").setPaused(true).build());
    FakeBaton.Request put = fake.requests("/v1/schedules/nightly report").get(1);
    assertEquals("PUT", put.method());
    assertFalse(put.body().has("id"), "PUT takes the id from the path");
    assertTrue(put.body().path("paused").asBoolean());
  }

  @Test
  void listSchedulesFollowsPageTokens() {
    fake.routes.put("/v1/schedules", r -> {
      ObjectNode page = FakeBaton.JSON.createObjectNode();
      boolean first = r.query() == null || !r.query().contains("pageToken=");
      page.putArray("schedules").add(schedule(first ? "a" : "b", null));
      if (first) {
        page.put("nextPageToken", "tok/1");
      }
      return FakeBaton.Answer.of(200, page);
    });
    SchedulePage page = api.listSchedules(ListSchedulesRequest.newBuilder().setLimit(1).build());
    assertEquals("tok/1", page.getNextPageToken());
    assertEquals("limit=1", fake.requests("/v1/schedules").get(0).query());

    List<String> ids = new ArrayList<>();
    api.allSchedules(1).forEach(s -> ids.add(s.getId()));
    assertEquals(List.of("a", "b"), ids);
    assertEquals("limit=1&pageToken=tok%2F1", fake.requests("/v1/schedules").get(2).query());
    assertThrows(IllegalArgumentException.class, () -> api.allSchedules(0));
  }

  @Test
  void pauseUnpauseTriggerBackfillAndDelete() throws Exception {
    fake.routes.put("/v1/schedules/s1/pause", r -> FakeBaton.Answer.of(200, schedule("s1", null).put("paused", true)));
    fake.routes.put("/v1/schedules/s1/unpause", r -> FakeBaton.Answer.of(200, schedule("s1", null)));
    fake.routes.put("/v1/schedules/s1/trigger", r -> {
      ObjectNode o = FakeBaton.JSON.createObjectNode().put("id", "s1");
      o.putArray("slotTimes").add("2026-11-26T08:00:00Z");
      return FakeBaton.Answer.of(200, o);
    });
    fake.routes.put("/v1/schedules/s1/backfill", r -> {
      ObjectNode o = FakeBaton.JSON.createObjectNode().put("id", "s1").put("slots", 3).put("added", 2);
      o.putArray("slotTimes").add("2026-11-01T03:00:00Z").add("2026-11-02T03:00:00Z");
      return FakeBaton.Answer.of(200, o);
    });
    fake.routes.put("/v1/schedules/s1", r -> FakeBaton.Answer.of(200, FakeBaton.JSON.createObjectNode().put("id", "s1").put("deleted", true)));

    assertTrue(api.pauseSchedule(PauseScheduleRequest.newBuilder().setId("s1").setNote("maintenance").build()).getPaused());
    JsonNode pause = fake.requests("/v1/schedules/s1/pause").get(0).body();
    assertEquals("maintenance", pause.path("note").asText());
    assertFalse(pause.has("id"));

    assertFalse(api.unpauseSchedule("s1").getPaused());
    assertEquals(0, fake.requests("/v1/schedules/s1/unpause").get(0).body().size());

    ScheduleTriggered fired = api.triggerSchedule("s1");
    assertEquals("2026-11-26T08:00:00Z", Timestamps.toString(fired.getSlotTimes(0)));

    BackfillResponse backfill =
        api.backfillSchedule(
            BackfillRequest.newBuilder()
                .setId("s1")
                .setFrom(Timestamps.parse("2026-11-01T00:00:00Z"))
                .setTo(Timestamps.parse("2026-11-04T00:00:00Z"))
                .build());
    JsonNode range = fake.requests("/v1/schedules/s1/backfill").get(0).body();
    assertEquals("2026-11-01T00:00:00Z", range.path("from").asText());
    assertEquals("2026-11-04T00:00:00Z", range.path("to").asText());
    assertFalse(range.has("id"));
    assertEquals(3, backfill.getSlots());
    assertEquals(2, backfill.getAdded());
    assertThrows(IllegalArgumentException.class,
        () -> api.backfillSchedule(BackfillRequest.newBuilder().setId("s1").build()));

    DeletedSchedule deleted = api.deleteSchedule("s1");
    assertEquals("DELETE", fake.requests("/v1/schedules/s1").get(0).method());
    assertNull(fake.requests("/v1/schedules/s1").get(0).body());
    assertTrue(deleted.getDeleted());
    assertThrows(IllegalArgumentException.class, () -> api.getSchedule(""));
  }
}
