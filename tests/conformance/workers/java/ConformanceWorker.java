import dev.baton.worker.BatonClient;
import dev.baton.worker.JobException;
import dev.baton.worker.NonRetryableException;
import dev.baton.worker.Registry;
import dev.baton.worker.Runner;
import dev.baton.worker.RunnerOptions;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Java conformance worker: the table of handlers of tests/conformance/README.md on the Java
 * SDK's runner (long-poll, batch completion and automatic heartbeats: the SDK's defaults).
 * Prints READY once polling and STOPPED after a graceful stop (SIGTERM/SIGINT) has drained.
 */
public final class ConformanceWorker {
  private ConformanceWorker() {}

  public static void main(String[] args) {
    String prefix = env("CONFORMANCE_JOB_PREFIX", "");
    Registry registry = new Registry();
    registry.register(prefix + "echo", job -> Map.of("echoed", job.input()));
    registry.register(prefix + "fail-once", job -> {
      if (job.attempt() == 1) {
        throw new JobException("fail-once: attempt 1");
      }
      return Map.of("attempt", job.attempt());
    });
    registry.register(prefix + "non-retryable", job -> {
      throw new NonRetryableException("non-retryable: refused");
    });
    registry.register(prefix + "fail-with-output", job -> {
      throw new NonRetryableException("fail-with-output: refused", Map.of("code", 42, "input", job.input()));
    });
    registry.register(prefix + "retry-delay", job -> {
      if (job.attempt() == 1) {
        double seconds = ((Number) job.input().get("delaySeconds")).doubleValue();
        throw new JobException("retry-delay: attempt 1", Duration.ofMillis(Math.round(seconds * 1000)));
      }
      return Map.of("attempt", job.attempt());
    });
    registry.register(prefix + "job-info", job -> {
      Map<String, Object> info = new LinkedHashMap<>();
      info.put("jobId", job.id());
      info.put("instanceId", job.instanceId());
      info.put("stepId", job.stepId());
      info.put("jobType", job.jobType());
      info.put("attempt", job.attempt());
      info.put("retriesRemaining", job.retriesRemaining());
      return info;
    });
    registry.register(prefix + "heartbeat", ConformanceWorker::sleep);
    registry.register(prefix + "slow", ConformanceWorker::sleep);
    registry.register(prefix + "big-output", job -> {
      int bytes = ((Number) job.input().get("bytes")).intValue();
      return Map.of("blob", "x".repeat(bytes));
    });
    registry.register(prefix + "big-input", job -> Map.of("length", ((String) job.input().get("blob")).length()));
    registry.register(prefix + "bad-output", job -> Map.of("value", Double.NaN));

    // BATON_URL, BATON_API_KEY, BATON_PROTOCOL (rest, or connect: every call as its RPC)
    BatonClient client = BatonClient.builder().build();
    RunnerOptions.Builder options = RunnerOptions.builder()
        .parallelism(Integer.parseInt(env("CONFORMANCE_PARALLELISM", "4")));
    String workerId = System.getenv("CONFORMANCE_WORKER_ID");
    if (workerId != null && !workerId.isEmpty()) {
      options.workerId(workerId);
    }
    Runner runner = Runner.builder(registry).client(client).options(options.build()).build();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      runner.stop(); // drains: in-flight handlers finish and their results are sent
      System.out.println("STOPPED");
      System.out.flush();
      Runtime.getRuntime().halt(0); // a drained stop exits 0, not the JVM's 143 for SIGTERM
    }, "conformance-stop"));
    runner.start();
    System.out.println("READY");
    System.out.flush();
    runner.awaitTermination(null);
  }

  private static Map<String, Object> sleep(dev.baton.worker.Job job) throws InterruptedException {
    Object seconds = job.input().get("sleepSeconds");
    Thread.sleep(Math.round(((Number) seconds).doubleValue() * 1000));
    return Map.of("slept", seconds);
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }
}
