package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class RunnerOptionsTest {
  @Test
  void aPollMayFillTheRunningAndThePrefetchedSlots() {
    // As the Go and TypeScript SDKs: the API's most; the free slots bound each poll.
    assertEquals(100, RunnerOptions.builder().parallelism(16).build().maxJobsPerPoll);
    assertEquals(100, RunnerOptions.builder().parallelism(4).build().maxJobsPerPoll);
    assertEquals(100, RunnerOptions.builder().parallelism(500).build().maxJobsPerPoll);
    assertEquals(100, RunnerOptions.builder().parallelism(500).build().prefetched());
    assertEquals(16, RunnerOptions.builder().parallelism(16).build().prefetched());
    assertEquals(4, RunnerOptions.builder().parallelism(4).build().prefetched());
    assertEquals(5, RunnerOptions.builder().parallelism(16).maxJobsPerPoll(5).build().maxJobsPerPoll);
    assertEquals(5, RunnerOptions.builder().parallelism(16).maxJobsPerPoll(5).build().prefetched());
    assertEquals(100, RunnerOptions.builder().build().maxResultsPerFlush);
  }

  @Test
  void refusesWhatTheApiWouldRefuse() {
    assertThrows(IllegalArgumentException.class, () -> RunnerOptions.builder().longPollWait(Duration.ofSeconds(21)).build());
    assertThrows(IllegalArgumentException.class, () -> RunnerOptions.builder().maxJobsPerPoll(101).build());
    assertThrows(IllegalArgumentException.class, () -> RunnerOptions.builder().parallelism(0).build());
    assertThrows(IllegalArgumentException.class, () -> RunnerOptions.builder().maxResultsPerFlush(101).build());
  }
}
