package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// DefaultTenant is the tenant used when Config.Tenant is empty.
const DefaultTenant = "default"

// Config configures a Runtime or a Client. Zero fields take the defaults
// stated on each.
type Config struct {
	// Tenant the runtime or client is bound to; nothing is ever read or
	// written across tenants. Default "default".
	Tenant string
	// Logger for the engine's own lines (drops are logged at WARN). Default
	// slog.Default().
	Logger *slog.Logger
	// MaxUnconsumedEvents caps buffered positional events per instance
	// across names; past it an event is dropped (fate dropped/limit).
	// Default 100.
	MaxUnconsumedEvents int
	// MaxCarryForwardExecutions: a buffered event is carried across at most
	// this many continue-as-new boundaries, then dropped (fate
	// dropped/carry_forward_limit). Default 5.
	MaxCarryForwardExecutions int
	// MaxQueuedEvents caps unconsumed queue-lane messages per instance
	// across queues; past it a message is dropped (fate dropped/limit), and
	// continue-as-new carries at most this many (the oldest), dropping the
	// rest (carry_forward_limit). Default 20.
	MaxQueuedEvents int
	// MaxPayloadBytes caps an event payload; a larger one is refused with
	// ErrEventInvalid. Default 1 MiB.
	MaxPayloadBytes int
	// MaxPayloadDepth caps how deeply JSON arrays and objects may nest in an
	// event payload, a workflow input or an activity result; a deeper one is
	// refused (ErrEventInvalid, ErrInvalidArgument, or a non-retryable
	// activity failure) before anything is stored. At most
	// MaxPayloadDepthLimit. Default 128.
	MaxPayloadDepth int
	// EventRetention is how long an event sent to an instance that has not
	// started is kept before it is dropped (fate dropped/expired), unless
	// its event definition says otherwise. Default 24 h.
	EventRetention time.Duration
	// ExpiryInterval is how often the runtime's maintenance runs: expiry
	// of events kept for instances that never started and of correlated
	// events past their TTL. Among runtimes sharing a store, only the
	// elected leader runs it. Default 1 min.
	ExpiryInterval time.Duration
	// TurnWorkers is how many instance turns run at once. A turn spends most
	// of its time waiting for the store, and the store merges the claims and
	// commits of concurrent turns into one transaction (group commit), so
	// this is what lets one runtime keep the storage busy. Default 64.
	TurnWorkers int
	// ActivityWorkers is how many activities run at once. Default 16.
	ActivityWorkers int
	// TurnLease is how long a claimed turn is owned before another worker
	// may take it over. Default 30 s.
	TurnLease time.Duration
	// ActivityLease is how long a claimed activity is owned without a
	// heartbeat; the worker heartbeats at a third of it. Default 60 s.
	ActivityLease time.Duration
	// PollInterval is the fallback poll when no wake-up signal arrives.
	// Default 500 ms.
	PollInterval time.Duration
	// DefaultRetry fills zero fields of activity retry policies. Default 3
	// attempts, 1 s initial interval, ×2 backoff, 1 min cap.
	DefaultRetry RetryPolicy
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxSchemaBytes caps the size of an event definition's JSON Schema:
	// PutEventDefinition refuses a larger one with ErrDefinitionInvalid,
	// and an event whose stored definition has a larger one (put through a
	// client with a larger cap) is refused with ErrDefinitionInvalid
	// without compiling it. Default 256 KiB.
	MaxSchemaBytes int
}

