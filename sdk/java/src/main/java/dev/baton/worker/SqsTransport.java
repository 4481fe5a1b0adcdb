package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.SqsClientBuilder;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;

/**
 * Baton's event-driven (outbox) dispatch mode: the engine's relay publishes each claimable job's
 * id to an SQS FIFO queue; this transport receives the messages, takes each job's lease with
 * {@code POST /v1/jobs/{id}/claim}, and deletes the message once the claim answered. A duplicate
 * or stale delivery is refused by the claim (409/404) and dropped; a job type at its limit (429)
 * is left on the queue to come again. The job then runs and completes through the REST API.
 *
 * <pre>{@code
 * Runner runner = Runner.builder(registry).client(client)
 *     .transport(SqsTransport.fromEnv(client)).build();
 * }</pre>
 */
public final class SqsTransport implements JobTransport {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.transports");
  static final int SQS_MAX_MESSAGES = 10;
  static final String DISPATCH_QUEUE_FILE = "dispatch-queue.json";

  private final BatonClient client;
  private final SqsClient sqs;
  private final String queueUrl;
  private final int waitSeconds;
  private final int foreignDelaySeconds;
  private final boolean ownsSqs;
  private final AtomicLong duplicates = new AtomicLong();

  /**
   * A transport on {@code queueUrl} read with {@code sqs}; {@code waitSeconds} (0 to 20) is SQS's
   * long poll (kept short so a stop is prompt).
   */
  public SqsTransport(BatonClient client, SqsClient sqs, String queueUrl, int waitSeconds) {
    this(client, sqs, queueUrl, waitSeconds, false);
  }

  private SqsTransport(BatonClient client, SqsClient sqs, String queueUrl, int waitSeconds, boolean ownsSqs) {
    if (waitSeconds < 0 || waitSeconds > 20) {
      throw new IllegalArgumentException("waitSeconds must be between 0 and 20 (SQS's long poll)");
    }
    this.client = Objects.requireNonNull(client, "client");
    this.sqs = Objects.requireNonNull(sqs, "sqs");
    this.queueUrl = Objects.requireNonNull(queueUrl, "queueUrl");
    this.waitSeconds = waitSeconds;
    this.foreignDelaySeconds = 2;
    this.ownsSqs = ownsSqs;
  }

  /**
   * The transport of the queue {@code BATON_DISPATCH_QUEUE_URL} names (with {@code
   * BATON_SQS_ENDPOINT}), else of the one a {@code baton dev} on this machine relays to (it writes
   * it into {@code $BATON_DATA_DIR/dispatch-queue.json}). A local queue is read with placeholder
   * credentials; another with the AWS SDK's default chain and region.
   */
  public static SqsTransport fromEnv(BatonClient client) {
    return fromEnv(client, System.getenv());
  }

