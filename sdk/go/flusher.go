package baton

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// maxBatch is the API's limit on results per complete-batch call.
const maxBatch = 100

// flushMaxBytes keeps a flush's body well under the API's inline limit.
const flushMaxBytes = 1_000_000

var errFlusherClosed = errors.New("baton: the runner has stopped; result not sent")

type pendingResult struct {
	item         ResultItem
	size         int
	onAnswer     func(BatchOutcome)
	onUnreported func(error)
}

// flusher sends results in batches: a job hands its result over and its slot frees at once;
// one goroutine sends what gathered with POST /v1/jobs/complete-batch every interval (at once
// when maxBatch wait), and everything left at close. A failed flush is sent again, whole, per
// the report retry policy (an item already applied answers DUPLICATE); a batch refused whole
// (400, 413, 422) goes again one item at a time; a server without the route gets single calls.
type flusher struct {
	client   *Client
	retry    RetryPolicy
	interval time.Duration
	max      int
	logger   *slog.Logger

	mu        sync.Mutex
	pending   []pendingResult
	bytes     int
	inFlight  int
	closing   bool
	stopped   bool
	wake      chan struct{}
	done      chan struct{}
	noBatches bool
	flushes   int
}

func newFlusher(client *Client, retry RetryPolicy, interval time.Duration, maxItems int, logger *slog.Logger) *flusher {
	return &flusher{client: client, retry: retry, interval: interval, max: maxItems, logger: logger,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (f *flusher) start() { go f.run() }

func (f *flusher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *flusher) submit(item ResultItem, onAnswer func(BatchOutcome), onUnreported func(error)) {
	size := len(item.VariablesToSet) + 200
	if item.Failure != nil {
		size += len(item.Failure.Output)
	}
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		onUnreported(errFlusherClosed)
		return
	}
	f.pending = append(f.pending, pendingResult{item, size, onAnswer, onUnreported})
	f.bytes += size
	f.mu.Unlock()
	f.signal()
}

// waiting is the results handed over and not yet answered.
func (f *flusher) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending) + f.inFlight
}

// close flushes what is left and stops; false if timeout (negative: none) passed first.
func (f *flusher) close(timeout time.Duration) bool {
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	f.signal()
	if timeout < 0 {
		<-f.done
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-t.C:
		return false
	}
}

func (f *flusher) run() {
	defer close(f.done)
	for {
		batch := f.next()
		if batch == nil {
			return
		}
		f.send(batch)
		f.mu.Lock()
		f.inFlight -= len(batch)
		f.mu.Unlock()
	}
}

func (f *flusher) full() bool { return len(f.pending) >= f.max || f.bytes >= flushMaxBytes }

// next waits for results, then up to interval for more (unless full or closing); nil once
// closed and empty.
func (f *flusher) next() []pendingResult {
	f.mu.Lock()
	for len(f.pending) == 0 {
		if f.closing {
			f.stopped = true
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		<-f.wake
		f.mu.Lock()
	}
	deadline := time.Now().Add(f.interval)
	for !f.full() && !f.closing {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		f.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-f.wake:
		case <-t.C:
		}
		t.Stop()
		f.mu.Lock()
	}
	n, size := 0, 0
	for _, p := range f.pending {
		if n > 0 && (n >= f.max || size+p.size > flushMaxBytes) {
			break
		}
		n++
		size += p.size
	}
	batch := make([]pendingResult, n)
	copy(batch, f.pending[:n])
	f.pending = append(f.pending[:0], f.pending[n:]...)
	f.bytes -= size
	f.inFlight += n
	f.mu.Unlock()
	return batch
}

func (f *flusher) send(batch []pendingResult) {
	f.flushes++
	ctx := context.Background()
	if !f.noBatches {
		items := make([]ResultItem, len(batch))
		for i, p := range batch {
			items[i] = p.item
		}
		answers, err := f.client.completeBatch(ctx, items, &f.retry)
		if err == nil {
			for i, p := range batch {
				if i < len(answers) {
					p.onAnswer(answers[i])
				} else {
					p.onUnreported(errors.New("baton: the batch's answer had no outcome for this result"))
				}
			}
			return
		}
		var apiErr *APIError
		switch {
		case errors.As(err, &apiErr) && (apiErr.Status == 400 || apiErr.Status == 413 || apiErr.Status == 422):
			// Refused whole (an item the server cannot read): each on its own, so the bad one
			// is answered alone (and its job failed with the reason) and the rest land.
			f.logger.Warn("a batch of results was refused whole; sending them one by one", "error", err.Error(), "results", len(batch))
		case errors.As(err, &apiErr) && (apiErr.Status == 404 || apiErr.Status == 405):
			f.logger.Warn("the server has no batch completion; reporting results one by one")
			f.noBatches = true
		default:
			for _, p := range batch {
				p.onUnreported(err)
			}
			return
		}
	}
	for _, p := range batch {
		f.sendOne(ctx, p)
	}
}

func (f *flusher) sendOne(ctx context.Context, p pendingResult) {
	item := p.item
	var result *JobResult
	var err error
	if item.Failure != nil {
		attempt := 0
		if item.Attempt != nil {
			attempt = *item.Attempt
		}
		result, err = f.client.failJob(ctx, item.JobID, item.WorkerID, attempt, *item.Failure, &f.retry)
	} else {
		result, err = f.client.completeJob(ctx, item, &f.retry)
	}
	if err != nil {
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Transient() || apiErr.Status == 401 || apiErr.Status == 403 {
			p.onUnreported(err)
			return
		}
		outcome := "INVALID"
		switch apiErr.Status {
		case 404:
			outcome = "NOT_FOUND"
		case 409:
			outcome = "CONFLICT"
		}
		p.onAnswer(BatchOutcome{JobID: item.JobID, Outcome: outcome, Error: apiErr.Summary()})
		return
	}
	outcome := "DUPLICATE"
	if result.Applied {
		outcome = "APPLIED"
	}
	p.onAnswer(BatchOutcome{JobID: item.JobID, Outcome: outcome, Status: result.Status, NextAttemptAt: result.NextAttemptAt})
}
