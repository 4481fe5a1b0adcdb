package baton

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
)

// HandlerFunc runs one job. It returns the variables to set on the instance (nil for none),
// or an error: wrapped with [NonRetryable] the job fails at once, any other error fails it and
// the engine retries it per the step's policy ([WithNextRetryDelay] picks that retry's delay;
// [WithOutput] gives the failure an output, kept as the step's when no retry follows).
//
// ctx is cancelled when the job's lease is lost (the instance was cancelled, or the lease
// lapsed and another worker took the job); context.Cause(ctx) is then [ErrLeaseLost]. It is
// not cancelled when the runner is stopping: the runner waits for the handler (see
// [Job.ShuttingDown]).
type HandlerFunc func(ctx context.Context, job *Job) (map[string]any, error)

// Registry holds one handler per job type. Safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]HandlerFunc
}

// NewRegistry is an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]HandlerFunc{}} }

var jobTypePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// Register sets the handler of jobType. It panics on an invalid job type, a nil handler or a
// second handler for the same type (programming errors, found at start-up); use
// [Registry.Replace] to replace one on purpose.
func (r *Registry) Register(jobType string, handler HandlerFunc) {
	if err := r.add(jobType, handler, false); err != nil {
		panic(err)
	}
}

// Replace sets the handler of jobType, replacing any.
func (r *Registry) Replace(jobType string, handler HandlerFunc) {
	if err := r.add(jobType, handler, true); err != nil {
		panic(err)
	}
}

func (r *Registry) add(jobType string, handler HandlerFunc, replace bool) error {
	if !jobTypePattern.MatchString(jobType) {
		return fmt.Errorf("baton: invalid job type %q (1-128 characters: letters, digits, _ . : -, starting with a letter or digit)", jobType)
	}
	if handler == nil {
		return fmt.Errorf("baton: nil handler for job type %q", jobType)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handlers == nil {
		r.handlers = map[string]HandlerFunc{}
	}
	if _, taken := r.handlers[jobType]; taken && !replace {
		return fmt.Errorf("baton: job type %q already has a handler (use Replace)", jobType)
	}
	r.handlers[jobType] = handler
	return nil
}

// Handler is the handler of jobType, or nil.
func (r *Registry) Handler(jobType string) HandlerFunc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.handlers[jobType]
}

// JobTypes are the registered job types, sorted.
func (r *Registry) JobTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	types := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}