  static SqsTransport fromEnv(BatonClient client, Map<String, String> env) {
    String queueUrl = env.get(Env.DISPATCH_QUEUE_URL);
    String endpoint = env.get(Env.SQS_ENDPOINT);
    String region = env.getOrDefault("AWS_REGION", env.get("AWS_DEFAULT_REGION"));
    String source = Env.DISPATCH_QUEUE_URL;
    if (queueUrl == null || queueUrl.isBlank()) {
      Path path = Env.localApiKeyPath(env).resolveSibling(DISPATCH_QUEUE_FILE);
      if (!Env.isLoopback(client.url()) || !Files.isReadable(path)) {
        throw new IllegalStateException(
            "no dispatch queue: set " + Env.DISPATCH_QUEUE_URL + " (the stack's DispatchQueueUrl output), or run "
                + "`baton dev` on this machine (it writes its queue into $" + Env.DATA_DIR + "/" + DISPATCH_QUEUE_FILE
                + "; BATON_DISPATCH_MODE=outbox makes it publish there)");
      }
      try {
        JsonNode kept = ApiHttp.JSON.readTree(Files.readAllBytes(path));
        queueUrl = kept.path("queueUrl").asText(null);
        endpoint = kept.hasNonNull("endpoint") ? kept.get("endpoint").asText() : null;
        region = kept.hasNonNull("region") ? kept.get("region").asText() : region;
      } catch (IOException e) {
        throw new IllegalStateException("cannot read " + path + ": " + e.getMessage(), e);
      }
      if (queueUrl == null || queueUrl.isBlank()) {
        throw new IllegalStateException(path + " names no queueUrl");
      }
      source = path.toString();
    }
    boolean local = endpoint != null && Env.isLoopback(endpoint);
    SqsClientBuilder builder = SqsClient.builder().httpClient(UrlConnectionHttpClient.create());
    if (endpoint != null && !endpoint.isBlank()) {
      builder.endpointOverride(URI.create(endpoint));
    }
    if (region != null && !region.isBlank()) {
      builder.region(Region.of(region));
    } else if (local) {
      builder.region(Region.US_EAST_1);
    }
    if (local) { // a baton dev queue: its SQS does not check credentials
      builder.credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("baton-local", "baton-local")));
    }
    log.info("receiving jobs from {} ({})", queueUrl, source);
    return new SqsTransport(client, builder.build(), queueUrl, 1, true);
  }

  /** Deliveries the claim refused (already claimed, finished, stale). */
  public long duplicates() {
    return duplicates.get();
  }

  @Override
  public List<JsonNode> fetch(String workerId, List<String> jobTypes, int maxJobs) {
    ReceiveMessageResponse received;
    try {
      received =
          sqs.receiveMessage(
              r -> r.queueUrl(queueUrl)
                  .maxNumberOfMessages(Math.max(1, Math.min(maxJobs, SQS_MAX_MESSAGES)))
                  .waitTimeSeconds(waitSeconds));
    } catch (SdkClientException e) { // unreachable: the runner backs off as for Baton itself
      throw new TransportException("cannot reach the dispatch queue " + queueUrl + ": " + e.getMessage(), false, e);
    }
    List<JsonNode> jobs = new ArrayList<>();
    for (Message message : received.messages()) {
      JsonNode job = claim(message, workerId, jobTypes);
      if (job != null) {
        jobs.add(job);
      }
    }
    return jobs;
  }

  private JsonNode claim(Message message, String workerId, List<String> jobTypes) {
    String receipt = message.receiptHandle();
    String jobId;
    int attempt;
    String jobType;
    try {
      JsonNode delivered = ApiHttp.JSON.readTree(message.body());
      if (!delivered.hasNonNull("jobId") || !delivered.hasNonNull("attempt") || !delivered.hasNonNull("jobType")) {
        throw new IOException("missing jobId, attempt or jobType");
      }
      jobId = delivered.get("jobId").asText();
      attempt = delivered.get("attempt").asInt();
      jobType = delivered.get("jobType").asText();
    } catch (IOException e) {
      log.warn("dropping a message that is not a Baton dispatch: {}", ApiHttp.clip(message.body(), 200));
      delete(receipt);
      return null;
    }
    if (!jobTypes.contains(jobType)) {
      log.warn("delivered job {} of type {}, which this worker does not handle; released", jobId, jobType);
      release(receipt, foreignDelaySeconds);
      return null;
    }
    JsonNode job;
    try {
      job = client.claimJob(jobId, workerId, attempt);
    } catch (BatonApiException.Conflict | BatonApiException.NotFound e) {
      duplicates.incrementAndGet();
      log.info("delivery of job {} (attempt {}) not claimable; dropped: {}", jobId, attempt, e.getMessage());
      delete(receipt);
      return null;
    } catch (BatonApiException e) {
      if (!e.isTransient()) {
        throw e;
      }
      // Throttled (a job type's limit) or unavailable: SQS delivers it again later.
      int seconds = e.retryAfter() == null ? 1 : (int) Math.max(1, e.retryAfter().toSeconds());
      release(receipt, seconds);
      return null;
    }
    delete(receipt);
    return job;
  }

  private void delete(String receipt) {
    sqs.deleteMessage(r -> r.queueUrl(queueUrl).receiptHandle(receipt));
  }

  private void release(String receipt, int seconds) {
    sqs.changeMessageVisibility(r -> r.queueUrl(queueUrl).receiptHandle(receipt).visibilityTimeout(Math.max(0, seconds)));
  }

  @Override
  public void close() {
    if (ownsSqs) {
      sqs.close();
    }
  }
}
