package baton

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestTestEnvRunsAHandlerLikeTheRunner(t *testing.T) {
	importRows := func(ctx context.Context, job *Job) (map[string]any, error) {
		for i := range 100 {
			if err := job.Heartbeat(ctx); err != nil {
				return nil, err
			}
			select {
			case <-job.ShuttingDown():
				return map[string]any{"stoppedEarly": true, "rows": i}, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			default:
			}
		}
		return map[string]any{"stoppedEarly": false}, nil
	}
	env := NewTestEnv("import", map[string]any{"rows": 100.0})
	env.OnHeartbeat = func(e *TestEnv) {
		if len(e.Heartbeats()) == 2 {
			e.RequestShutdown()
		}
	}
	out, err := env.Run(importRows)
	if err != nil || out["stoppedEarly"] != true || len(env.Heartbeats()) != 3 {
		t.Fatalf("%v %v after %d heartbeats", out, err, len(env.Heartbeats()))
	}

	lost := NewTestEnv("import", nil)
	lost.OnHeartbeat = func(e *TestEnv) { e.LoseLease() }
	if _, err := lost.Run(importRows); !IsConflict(err) {
		t.Fatalf("after a lost lease: %v", err)
	}

	bad := NewTestEnv("ratio", nil)
	_, err = bad.Run(func(context.Context, *Job) (map[string]any, error) { return map[string]any{"r": math.NaN()}, nil })
	var refused *NonRetryableError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "$.r is NaN") {
		t.Fatalf("%v", err)
	}
	_, err = bad.Run(func(context.Context, *Job) (map[string]any, error) { panic("boom") })
	if err == nil || err.Error() != "panic: boom" {
		t.Fatalf("%v", err)
	}
	if got := NewTestJob("t", nil).LockExpiresAt(); time.Until(got) < 29*time.Second {
		t.Fatalf("lease %v", got)
	}
}
