package baton

import (
	"sync"
	"time"
)

// slots is the parallelism semaphore of a runner: one slot per claimed job, from the poll
// that claims it until its outcome is handed over. A poll asks for at most the free slots.
type slots struct {
	mu       sync.Mutex
	capacity int
	used     int
	changed  chan struct{} // closed and replaced at every release
}

func newSlots(capacity int) *slots {
	return &slots{capacity: capacity, changed: make(chan struct{})}
}

// acquireUpTo waits for a free slot and takes as many free ones as it can, at most most. While
// other jobs still run, it waits up to gather for enough slots to free, so one poll asks for
// several jobs. 0 when stop closed first.
func (s *slots) acquireUpTo(stop <-chan struct{}, most int, gather time.Duration, enough int) int {
	enough = max(1, min(enough, most))
	var deadline time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		free := s.capacity - s.used
		if free > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(gather)
			}
			if free >= enough || s.used == 0 || !time.Now().Before(deadline) {
				n := min(free, most)
				s.used += n
				s.mu.Unlock()
				return n
			}
		}
		changed := s.changed
		s.mu.Unlock()
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(deadline))
			}
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-timeout:
		case <-stop:
			return 0
		}
	}
}

func (s *slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.used -= n
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *slots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// waitIdle waits until no slot is in use (true), timeout passes (negative: none) or stop
// closes (false).
func (s *slots) waitIdle(stop <-chan struct{}, timeout time.Duration) bool {
	var expired <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		s.mu.Lock()
		if s.used == 0 {
			s.mu.Unlock()
			return true
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-expired:
			return false
		case <-stop:
			return false
		}
	}
}
