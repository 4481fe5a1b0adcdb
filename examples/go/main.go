// The order-fulfilment example's worker in Go (examples/order_fulfilment has the definition).
//
//	go run . worker        # run the handlers until Ctrl-C (then drain)
//	go run . sqs-worker    # the same, taking jobs from the outbox SQS queue
//	                       # (BATON_DISPATCH_MODE=outbox; the queue from sqs.FromEnv)
//	go run . walkthrough   # register the definition, run the worker, start an order,
//	                       # approve it and print the instance's output
//
// The server is $BATON_URL (default http://127.0.0.1:8080) with $BATON_API_KEY, or the key of a
// local baton dev (.baton/data/api-key, read from the working directory only: export it at the
// repository's root before coming here). README.md says more.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	baton "github.com/baton-dev/baton/sdk/go"
	"github.com/baton-dev/baton/sdk/go/sqs"
	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

func main() {
	mode := "worker"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var err error
	switch mode {
	case "worker":
		err = runWorker(false)
	case "sqs-worker":
		err = runWorker(true)
	case "walkthrough":
		err = walkthrough()
	default:
		err = fmt.Errorf("usage: %s [worker|sqs-worker|walkthrough]", filepath.Base(os.Args[0]))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func runWorker(outbox bool) error {
	client, err := baton.NewClient("")
	if err != nil {
		return err
	}
	ctx, stop := baton.SignalContext(context.Background())
	defer stop()
	var opts []baton.RunnerOption
	if outbox {
		transport, err := sqs.FromEnv(ctx, client)
		if err != nil {
			return err
		}
		opts = append(opts, baton.WithTransport(transport))
	}
	return baton.NewRunner(client, registry(), opts...).Run(ctx) // until Ctrl-C, then drains
}

// exampleDir is examples/order_fulfilment, next to this example.
func exampleDir() string {
	for _, dir := range []string{"../order_fulfilment", "examples/order_fulfilment"} {
		if _, err := os.Stat(filepath.Join(dir, "definition.json")); err == nil {
			return dir
		}
	}
	return "../order_fulfilment"
}

func walkthrough() error {
	ctx := context.Background()
	client, err := baton.NewClient("")
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(exampleDir(), "definition.json"))
	if err != nil {
		return err
	}
	def := &workflowv1.Definition{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, def); err != nil {
		return fmt.Errorf("definition.json: %w", err)
	}
	if def, err = client.RegisterDefinition(ctx, def); err != nil {
		return err
	}
	slog.Info("definition registered", "name", def.Name, "version", def.GetVersion())

	workerCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	stopped := make(chan error, 1)
	go func() { stopped <- baton.NewRunner(client, registry()).Run(workerCtx) }()

	rawInput, err := os.ReadFile(filepath.Join(exampleDir(), "input.json"))
	if err != nil {
		return err
	}
	input := &structpb.Struct{}
	if err := protojson.Unmarshal(rawInput, input); err != nil {
		return fmt.Errorf("input.json: %w", err)
	}
	inst, err := client.StartInstance(ctx, &workflowv1.StartInstanceRequest{DefinitionName: def.Name, Input: input})
	if err != nil {
		return err
	}
	slog.Info("order started", "instance_id", inst.Id)

	if _, err := waitFor(ctx, client, inst.Id, func(i *workflowv1.Instance) bool { return waiting(i, "approve") }); err != nil {
		return err
	}
	approval, _ := structpb.NewStruct(map[string]any{"approvedBy": "ada"})
	if _, err := client.CompleteUserTask(ctx, &workflowv1.CompleteUserTaskRequest{Id: inst.Id, StepId: "approve", VariablesToSet: approval}); err != nil {
		return err
	}
	done, err := waitFor(ctx, client, inst.Id, func(i *workflowv1.Instance) bool { return i.Status != "RUNNING" })
	if err != nil {
		return err
	}
	stopWorker()
	if err := <-stopped; err != nil {
		return err
	}
	output, _ := json.MarshalIndent(done.Output.AsInterface(), "", "  ")
	fmt.Printf("instance %s %s\n%s\n", done.Id, done.Status, output)
	if done.Status != "COMPLETED" {
		return fmt.Errorf("the order ended %s: %s", done.Status, done.Reason)
	}
	return nil
}

func waiting(i *workflowv1.Instance, stepID string) bool {
	for _, s := range i.Steps {
		if s.StepId == stepID && s.Status == "IN_PROGRESS" {
			return true
		}
	}
	return i.Status != "RUNNING"
}

func waitFor(ctx context.Context, client *baton.Client, id string, ok func(*workflowv1.Instance) bool) (*workflowv1.Instance, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		inst, err := client.GetInstance(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok(inst) {
			return inst, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("instance %s still %s after 60 s", id, inst.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
