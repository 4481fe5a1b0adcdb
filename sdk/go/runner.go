package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport is where a runner's jobs come from when it does not poll Baton itself (the SQS
// outbox transport: package sqs). Fetch returns up to maxJobs jobs, each already leased to
// workerID; it should wait a little for work itself (a long poll) rather than return empty at
// once.
type Transport interface {
	Fetch(ctx context.Context, workerID string, jobTypes []string, maxJobs int) ([]ClaimedJob, error)
}

// Runner polls Baton for jobs and runs their handlers. See [NewRunner].
type Runner struct {
	client   *Client
	registry *Registry
	opts     runnerOptions
	logger   *slog.Logger
	jobTypes []string

	slots    *slots
	handlers chan struct{} // the parallelism semaphore of running handlers
	flusher  *flusher
	stopping <-chan struct{} // Run's ctx.Done(): closed when the runner is asked to stop
	started  atomic.Bool

	handlerCtx     context.Context
	cancelHandler  context.CancelCauseFunc
	longPoll       bool
	stopSignalSent bool // by the poll loop's goroutine (fetch), then read by Run after it
}

// stopPollGrace is how long a long-poll out at a stop may take to answer once the stop signal
// is sent (the server ends its wait at the signal, or within a second behind RDS Proxy) before
// the runner abandons it. A variable for the tests.
var stopPollGrace = 3 * time.Second

// NewRunner is a runner of registry's handlers against client's server.
func NewRunner(client *Client, registry *Registry, opts ...RunnerOption) *Runner {
	o := defaultRunnerOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return &Runner{client: client, registry: registry, opts: o,
		logger: o.logger.With("worker_id", o.workerID),
		slots:  newSlots(max(o.parallelism, 0) + o.prefetched())}
}

// WorkerID is the id the runner claims jobs with.
func (r *Runner) WorkerID() string { return r.opts.workerID }

// InFlight is how many claimed jobs the runner holds (running or waiting for a handler, until
// their outcome is handed over): 0 before Run and after it returns.
func (r *Runner) InFlight() int {
	return r.slots.inUse()
}

// JobTypes is what the runner polls for: WithJobTypes, else every registered type.
func (r *Runner) JobTypes() []string {
	if types := r.opts.jobTypes; len(types) > 0 {
		return append([]string(nil), types...)
	}
	if r.registry == nil {
		return nil
	}
	return r.registry.JobTypes()
}

// Run polls and runs jobs until ctx is done, then drains: it claims nothing more, waits for
// every in-flight handler to finish and its result to be sent, and returns nil. It returns an
// error at once for a configuration that cannot work (no handlers, a bad option), and after
// the drain if the drain timeout passed first. A runner runs once.
func (r *Runner) Run(ctx context.Context) error {
	if r.client == nil || r.registry == nil {
		return errors.New("baton: NewRunner needs a client and a registry")
	}
	if err := r.opts.validate(); err != nil {
		return err
	}
	types, err := r.resolveJobTypes()
	if err != nil {
		return err
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("baton: this runner has already run (a runner runs once)")
	}
	r.jobTypes = types
	r.handlers = make(chan struct{}, r.opts.parallelism)
	r.stopping = ctx.Done()
	r.longPoll = r.opts.longPollWait > 0 && r.opts.transport == nil
	// Handlers outlive Run's context (the drain waits for them) but keep its values.
	r.handlerCtx, r.cancelHandler = context.WithCancelCause(context.WithoutCancel(ctx))
	defer r.cancelHandler(nil)
	if r.opts.batchResults {
		r.flusher = newFlusher(r.client, r.opts.reportRetry, r.opts.flushInterval, r.opts.maxResultsPerFlush, r.logger)
		r.flusher.start()
	}
	r.logger.Info("runner started", "url", r.client.URL(), "job_types", r.jobTypes, "parallelism", r.opts.parallelism)
	r.pollLoop(ctx)
	if r.opts.transport == nil && !r.stopSignalSent {
		// Polling is over: say so, so that whoever watches (the server's waits, an operator, a
		// test) knows this worker claims nothing more from here on.
		r.sendStopSignal()
	}
	return r.drain()
}

