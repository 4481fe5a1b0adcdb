package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SlotsTest {
  // Waiting for half of a poll of 100 with 32 slots would make every poll wait the whole gather
  // interval: a gathering poll waits for half of a poll or of all the slots, the fewer.
  @Test
  void aGatheringPollWaitsForHalfOfAPollOrOfTheSlots() {
    assertEquals(16, Slots.gatherEnough(100, 32));
    assertEquals(5, Slots.gatherEnough(10, 32));
    assertEquals(1, Slots.gatherEnough(100, 1));
    assertEquals(1, Slots.gatherEnough(1, 16));
  }
}
