package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.baton.workflow.v1.BatchResultItem;
import dev.baton.workflow.v1.CompleteBatchRequest;
import dev.baton.workflow.v1.Instance;
import dev.baton.workflow.v1.Job;
import dev.baton.workflow.v1.PollJobsResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The REST bodies are the proto3 JSON mapping of engine.proto: the SDK's bodies must parse. */
class ProtoJsonTest {

  private static final String POLL_ANSWER =
      "{\"jobs\":[{\"id\":\"6c1f0a52-3c1e-4d5b-9a47-1f2e3d4c5b6a\",\"instanceId\":\"i-1\",\"stepId\":\"charge\","
          + "\"stepExecutionId\":\"se-1\",\"jobType\":\"charge-card\",\"attempt\":2,\"retriesRemaining\":1,"
          + "\"lockExpiresAt\":\"2026-11-26T05:00:00Z\",\"input\":{\"amount\":59.9,\"items\":[{\"sku\":\"BOOK-42\",\"qty\":2}],"
          + "\"note\":null,\"gift\":false}}]}";

  @Test
  void aPollAnswerRoundTrips() throws Exception {
    JsonNode answer = ApiHttp.JSON.readTree(POLL_ANSWER);
    PollJobsResponse parsed = ProtoJson.merge(answer, PollJobsResponse.newBuilder(), true).build();
    Job job = parsed.getJobs(0);
    assertEquals("charge-card", job.getJobType());
    assertEquals(2, job.getAttempt());
    assertEquals(java.time.Instant.parse("2026-11-26T05:00:00Z").getEpochSecond(), job.getLockExpiresAt().getSeconds());
    // Printed back, the same JSON (Struct numbers are doubles: whole ones are printed whole).
    assertEquals(answer, ProtoJson.toJson(parsed));
    // The runner reads the same answer with Jackson: the fields the handler sees agree.
    List<JsonNode> jobs = BatonClient.jobs(answer);
    assertEquals(job.getId(), jobs.get(0).path("id").asText());
    assertEquals(job.getRetriesRemaining(), jobs.get(0).path("retriesRemaining").asInt());
  }

  @Test
  void completionsAndFailuresAreBatchResultItems() throws Exception {
    BatonClient client = BatonClient.builder().url("http://127.0.0.1:1").apiKey("k").build();
    ObjectNode completion = client.completion("j-1", "w-1", ApiHttp.JSON.valueToTree(Map.of("receipt", "r-9", "n", 3)), 2);
    ObjectNode failure = BatonClient.failure("j-2", "w-1", "boom", false, 1.5, 1);
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    body.putArray("results").add(completion).add(failure);
    CompleteBatchRequest request = ProtoJson.merge(body, CompleteBatchRequest.newBuilder(), true).build();
    BatchResultItem done = request.getResults(0);
    assertEquals(2, done.getAttempt());
    assertEquals("r-9", done.getVariablesToSet().getFieldsOrThrow("receipt").getStringValue());
    BatchResultItem failed = request.getResults(1);
    assertEquals(false, failed.getFailure().getRetryable());
    assertEquals(1.5, failed.getFailure().getNextRetryDelaySeconds());
    // Printed back, the proto gives the same JSON.
    assertEquals(failure, ProtoJson.toJson(failed));
    assertEquals(completion, ProtoJson.toJson(done));
  }

  @Test
  void unknownFieldsAreIgnoredUnlessStrict() throws Exception {
    JsonNode newer = ApiHttp.JSON.readTree("{\"id\":\"i\",\"status\":\"RUNNING\",\"fieldFromTheFuture\":1}");
    assertEquals("RUNNING", ProtoJson.merge(newer, Instance.newBuilder()).getStatus());
    assertThrows(IllegalArgumentException.class, () -> ProtoJson.merge(newer, Instance.newBuilder(), true));
  }
}
