package baton

import "testing"

// A gathering poll waits for half of a poll or of all the slots, the fewer: waiting for half of
// a poll of 100 with 32 slots would make every poll wait the whole gather interval.
func TestGatherEnoughIsHalfOfAPollOrOfTheSlots(t *testing.T) {
	for _, c := range []struct{ poll, capacity, want int }{
		{100, 32, 16},
		{10, 32, 5},
		{100, 1, 1},
		{1, 16, 1},
	} {
		if got := gatherEnough(c.poll, c.capacity); got != c.want {
			t.Errorf("gatherEnough(%d, %d) = %d, want %d", c.poll, c.capacity, got, c.want)
		}
	}
}
