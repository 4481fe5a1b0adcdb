// Package baton is the Go worker SDK of Baton, a workflow orchestration engine.
//
// A worker registers one handler per job type and runs a Runner: the runner polls Baton for
// jobs (long-poll), runs each job's handler on one of its slots, keeps the job's lease alive
// with heartbeats while the handler runs, and reports the outcome in batches:
//
//	registry := baton.NewRegistry()
//	registry.Register("charge-card", func(ctx context.Context, job *baton.Job) (map[string]any, error) {
//		if job.Input["amount"].(float64) <= 0 {
//			return nil, baton.NonRetryable(errors.New("nothing to charge"))
//		}
//		return map[string]any{"receipt": "R-1"}, nil
//	})
//	client, _ := baton.NewClient("http://127.0.0.1:8080")
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	err := baton.NewRunner(client, registry).Run(ctx) // returns after the drain
//
// A handler's outcome: a map (or nil) completes the job with those variables; an error wrapped
// with [NonRetryable] fails it at once; any other error fails it and the engine retries it per
// the step's policy ([WithNextRetryDelay] picks the delay of that one retry). [WithOutput] gives
// a failure an output, which the step keeps when that failure ends it.
//
// The [Client] also covers the rest of the API (definitions, instances, signals, user tasks)
// with types generated from the canonical proto (package workflowv1). It speaks REST JSON, or
// the Connect protocol in binary protobuf with [WithProtocol]([ProtocolConnect]) or
// BATON_PROTOCOL=connect: the same calls, answers and errors, so the runner is unchanged.
package baton