// WithDefaults returns a copy of c with defaults filled in.
func (c *Config) WithDefaults() *Config {
	out := Config{}
	if c != nil {
		out = *c
	}
	if out.Tenant == "" {
		out.Tenant = DefaultTenant
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.MaxUnconsumedEvents <= 0 {
		out.MaxUnconsumedEvents = 100
	}
	if out.MaxCarryForwardExecutions <= 0 {
		out.MaxCarryForwardExecutions = 5
	}
	if out.MaxQueuedEvents <= 0 {
		out.MaxQueuedEvents = 20
	}
	if out.MaxPayloadBytes <= 0 {
		out.MaxPayloadBytes = 1 << 20
	}
	if out.MaxPayloadDepth <= 0 {
		out.MaxPayloadDepth = DefaultMaxPayloadDepth
	}
	if out.EventRetention <= 0 {
		out.EventRetention = 24 * time.Hour
	}
	if out.ExpiryInterval <= 0 {
		out.ExpiryInterval = time.Minute
	}
	if out.TurnWorkers <= 0 {
		out.TurnWorkers = 64
	}
	if out.ActivityWorkers <= 0 {
		out.ActivityWorkers = 16
	}
	if out.TurnLease <= 0 {
		out.TurnLease = 30 * time.Second
	}
	if out.ActivityLease <= 0 {
		out.ActivityLease = time.Minute
	}
	if out.PollInterval <= 0 {
		out.PollInterval = 500 * time.Millisecond
	}
	r := &out.DefaultRetry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 3
	}
	if r.InitialInterval <= 0 {
		r.InitialInterval = time.Second
	}
	if r.BackoffCoefficient < 1 {
		r.BackoffCoefficient = 2
	}
	if r.MaxInterval <= 0 {
		r.MaxInterval = time.Minute
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.MaxSchemaBytes <= 0 {
		out.MaxSchemaBytes = 256 << 10
	}
	return &out
}

// Runtime runs workflows and activities registered with it, against one
// store and one tenant. Any number of runtimes may share a store: work is
// claimed with leases, so each instance's turns run on one runtime at a time.
type Runtime struct {
	store  storage.Store
	cfg    *Config
	logger *slog.Logger
	client *Client

	mu         sync.RWMutex
	workflows  map[string]replay.WorkflowFunc
	activities map[string]activityFunc

	life    sync.Mutex         // guards cancel and stopped
	cancel  context.CancelFunc // set while started, until stopped
	stopped chan struct{}      // closed when the loops of the last Start have ended

	stats Stats
}

// Stats are the runtime's counters.
type Stats struct {
	Turns         atomic.Int64
	TurnsFailed   atomic.Int64 // commit errors, including lost leases
	LeasesLost    atomic.Int64
	ActivitiesRun atomic.Int64
	// InstancesUnreplayable counts instances failed because a stored row of
	// theirs could not be decoded or the engine refused their history.
	InstancesUnreplayable atomic.Int64
	EventsDropped         atomic.Int64
	dropsByReasonMu       sync.Mutex
	dropsByReason         map[string]int64
}

// DroppedByReason returns the count of dropped events per reason.
func (s *Stats) DroppedByReason() map[string]int64 {
	s.dropsByReasonMu.Lock()
	defer s.dropsByReasonMu.Unlock()
	out := make(map[string]int64, len(s.dropsByReason))
	for k, v := range s.dropsByReason {
		out[k] = v
	}
	return out
}

func (s *Stats) countDrop(reason string) { s.countDrops(reason, 1) }

// countDrops counts n dropped events of one reason (a burst: one lock).
func (s *Stats) countDrops(reason string, n int64) {
	s.EventsDropped.Add(n)
	s.dropsByReasonMu.Lock()
	if s.dropsByReason == nil {
		s.dropsByReason = map[string]int64{}
	}
	s.dropsByReason[reason] += n
	s.dropsByReasonMu.Unlock()
}

type activityFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// NewRuntime returns a runtime over store. Register workflows and
// activities, then Start it.
func NewRuntime(store storage.Store, cfg *Config) (*Runtime, error) {
	if store == nil {
		return nil, errors.New("herald: NewRuntime: nil store")
	}
	c := cfg.WithDefaults()
	if c.MaxPayloadDepth > MaxPayloadDepthLimit {
		return nil, fmt.Errorf("herald: NewRuntime: MaxPayloadDepth %d is over the limit of %d: %w",
			c.MaxPayloadDepth, MaxPayloadDepthLimit, ErrInvalidArgument)
	}
	rt := &Runtime{
		store:      store,
		cfg:        c,
		logger:     c.Logger,
		workflows:  map[string]replay.WorkflowFunc{},
		activities: map[string]activityFunc{},
	}
	rt.client = &Client{store: store, cfg: c, stats: &rt.stats}
	return rt, nil
}

// Client returns a client bound to the runtime's store and tenant.
func (r *Runtime) Client() *Client { return r.client }

// Stats returns the runtime's counters.
func (r *Runtime) Stats() *Stats { return &r.stats }

// RegisterWorkflow registers fn under name. The input and result travel as
// JSON. Registering a name twice replaces the function.
func RegisterWorkflow[I, O any](r *Runtime, name string, fn func(ctx *Context, input I) (O, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workflows[name] = func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
		var in I
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("herald: decode input of workflow %s: %w", name, err)
			}
		}
		out, err := fn(&Context{s: s, rt: r}, in)
		if err != nil {
			return nil, err
		}
		return encodeResult("workflow "+name, out, r.cfg.MaxPayloadDepth)
	}
}

// encodeResult encodes a workflow's or an activity's result, refusing one
// that could not be stored (see Config.MaxPayloadDepth).
func encodeResult(what string, v any, maxDepth int) (json.RawMessage, error) {
	raw, reasons := encodeJSON(nil, "result of "+what, v, maxDepth)
	if len(reasons) > 0 {
		return nil, &InvalidArgumentError{Op: what, Reasons: reasons}
	}
	return raw, nil
}

// RegisterActivity registers fn under name. Activities run at least once;
// ActivityInfoFrom(ctx) gives the attempt and an idempotency key.
func RegisterActivity[I, O any](r *Runtime, name string, fn func(ctx context.Context, input I) (O, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activities[name] = func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
		var in I
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, NonRetryable(fmt.Errorf("decode input of activity %s: %w", name, err))
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

func (r *Runtime) workflow(name string) replay.WorkflowFunc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.workflows[name]
}

func (r *Runtime) activity(name string) activityFunc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.activities[name]
}

// Start starts the runtime's workers. They run until Stop or until ctx is
// cancelled. A stopped runtime may be started again. Start returns
// ErrRuntimeStarted while the runtime runs, or while a Stop that gave up
// waiting still has work finishing.
func (r *Runtime) Start(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	if r.stopped != nil {
		select {
		case <-r.stopped: // stopped, or its ctx ended: it may start again
		default:
			if r.cancel != nil {
				return fmt.Errorf("start: %w (call Stop first)", ErrRuntimeStarted)
			}
			return fmt.Errorf("start: %w: the previous Stop has in-flight work still finishing", ErrRuntimeStarted)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	r.cancel, r.stopped = cancel, stopped
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.turnLoop(ctx) }()
	go func() { defer wg.Done(); r.activityLoop(ctx) }()
	go func() { defer wg.Done(); r.maintenanceLoop(ctx) }()
	go func() { wg.Wait(); close(stopped) }()
	return nil
}

// Stop stops claiming work and waits for in-flight turns and activities to
// finish (or ctx to end). Turns are short; an activity still running when ctx
// ends is abandoned and its lease expires, so another node retries it. Stop
// on a runtime that is not running returns nil.
func (r *Runtime) Stop(ctx context.Context) error {
	r.life.Lock()
	cancel, stopped := r.cancel, r.stopped
	r.cancel = nil
	r.life.Unlock()
	if cancel == nil && stopped == nil {
		return nil
	}
	if cancel != nil {
		cancel()
	}
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