func (r *Runner) resolveJobTypes() ([]string, error) {
	types := r.opts.jobTypes
	if len(types) == 0 {
		types = r.registry.JobTypes()
	}
	if len(types) == 0 {
		return nil, errors.New("baton: no job types: register a handler first (or pass WithJobTypes)")
	}
	for _, t := range types {
		if r.registry.Handler(t) == nil {
			return nil, fmt.Errorf("baton: no handler registered for job type %q", t)
		}
	}
	return types, nil
}

func (r *Runner) isStopping() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

func (r *Runner) pollLoop(ctx context.Context) {
	o := &r.opts
	idle := backoff{policy: RetryPolicy{InitialInterval: o.pollInterval, Coefficient: 2, MaxInterval: o.maxPollInterval, Jitter: 0.2}}
	failures := backoff{policy: o.pollErrors}
	var wait time.Duration // the first poll answers at once; one after an empty or short one may wait
	for !r.isStopping() {
		wanted := r.slots.acquireUpTo(r.stopping, o.maxJobsPerPoll, o.gatherInterval, max(1, o.maxJobsPerPoll/2))
		if wanted == 0 {
			return
		}
		if r.isStopping() {
			r.slots.release(wanted)
			return
		}
		started := time.Now()
		jobs, abandoned, err := r.fetch(ctx, wanted, wait)
		if abandoned {
			return
		}
		if err != nil {
			r.slots.release(wanted)
			if wait > 0 && refusesWait(err) {
				r.logger.Warn("the server does not take waitSeconds; polling short", "error", err.Error())
				r.longPoll, wait = false, 0
				continue
			}
			delay := failures.next()
			var apiErr *APIError
			if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
				delay = max(delay, min(apiErr.RetryAfter, o.pollErrors.MaxInterval))
			}
			r.notify(func(m Metrics) { m.PollFailed(err) })
			r.logPollError(err, delay)
			sleep(r.stopping, delay)
			continue
		}
		failures.reset()
		took := time.Since(started)
		r.notify(func(m Metrics) { m.PollCompleted(wanted, len(jobs), took) })
		r.slots.release(wanted - len(jobs))
		for _, job := range jobs { // also when stopping: they are leased to this worker
			go r.execute(job)
		}
		if r.isStopping() {
			return
		}
		if r.opts.transport == nil && r.longPoll {
			wait = r.nextWait(len(jobs), wanted, wait, time.Since(started), &idle)
			continue
		}
		if w, ok := r.opts.transport.(interface{ WaitsForWork() bool }); ok && w.WaitsForWork() {
			continue
		}
		if len(jobs) == 0 {
			sleep(r.stopping, idle.next())
			continue
		}
		idle.reset()
		if len(jobs) < wanted {
			sleep(r.stopping, o.pollInterval)
		}
	}
}

// nextWait pauses if need be after a poll (long-poll on) and says how long the next poll may
// wait on the server. A full batch polls again at once. Otherwise the next poll long-polls,
// but only once no job is in flight: a long-poll outlives a worker that crashes, on the
// server, where it may still claim a job nobody will run; crashes happen mid-job.
func (r *Runner) nextWait(got, wanted int, wait, took time.Duration, idle *backoff) time.Duration {
	if got >= wanted {
		idle.reset()
		return 0
	}
	if got > 0 {
		idle.reset()
	} else if wait > 0 && took < wait/2 {
		sleep(r.stopping, idle.next()) // an empty long-poll that did not wait: do not spin
	}
	if r.slots.inUse() == 0 {
		return r.opts.longPollWait
	}
	if r.slots.waitIdle(r.stopping, idle.next()) && !r.isStopping() {
		return r.opts.longPollWait
	}
	return 0
}

