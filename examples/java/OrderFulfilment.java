import com.google.protobuf.Struct;
import dev.baton.worker.BatonClient;
import dev.baton.worker.Job;
import dev.baton.worker.NonRetryableException;
import dev.baton.worker.ProtoJson;
import dev.baton.worker.Registry;
import dev.baton.worker.Runner;
import dev.baton.workflow.v1.CompleteUserTaskRequest;
import dev.baton.workflow.v1.Definition;
import dev.baton.workflow.v1.Instance;
import dev.baton.workflow.v1.StartInstanceRequest;
import dev.baton.workflow.v1.StepExecution;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * The order-fulfilment example (examples/order_fulfilment/) in Java: the four handlers of its
 * definition, and the README's walk-through driven by the typed client.
 *
 * <pre>
 *   examples/java/run worker        # runs the handlers until SIGINT/SIGTERM (drains first)
 *   examples/java/run walkthrough   # registers the definition, starts an order, approves it
 * </pre>
 *
 * {@code charge-card} fails transiently on the first attempt of every order (a flaky payment
 * gateway), so each instance shows one retry; an amount that is not positive fails at once with
 * {@link NonRetryableException}.
 */
public final class OrderFulfilment {
  private OrderFulfilment() {}

  static Registry registry() {
    return new Registry()
        .register("reserve-stock", OrderFulfilment::reserveStock)
        .register("charge-card", OrderFulfilment::chargeCard)
        .register("ship-parcel", job -> Map.of("tracking", token("TRK", job.instanceId(), job.input().get("address"))))
        .register("send-confirmation", job -> {
          job.logger().info("confirmation sent to {}", job.input().get("email"));
          return Map.of("confirmationSent", true);
        });
  }

  static Map<String, ?> reserveStock(Job job) {
    List<?> items = (List<?>) job.input().getOrDefault("items", List.of());
    if (items.isEmpty()) {
      throw new NonRetryableException("the order has no items");
    }
    int units = items.stream().mapToInt(i -> ((Number) ((Map<?, ?>) i).get("qty")).intValue()).sum();
    job.logger().info("stock reserved: {} units", units);
    return Map.of("reservationId", token("RSV", job.instanceId()), "unitsReserved", units);
  }

  static Map<String, ?> chargeCard(Job job) throws java.io.IOException {
    double amount = ((Number) job.input().getOrDefault("amount", 0)).doubleValue();
    if (amount <= 0) {
      throw new NonRetryableException("cannot charge " + amount + ": the amount must be positive");
    }
    if (job.attempt() == 1) { // any other exception is retryable: attempt 2 after retryDelaySeconds
      throw new java.net.SocketTimeoutException("payment gateway timed out (simulated; attempt 2 will succeed)");
    }
    job.logger().info("card charged: {}", amount);
    return Map.of("receipt", token("RCPT", job.instanceId()), "charged", amount);
  }

  static String token(String prefix, Object... parts) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(
          String.join("|", java.util.Arrays.stream(parts).map(String::valueOf).toArray(String[]::new)).getBytes(StandardCharsets.UTF_8));
      return prefix + "-" + HexFormat.of().withUpperCase().formatHex(digest, 0, 4);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  public static void main(String[] args) throws Exception {
    String mode = args.length > 0 ? args[0] : "worker";
    if (mode.equals("worker")) {
      Runner.builder(registry()).build().run(); // BATON_URL, BATON_API_KEY; drains on SIGTERM
      return;
    }
    if (!mode.equals("walkthrough")) {
      System.err.println("usage: run worker | walkthrough");
      System.exit(2);
    }
    Path dir = Path.of("examples/order_fulfilment");
    try (BatonClient client = BatonClient.fromEnv();
        Runner runner = Runner.builder(registry()).client(client).build()) {
      runner.start();
      // Started by the name the definition gives itself (order-fulfilment-example, not the README
      // walk-through's order-fulfilment), as registered.
      Definition registered = client.api().registerDefinition(Files.readString(dir.resolve("definition.json")));
      Struct input = ProtoJson.merge(Files.readString(dir.resolve("input.json")), Struct.newBuilder()).build();
      Instance started = client.api().startInstance(
          StartInstanceRequest.newBuilder().setDefinitionName(registered.getName()).setInput(input).build());
      System.out.println("started " + started.getId());
      Instance waiting = waitFor(client, started.getId(), i -> i.getStepsList().stream()
          .anyMatch(s -> s.getStepId().equals("approve") && s.getStatus().equals("IN_PROGRESS")));
      for (StepExecution s : waiting.getStepsList()) {
        System.out.println("  " + s.getStepId() + " " + s.getStatus() + " (attempt " + s.getAttempt() + ")");
      }
      client.api().completeUserTask(CompleteUserTaskRequest.newBuilder().setId(started.getId()).setStepId("approve")
          .setVariablesToSet(ProtoJson.merge("{\"approvedBy\": \"ada\"}", Struct.newBuilder())).build());
      Instance done = waitFor(client, started.getId(), i -> !i.getStatus().equals("RUNNING"));
      System.out.println(done.getStatus() + " " + ProtoJson.toJson(done).path("output"));
    }
  }

  private static Instance waitFor(BatonClient client, String id, java.util.function.Predicate<Instance> condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      Instance instance = client.api().getInstance(id);
      if (condition.test(instance) || !instance.getStatus().equals("RUNNING")) {
        return instance;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("instance " + id + " still " + instance.getStatus() + " after 60 s");
      }
      Thread.sleep(200);
    }
  }
}
