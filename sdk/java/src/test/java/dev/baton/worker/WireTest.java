package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The HTTP under the client: the default HttpURLConnection wire, and a caller's HttpClient. */
class WireTest {
  private static final Duration WAIT = Duration.ofSeconds(10);

  /**
   * A POST that is not idempotent (an instance start) whose answer never comes (the connection
   * closes after the request) fails as sent and is not sent again by the JDK, which would start
   * the instance twice: HttpURLConnection re-sends a buffered POST once on such a failure; the
   * wire streams the bodies of such calls, which it never re-sends.
   */
  @Test
  void aPostWhoseAnswerIsLostIsNotSentAgain() throws Exception {
    AtomicInteger requests = new AtomicInteger();
    try (ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      Thread accept = new Thread(() -> {
        while (!server.isClosed()) {
          try (Socket s = server.accept()) {
            readRequest(s.getInputStream());
            requests.incrementAndGet();
          } catch (IOException e) {
            return; // closed
          }
        }
      });
      accept.setDaemon(true);
      accept.start();
      BatonClient client = BatonClient.builder().url("http://127.0.0.1:" + server.getLocalPort()).apiKey("k").environment(Map.of()).build();
      TransportException e = assertThrows(TransportException.class,
          () -> client.call("POST", "/v1/instances", Map.of("definitionName", "d"), false));
      assertTrue(e.wasSent(), "the request was sent: " + e.getMessage());
      assertEquals(1, requests.get(), "the start was sent once");
    }
  }

  @Test
  void aRefusedConnectionIsNotSent() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    BatonClient client = BatonClient.builder().url("http://127.0.0.1:" + port).apiKey("k").environment(Map.of()).build();
    TransportException e = assertThrows(TransportException.class,
        () -> client.pollJobs("w", List.of("t"), 5, 0, RetryPolicy.NONE));
    assertFalse(e.wasSent(), "nothing reached a server: " + e.getMessage());
    assertTrue(e.getMessage().startsWith("cannot reach"), e.getMessage());
  }

  /** A runner on a client built with the caller's java.net.http client: polls, long-polls, batches. */
  @Test
  void aCallersHttpClientCarriesEveryCall() throws Exception {
    try (FakeBaton fake = new FakeBaton()) {
      for (int i = 0; i < 5; i++) {
        fake.addJob("echo", Map.of("n", i));
      }
      BatonClient client = BatonClient.builder().url(fake.url()).apiKey("test-key").environment(Map.of())
          .httpClient(HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()).build();
      Registry registry = new Registry().register("echo", job -> Map.of("echoed", job.input()));
      RunnerOptions options = RunnerOptions.builder().workerId("w1").parallelism(2).longPollWait(Duration.ofSeconds(1)).build();
      try (Runner runner = Runner.builder(registry).client(client).options(options).build()) {
        runner.start();
        FakeBaton.waitFor(() -> fake.batchItems().size() == 5, WAIT, "5 results");
        FakeBaton.waitFor(() -> fake.requests("/v1/jobs/poll").stream().anyMatch(r -> r.body().has("waitSeconds")), WAIT, "a long-poll");
      }
      for (JsonNode item : fake.batchItems()) {
        assertTrue(item.path("variablesToSet").path("echoed").has("n"));
      }
      assertTrue(fake.stopSignalled, "the stop signal went out");
    }
  }

  /** Reads one HTTP/1.1 request with a Content-Length body. */
  private static void readRequest(InputStream in) throws IOException {
    StringBuilder head = new StringBuilder();
    int c;
    while ((c = in.read()) >= 0) {
      head.append((char) c);
      if (head.length() >= 4 && head.substring(head.length() - 4).equals("\r\n\r\n")) {
        break;
      }
    }
    int length = 0;
    for (String line : head.toString().split("\r\n")) {
      if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
        length = Integer.parseInt(line.substring(15).trim());
      }
    }
    byte[] body = in.readNBytes(length);
    assertEquals(length, body.length, new String(body, StandardCharsets.UTF_8));
  }
}
