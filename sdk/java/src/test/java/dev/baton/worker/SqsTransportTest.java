package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.File;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/** The outbox transport against moto's SQS server (the repository's .venv/bin/moto_server). */
class SqsTransportTest {
  private static Process moto;
  private static String endpoint;

  @BeforeAll
  static void startMoto() throws Exception {
    Path server = Path.of(System.getProperty("baton.motoServer", "../../.venv/bin/moto_server"));
    Assumptions.assumeTrue(Files.isExecutable(server), "moto_server not found at " + server + " (run make install)");
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    moto = new ProcessBuilder(server.toString(), "-H", "127.0.0.1", "-p", Integer.toString(port))
        .redirectErrorStream(true).redirectOutput(new File(System.getProperty("java.io.tmpdir"), "baton-java-moto.log")).start();
    endpoint = "http://127.0.0.1:" + port;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        new Socket("127.0.0.1", port).close();
        break;
      } catch (java.io.IOException e) {
        if (System.nanoTime() > deadline || !moto.isAlive()) {
          throw new AssertionError("moto_server did not start", e);
        }
        Thread.sleep(100);
      }
    }
  }

  @AfterAll
  static void stopMoto() throws Exception {
    if (moto != null) {
      moto.destroy();
      moto.waitFor(5, TimeUnit.SECONDS);
    }
  }

  @Test
  void claimsDeliveredJobsAndDropsDuplicates(@TempDir Path dir) throws Exception {
    try (FakeBaton fake = new FakeBaton()) {
      List<String> claims = new ArrayList<>();
      fake.routes.put("/v1/jobs/j-1/claim", r -> {
        claims.add("j-1 attempt " + r.body().path("attempt").asInt() + " by " + r.body().path("workerId").asText());
        return claims.size() == 1
            ? FakeBaton.Answer.of(200, Map.of("id", "j-1", "jobType", "charge-card", "attempt", 1, "instanceId", "i", "stepId", "s", "input", Map.of("n", 1)))
            : FakeBaton.Answer.of(409, FakeBaton.problem(409, "Conflict", "job j-1 is not claimable"));
      });
      Files.writeString(dir.resolve("dispatch-queue.json"),
          "{\"queueUrl\":\"" + endpoint + "/123456789012/baton-dispatch.fifo\",\"endpoint\":\"" + endpoint + "\",\"region\":\"us-east-1\"}");
      SqsClient sqs = SqsClient.builder().endpointOverride(java.net.URI.create(endpoint))
          .region(software.amazon.awssdk.regions.Region.US_EAST_1)
          .httpClient(software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient.create())
          .credentialsProvider(software.amazon.awssdk.auth.credentials.StaticCredentialsProvider.create(
              software.amazon.awssdk.auth.credentials.AwsBasicCredentials.create("x", "x"))).build();
      String queue = sqs.createQueue(r -> r.queueName("baton-dispatch.fifo").attributes(Map.of(
          QueueAttributeName.FIFO_QUEUE, "true", QueueAttributeName.CONTENT_BASED_DEDUPLICATION, "false"))).queueUrl();
      String job = "{\"jobId\":\"j-1\",\"attempt\":1,\"jobType\":\"charge-card\"}";
      sqs.sendMessage(r -> r.queueUrl(queue).messageBody(job).messageGroupId("i").messageDeduplicationId("a"));
      sqs.sendMessage(r -> r.queueUrl(queue).messageBody(job).messageGroupId("i2").messageDeduplicationId("b")); // a duplicate
      sqs.sendMessage(r -> r.queueUrl(queue).messageBody("not json").messageGroupId("i3").messageDeduplicationId("c"));

      BatonClient client = BatonClient.builder().url(fake.url()).apiKey("k").build();
      SqsTransport transport = SqsTransport.fromEnv(client, Map.of(Env.DATA_DIR, dir.toString()));
      List<JsonNode> got = new ArrayList<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      while (claims.size() < 2 && System.nanoTime() < deadline) {
        got.addAll(transport.fetch("w-1", List.of("charge-card"), 10));
      }
      transport.close();
      assertEquals(1, got.size(), "one job claimed: " + got);
      assertEquals("j-1", got.get(0).path("id").asText());
      assertEquals(List.of("j-1 attempt 1 by w-1", "j-1 attempt 1 by w-1"), claims);
      assertEquals(1, transport.duplicates());
      String left = sqs.getQueueAttributes(r -> r.queueUrl(queue).attributeNames(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
          QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE)).attributesAsStrings().toString();
      assertTrue(left.contains("ApproximateNumberOfMessages=0") && left.contains("ApproximateNumberOfMessagesNotVisible=0"),
          "every message deleted: " + left);
      sqs.close();
    }
  }
}
