package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JobExceptionTest {
  @Test
  void noOutputUnlessGiven() {
    assertNull(new JobException("m").output());
    assertNull(new JobException("m", Duration.ZERO).output());
    assertNull(new JobException("m", new IllegalStateException()).output());
    assertNull(new NonRetryableException("m").output());
    assertNull(new NonRetryableException("m", (Map<String, ?>) null).output());
  }

  @Test
  void theOutputAsThrown() {
    Map<String, Object> output = new HashMap<>();
    output.put("code", 42);
    output.put("none", null);
    JobException e = new NonRetryableException("refused", output);
    output.put("code", 43); // changed after the throw: the failure keeps what was thrown
    assertEquals(42, e.output().get("code"));
    assertTrue(e.output().containsKey("none"));
    assertTrue(e.isNonRetryable());
    assertThrows(UnsupportedOperationException.class, () -> e.output().put("x", 1));
  }

  @Test
  void eachFormKeepsItsOptions() {
    JobException delayed = new JobException("later", Duration.ofSeconds(3), Map.of("a", 1));
    assertFalse(delayed.isNonRetryable());
    assertEquals(Duration.ofSeconds(3), delayed.nextRetryDelay());
    assertEquals(Map.of("a", 1), delayed.output());
    JobException retryable = new JobException("again", Map.of("b", 2));
    assertFalse(retryable.isNonRetryable());
    assertNull(retryable.nextRetryDelay());
    assertEquals(Map.of("b", 2), retryable.output());
    IllegalStateException cause = new IllegalStateException("why");
    NonRetryableException caused = new NonRetryableException("no", cause, Map.of("c", 3));
    assertEquals(cause, caused.getCause());
    assertEquals(Map.of("c", 3), caused.output());
    assertThrows(IllegalArgumentException.class, () -> new JobException("m", Duration.ofDays(366), Map.of()));
  }

  @Test
  void theClientSendsTheOutputWithTheFailure() {
    var item = BatonClient.failure("j", "w", "m", false, null, 1, FakeBaton.JSON.valueToTree(Map.of("code", 42)));
    assertEquals(42, item.path("failure").path("output").path("code").asInt());
    assertFalse(BatonClient.failure("j", "w", "m", false, null, 1).path("failure").has("output"));
    assertFalse(BatonClient.failure("j", "w", "m", false, null, 1, null).path("failure").has("output"));
    assertThrows(IllegalArgumentException.class,
        () -> BatonClient.failure("j", "w", "m", false, null, 1, FakeBaton.JSON.valueToTree(42)));
  }
}
