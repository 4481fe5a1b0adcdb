package dev.baton.worker;

import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * A handler's logger: every line carries the job's ids as SLF4J 2 key-value pairs ({@code
 * job_id}, {@code job_type}, {@code instance_id}, {@code step_id}, {@code attempt}, {@code
 * worker_id}), which JSON encoders (logback, log4j2) write as fields and slf4j-simple prints
 * after the message. While a handler runs the same ids are also in the MDC, for any other logger.
 */
public final class JobLogger {
  private final Logger logger;
  private final Map<String, String> fields;

  JobLogger(Logger logger, Map<String, String> fields) {
    this.logger = logger;
    this.fields = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(fields));
  }

  static JobLogger of(Job job) {
    Map<String, String> fields = new LinkedHashMap<>();
    fields.put("job_id", job.id());
    fields.put("job_type", job.jobType());
    fields.put("instance_id", job.instanceId());
    fields.put("step_id", job.stepId());
    fields.put("attempt", Integer.toString(job.attempt()));
    fields.put("worker_id", job.workerId());
    return new JobLogger(LoggerFactory.getLogger("dev.baton.worker.job"), fields);
  }

  /** The ids every line carries. */
  public Map<String, String> fields() {
    return fields;
  }

  /** The underlying SLF4J logger (its lines carry the ids through the MDC only). */
  public Logger slf4j() {
    return logger;
  }

  /** A fluent event at {@code level} with the ids attached; add more and call {@code log}. */
  public LoggingEventBuilder at(Level level) {
    LoggingEventBuilder event = logger.atLevel(level);
    fields.forEach(event::addKeyValue);
    return event;
  }

  public void debug(String format, Object... args) {
    at(Level.DEBUG).log(format, args);
  }

  public void info(String format, Object... args) {
    at(Level.INFO).log(format, args);
  }

  public void warn(String format, Object... args) {
    at(Level.WARN).log(format, args);
  }

  public void error(String format, Object... args) {
    at(Level.ERROR).log(format, args);
  }
}
