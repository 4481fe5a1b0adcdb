package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Instant;
import java.time.OffsetDateTime;
import org.junit.jupiter.api.Test;

class UtcTimesTest {
  @Test
  void readsTheServersTimestampsAsInstantParseDoes() {
    for (String t : new String[] {
        "2026-11-26T11:00:46Z", "2026-11-26T11:00:46.9Z", "2026-11-26T11:00:46.908Z",
        "2026-11-26T11:00:46.908123Z", "2026-11-26T11:00:46.000000001Z", "1970-01-01T00:00:00Z",
        "2024-02-29T23:59:59.999999999Z", "1969-12-31T23:59:59.5Z"}) {
      assertEquals(Instant.parse(t), UtcTimes.parse(t), t);
      assertEquals(Instant.parse(t), JobExecutor.parseInstant(t), t);
    }
  }

  @Test
  void leavesAnythingElseToTheGeneralParser() {
    for (String t : new String[] {
        "2026-11-26T11:00:46+00:00", "2026-11-26T11:00:46.Z", "2026-02-30T11:00:46Z",
        "2026-11-26T24:00:00Z", "2026-11-26 11:00:46Z", "2026-11-26T11:00:46.1234567890Z", "x"}) {
      assertNull(UtcTimes.parse(t), t);
    }
    String offset = "2026-11-26T12:00:46.5+01:00";
    assertEquals(OffsetDateTime.parse(offset).toInstant(), JobExecutor.parseInstant(offset));
  }
}
