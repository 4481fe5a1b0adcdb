package baton

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how long to wait before each retry of a failed call and when to give up.
//
// Retry n (0, 1, ...) waits min(MaxInterval, InitialInterval * Coefficient^n), less a random
// share of up to Jitter of it (0.5: anywhere between half and all of it), so many workers that
// failed together do not retry in step. MaxAttempts counts the first call too (0: no limit);
// MaxElapsed caps the time spent retrying (0: no cap).
type RetryPolicy struct {
	InitialInterval time.Duration
	Coefficient     float64
	MaxInterval     time.Duration
	MaxAttempts     int
	MaxElapsed      time.Duration
	Jitter          float64
}

// DefaultRetryPolicy is the client's: 4 attempts, 0.1 s doubling up to 5 s.
var DefaultRetryPolicy = RetryPolicy{
	InitialInterval: 100 * time.Millisecond,
	Coefficient:     2,
	MaxInterval:     5 * time.Second,
	MaxAttempts:     4,
	Jitter:          0.5,
}

// NoRetry makes one attempt.
var NoRetry = RetryPolicy{InitialInterval: time.Millisecond, Coefficient: 1, MaxInterval: time.Millisecond, MaxAttempts: 1}

func (p RetryPolicy) ceiling(retry int) time.Duration {
	coefficient := p.Coefficient
	if coefficient < 1 {
		coefficient = 1
	}
	grown := float64(p.InitialInterval) * math.Pow(coefficient, float64(min(retry, 64)))
	if p.MaxInterval > 0 && grown > float64(p.MaxInterval) {
		return p.MaxInterval
	}
	return time.Duration(grown)
}

// Delay is a jittered delay before retry number retry (0-based).
func (p RetryPolicy) Delay(retry int) time.Duration {
	c := p.ceiling(retry)
	jitter := min(max(p.Jitter, 0), 1)
	return time.Duration(float64(c) * (1 - jitter*rand.Float64()))
}

// allows says whether another attempt may follow attempts made attempts and elapsed time.
func (p RetryPolicy) allows(attempts int, elapsed, next time.Duration) bool {
	if p.MaxAttempts > 0 && attempts >= p.MaxAttempts {
		return false
	}
	return p.MaxElapsed <= 0 || elapsed+next <= p.MaxElapsed
}

// backoff walks through a policy's delays for one run of failures; reset after a success.
type backoff struct {
	policy   RetryPolicy
	failures int
}

func (b *backoff) next() time.Duration {
	d := b.policy.Delay(b.failures)
	b.failures++
	return d
}

func (b *backoff) reset() { b.failures = 0 }

// sleep waits d or until done is closed; false when done closed first.
func sleep(done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
