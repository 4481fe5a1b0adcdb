package baton_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	baton "github.com/baton-dev/baton/sdk/go"
)

func ExampleRegistry_Register() {
	registry := baton.NewRegistry()
	registry.Register("charge-card", func(ctx context.Context, job *baton.Job) (map[string]any, error) {
		var in struct {
			Amount float64 `json:"amount"`
		}
		if err := job.Decode(&in); err != nil {
			return nil, baton.NonRetryable(err) // a bad input will not get better
		}
		if in.Amount <= 0 {
			return nil, baton.NonRetryable(errors.New("nothing to charge"))
		}
		if job.Attempt == 1 {
			// The gateway asked to come back in 30 s: the engine waits that long for this retry.
			return nil, baton.WithNextRetryDelay(errors.New("rate limited"), 30*time.Second)
		}
		job.Logger.Info("charging", "amount", in.Amount)
		return map[string]any{"receipt": "R-1001"}, nil
	})
	fmt.Println(registry.JobTypes())
	// Output: [charge-card]
}

func ExampleWithOutput() {
	registry := baton.NewRegistry()
	registry.Register("charge-card", func(ctx context.Context, job *baton.Job) (map[string]any, error) {
		// The step fails, and keeps this as its output: an optional step's successors read it.
		declined := map[string]any{"code": "card_declined", "retryable": false}
		return nil, baton.NonRetryable(baton.WithOutput(errors.New("card declined"), declined))
	})
	fmt.Println(registry.JobTypes())
	// Output: [charge-card]
}

func ExampleRunner_Run() {
	registry := baton.NewRegistry()
	registry.Register("ship-parcel", func(ctx context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"tracking": "TRK-1"}, nil
	})
	client, err := baton.NewClient("http://127.0.0.1:8080") // the key: $BATON_API_KEY or baton dev's
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := baton.SignalContext(context.Background()) // SIGINT/SIGTERM start the drain
	defer stop()
	runner := baton.NewRunner(client, registry, baton.WithParallelism(16), baton.WithWorkerID("shipping-1"))
	if err := runner.Run(ctx); err != nil { // returns once in-flight jobs are done and reported
		log.Fatal(err)
	}
}

func ExampleNewTestJob() {
	handler := func(_ context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"twice": job.Input["n"].(float64) * 2}, nil
	}
	out, err := handler(context.Background(), baton.NewTestJob("double", map[string]any{"n": 21.0}))
	fmt.Println(out, err)
	// Output: map[twice:42] <nil>
}
