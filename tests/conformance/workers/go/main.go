// The Go conformance worker: the table of handlers of tests/conformance/README.md on the Go
// SDK's runner. It prints READY once polling and STOPPED after a graceful stop has drained.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	baton "github.com/baton-dev/baton/sdk/go"
)

func main() {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance worker:", err)
		os.Exit(1)
	}
}

func run() error {
	prefix := os.Getenv("CONFORMANCE_JOB_PREFIX")
	parallelism := 4
	if s := os.Getenv("CONFORMANCE_PARALLELISM"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("CONFORMANCE_PARALLELISM=%q is not a positive number", s)
		}
		parallelism = n
	}
	registry := baton.NewRegistry()
	for name, handler := range handlers {
		registry.Register(prefix+name, handler)
	}
	// The wire comes from $BATON_PROTOCOL (rest or connect), as NewClient reads it.
	client, err := baton.NewClient(os.Getenv("BATON_URL"))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "conformance worker: %s over %s\n", client.URL(), client.Protocol())
	opts := []baton.RunnerOption{baton.WithParallelism(parallelism)}
	if id := os.Getenv("CONFORMANCE_WORKER_ID"); id != "" {
		opts = append(opts, baton.WithWorkerID(id))
	}
	// SIGTERM and SIGINT start the graceful stop; a repeated signal changes nothing (the suite
	// may signal twice), so signal.NotifyContext rather than baton.SignalContext, whose second
	// signal exits at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	runner := baton.NewRunner(client, registry, opts...)
	fmt.Println("READY")
	if err := runner.Run(ctx); err != nil {
		return err
	}
	fmt.Println("STOPPED")
	return nil
}

var handlers = map[string]baton.HandlerFunc{
	"echo": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"echoed": inputOf(job)}, nil
	},
	"fail-once": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		if job.Attempt == 1 {
			return nil, errors.New("fail-once: attempt 1")
		}
		return map[string]any{"attempt": job.Attempt}, nil
	},
	"non-retryable": func(context.Context, *baton.Job) (map[string]any, error) {
		return nil, baton.NonRetryable(errors.New("non-retryable: refused"))
	},
	"fail-with-output": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		output := map[string]any{"code": 42, "input": inputOf(job)}
		return nil, baton.NonRetryable(baton.WithOutput(errors.New("fail-with-output: refused"), output))
	},
	"retry-delay": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		if job.Attempt == 1 {
			delay := time.Duration(number(job, "delaySeconds") * float64(time.Second))
			return nil, baton.WithNextRetryDelay(errors.New("retry-delay: attempt 1"), delay)
		}
		return map[string]any{"attempt": job.Attempt}, nil
	},
	"job-info": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"jobId": job.ID, "instanceId": job.InstanceID, "stepId": job.StepID,
			"jobType": job.Type, "attempt": job.Attempt, "retriesRemaining": job.RetriesRemaining}, nil
	},
	"heartbeat": sleeper,
	"slow":      sleeper,
	"big-output": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"blob": strings.Repeat("x", int(number(job, "bytes")))}, nil
	},
	"big-input": func(_ context.Context, job *baton.Job) (map[string]any, error) {
		blob, _ := job.Input["blob"].(string)
		return map[string]any{"length": len([]rune(blob))}, nil
	},
	"bad-output": func(context.Context, *baton.Job) (map[string]any, error) {
		return map[string]any{"ratio": math.NaN()}, nil
	},
}

// sleeper waits input.sleepSeconds (the runner heartbeats meanwhile), then says so.
func sleeper(ctx context.Context, job *baton.Job) (map[string]any, error) {
	seconds := number(job, "sleepSeconds")
	select {
	case <-time.After(time.Duration(seconds * float64(time.Second))):
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return map[string]any{"slept": job.Input["sleepSeconds"]}, nil
}

func inputOf(job *baton.Job) any {
	if job.Input != nil {
		return job.Input
	}
	return map[string]any{}
}

func number(job *baton.Job, key string) float64 {
	f, _ := job.Input[key].(float64)
	return f
}
