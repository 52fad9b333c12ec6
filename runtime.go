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

	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald/internal/gopool"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// DefaultTenant is a tenant name for programs that need only one: nothing
// makes it special.
const DefaultTenant = "default"

// Runtime runs workflows and activities registered with it, against one
// store, for every tenant (or those of Config.Tenants): a workflow or
// activity is registered once and serves them all, and free workers are
// shared fairly among the tenants that have work. Any number of runtimes
// may share a store: work is claimed with leases, so each instance's turns
// run on one runtime at a time.
type Runtime struct {
	store  storage.Store
	cfg    *Config
	logger *slog.Logger
	obs    Observer
	tracer trace.Tracer
	limits *limitCache
	door   *admission      // every event that enters: its clients', its turns', its bus's
	served map[string]bool // nil: every tenant

	clientsMu sync.Mutex
	clients   map[string]*Client

	unregLogged sync.Map // tenant, kind, name of unregistered work already logged

	mu          sync.RWMutex
	workflows   map[string]replay.WorkflowFunc
	activities  map[string]activityFunc
	busHandlers map[string]BusHandler

	bus busState

	turns atomic.Pointer[turnPool] // the turn loop's pool while it runs
	// gos runs the turns, the workflows' code, the activities and the bus's
	// claimed executions of the last Start on reused goroutines (see
	// newGoroutines); closed when its loops have ended.
	gos atomic.Pointer[gopool.Pool]

	life    sync.Mutex         // guards cancel and stopped
	cancel  context.CancelFunc // set while started, until stopped
	stopped chan struct{}      // closed when the loops of the last Start have ended
}

type activityFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// NewRuntime returns a runtime over store. Register workflows and
// activities, then Start it. It returns the *InvalidArgumentError of
// cfg.Validate (ErrInvalidArgument) for a config that can never work; cfg
// may be nil for every default.
func NewRuntime(store storage.Store, cfg *Config) (*Runtime, error) {
	if store == nil {
		return nil, errors.New("herald: NewRuntime: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	c.Observer = guardObserver(c.Observer, c.Logger)
	rt := &Runtime{
		store:      store,
		cfg:        c,
		logger:     c.Logger,
		obs:        c.Observer,
		tracer:     tracerOf(&c.ClientConfig),
		limits:     newLimitCache(store, c.Logger),
		clients:    map[string]*Client{},
		workflows:  map[string]replay.WorkflowFunc{},
		activities: map[string]activityFunc{},
	}
	rt.door = newAdmission(store, &c.ClientConfig, rt.limits, newDefCache(c.Clock))
	if c.Tenants != nil {
		rt.served = map[string]bool{}
		for _, t := range c.Tenants {
			rt.served[t] = true
		}
	}
	return rt, nil
}

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
	gos := r.newGoroutines()
	r.gos.Store(gos)
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); r.turnLoop(ctx) }()
	go func() { defer wg.Done(); r.busLoop(ctx) }()
	go func() { defer wg.Done(); r.activityLoop(ctx) }()
	go func() { defer wg.Done(); r.maintenanceLoop(ctx) }()
	go func() { wg.Wait(); gos.Close(); close(stopped) }()
	return nil
}

// goroutineIdle is how long a goroutine of the runtime's pool waits for
// work before it exits.
const goroutineIdle = 5 * time.Second

// newGoroutines returns the pool of goroutines the runtime's loops run
// their work on: a turn, its workflow's code, an activity attempt or a
// claimed bus execution each runs on a goroutine of its own, as with a go
// statement, but one reused from earlier work, whose stack has grown
// already (internal/gopool; docs/engine.md). It keeps a goroutine waiting
// for each that may run at once: two per turn worker (the turn and its
// workflow's code), one per activity and bus worker.
func (r *Runtime) newGoroutines() *gopool.Pool {
	return gopool.New(2*r.cfg.TurnWorkers+r.cfg.ActivityWorkers+r.cfg.Bus.Workers, goroutineIdle)
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
		r.abandonBus()
		return ctx.Err()
	}
}
