package dev.baton.worker;

import java.time.Duration;
import org.slf4j.Logger;

/** How the poll loop reads a failed poll. */
final class PollErrors {
  private PollErrors() {}

  /** A 422 naming waitSeconds: the server predates long-poll (the runner then polls short). */
  static boolean refusesWait(RuntimeException error) {
    if (!(error instanceof BatonApiException)) {
      return false;
    }
    BatonApiException e = (BatonApiException) error;
    return e.status() == 422 && e.errors().stream().anyMatch(i -> i.path().equals("waitSeconds"));
  }

  static void log(Logger log, RuntimeException error, Duration delay) {
    boolean transientError =
        error instanceof TransportException
            || (error instanceof BatonApiException && ((BatonApiException) error).isTransient());
    if (transientError) {
      log.warn("poll failed; backing off {} ms: {}", delay.toMillis(), error.getMessage());
    } else if (error instanceof BatonException) {
      log.error("poll refused; backing off {} ms: {}", delay.toMillis(), error.getMessage());
    } else {
      log.error("poll failed unexpectedly; backing off {} ms", delay.toMillis(), error);
    }
  }
}