// fetch polls (or asks the transport) for up to wanted jobs. A short poll, and a transport's
// fetch, are let finish at a stop: the jobs they claim are run in the drain.
//
// A long-poll out at a stop is not cancelled at once: its answer may carry jobs the server has
// just claimed for this worker (the claim committed, the answer on its way), which would then sit
// leased until their leases lapse. The runner sends the worker's stop signal, which ends the
// server's wait without claiming again, and takes the answer; its jobs run in the drain (the poll
// asked for no more than free slots). Only a poll still unanswered stopPollGrace after the signal
// is cancelled (abandoned: what it claimed goes back to work when its leases lapse, as after a
// crash).
func (r *Runner) fetch(ctx context.Context, wanted int, wait time.Duration) (jobs []ClaimedJob, abandoned bool, err error) {
	if r.opts.transport != nil {
		jobs, err = r.opts.transport.Fetch(context.WithoutCancel(ctx), r.opts.workerID, r.jobTypes, wanted)
		return jobs, false, err
	}
	req := PollRequest{WorkerID: r.opts.workerID, JobTypes: r.jobTypes, MaxJobs: wanted, Wait: wait}
	if wait <= 0 {
		jobs, err = r.client.PollJobs(context.WithoutCancel(ctx), req)
		return jobs, false, err
	}
	pollCtx, cancelPoll := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPoll()
	type answer struct {
		jobs []ClaimedJob
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		jobs, err := r.client.PollJobs(pollCtx, req)
		answered <- answer{jobs, err}
	}()
	select {
	case a := <-answered:
		return a.jobs, false, a.err
	case <-r.stopping:
	}
	r.sendStopSignal()
	r.stopSignalSent = true
	grace := time.NewTimer(stopPollGrace)
	defer grace.Stop()
	select {
	case a := <-answered:
		if a.err != nil { // nothing to run: the loop ends here
			r.slots.release(wanted)
			r.logger.Debug("the long-poll out at the stop failed", "error", a.err.Error())
			return nil, true, nil
		}
		return a.jobs, false, nil
	case <-grace.C:
		cancelPoll()
		<-answered
		r.slots.release(wanted)
		r.logger.Warn("stopping: the long-poll was not answered in time after the stop signal; abandoned it (jobs it claims go back to work when their leases lapse)",
			"grace_s", stopPollGrace.Seconds())
		return nil, true, nil
	}
}

func (r *Runner) sendStopSignal() {
	err := r.client.StopWorker(context.Background(), r.opts.workerID)
	if err == nil {
		r.logger.Debug("stop signal sent")
		return
	}
	if HasStatus(err, 404) || HasStatus(err, 405) {
		r.logger.Debug("stop signal not sent", "error", err.Error())
	} else {
		r.logger.Warn("stop signal not sent", "error", err.Error())
	}
}

func (r *Runner) logPollError(err error, delay time.Duration) {
	if IsTransient(err) {
		r.logger.Warn("poll failed; backing off", "error", err.Error(), "retry_in_s", delay.Seconds())
	} else {
		r.logger.Error("poll refused; backing off", "error", err.Error(), "retry_in_s", delay.Seconds())
	}
}

// refusesWait: a 422 naming waitSeconds, from a server that predates long-poll.
func refusesWait(err error) bool {
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 422 {
		return false
	}
	for _, item := range apiErr.Errors {
		if item.Path == "waitSeconds" || item.Path == "$.waitSeconds" {
			return true
		}
	}
	return false
}

// drain waits for in-flight handlers and their results (the runner claims nothing more).
func (r *Runner) drain() error {
	inFlight := r.slots.inUse()
	if inFlight > 0 {
		r.logger.Info("stopping: draining in-flight jobs", "in_flight", inFlight)
	}
	var failure error
	if !r.slots.waitIdle(nil, r.opts.drainTimeout) {
		r.cancelHandler(errors.New("baton: the runner's drain timed out"))
		failure = fmt.Errorf("baton: drain timed out with %d job(s) in flight; they will be delivered again after their leases", r.slots.inUse())
		r.logger.Warn("drain timed out; unfinished jobs will be delivered again after their leases", "in_flight", r.slots.inUse())
	}
	if r.flusher != nil && !r.flusher.close(r.opts.drainTimeout) {
		r.logger.Warn("results still unflushed at stop; their jobs will be delivered again", "waiting", r.flusher.waiting())
		if failure == nil {
			failure = errors.New("baton: results still unflushed at stop")
		}
	}
	r.logger.Info("runner stopped")
	return failure
}

// SignalContext is a context cancelled at the first SIGINT or SIGTERM (a runner given it
// drains); a second signal exits the process at once (128 + the signal), leaving in-flight
// jobs to their leases. stop releases the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		count := 0
		for {
			select {
			case sig := <-signals:
				count++
				if count > 1 {
					code := 130
					if sig == syscall.SIGTERM {
						code = 143
					}
					slog.Warn("second signal: exiting without waiting; in-flight jobs will be delivered again when their leases expire", "signal", sig.String())
					os.Exit(code)
				}
				slog.Info("signal received: stopping after the drain", "signal", sig.String())
				cancel()
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		cancel()
	}
}
