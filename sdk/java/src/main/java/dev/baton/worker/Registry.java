package dev.baton.worker;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** The handlers of a worker, by job type. Register before starting the runner. */
public final class Registry {
  private final Map<String, Handler> handlers = new LinkedHashMap<>();

  /** Registers {@code handler} for {@code jobType}; a second handler for one type is refused. */
  public synchronized Registry register(String jobType, Handler handler) {
    Objects.requireNonNull(jobType, "jobType");
    Objects.requireNonNull(handler, "handler");
    if (jobType.isBlank() || jobType.length() > 256) {
      throw new IllegalArgumentException("a job type is 1 to 256 characters, not '" + jobType + "'");
    }
    if (handlers.containsKey(jobType)) {
      throw new IllegalArgumentException("a handler for job type '" + jobType + "' is already registered");
    }
    handlers.put(jobType, handler);
    return this;
  }

  /** The handler of {@code jobType}, or null. */
  public synchronized Handler get(String jobType) {
    return handlers.get(jobType);
  }

  /** The registered job types, in registration order. */
  public synchronized List<String> jobTypes() {
    return new ArrayList<>(handlers.keySet());
  }
}
