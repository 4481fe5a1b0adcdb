package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * Where a runner's jobs come from, when not from Baton's own poll (which the runner long-polls
 * itself): e.g. {@link SqsTransport}, the outbox dispatch mode. Results always go back through
 * the REST API.
 */
public interface JobTransport extends AutoCloseable {
  /**
   * Up to {@code maxJobs} claimed jobs (proto3 JSON of {@code workflow.v1.Job}), waiting for work
   * a while if none is there; may return none.
   */
  List<JsonNode> fetch(String workerId, List<String> jobTypes, int maxJobs);

  /** True when {@link #fetch} waits for work itself (the runner then polls again at once). */
  default boolean waits() {
    return true;
  }

  @Override
  default void close() {}
}
