package dev.baton.worker;

import java.util.Map;

/**
 * Runs one job: returns the variables to set on the instance (or null for none), or throws.
 *
 * <p>A {@link NonRetryableException} fails the job at once; a {@link JobException} fails it as
 * retryable (after its {@code nextRetryDelay}, if given); any other exception fails it as
 * retryable after the step's own delay. A result that is not JSON Baton can store (NaN, Infinity,
 * a NUL character, an object Jackson cannot serialise) fails the job non-retryably, saying where.
 *
 * <pre>{@code registry.register("charge-card", job -> Map.of("charged", true));}</pre>
 */
@FunctionalInterface
public interface Handler {
  Map<String, ?> handle(Job job) throws Exception;
}
