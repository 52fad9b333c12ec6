package herald

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald/clock"
)

// Engine defaults: what a zero Config or ClientConfig field means.
const (
	DefaultMaxPayloadBytes           = 1 << 20
	DefaultMaxSchemaBytes            = 256 << 10
	DefaultEventRetention            = 24 * time.Hour
	DefaultMaxUnconsumedEvents       = 100
	DefaultMaxCarryForwardExecutions = 5
	DefaultMaxQueuedEvents           = 20
	DefaultExpiryInterval            = time.Minute
	DefaultTurnWorkers               = 64
	DefaultActivityWorkers           = 16
	DefaultTurnLease                 = 30 * time.Second
	DefaultActivityLease             = time.Minute
	DefaultPollInterval              = 500 * time.Millisecond
)

// ClientConfig configures a Client: what sending events, starting
// workflows and reading state need. A zero field means the default stated
// on it; a value that can never work (negative, contradictory) is refused
// by Validate, which NewClient calls, and never silently replaced.
type ClientConfig struct {
	// Logger for the engine's own lines (drops are logged at WARN). Default
	// slog.Default().
	Logger *slog.Logger
	// Clock is the one source of time of the engine: timestamps, a
	// workflow's ctx.Now(), durable timers and wait timeouts, leases and
	// heartbeats, retry backoff, retention and TTL expiry. A runtime's
	// liveness polls (PollInterval) stay on the wall clock, so that work
	// written by other processes is still found. Default clock.Real(); a
	// test may pass a *clock.Virtual and advance it.
	Clock clock.Clock
	// Observer receives the engine's reports (events accepted, delivered
	// and dropped; turns, activities, claims …). Default NopObserver{}.
	Observer Observer
	// MaxPayloadBytes caps an event payload; a larger one is refused with
	// ErrEventInvalid. An event definition's own cap takes precedence.
	// Default DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// MaxPayloadDepth caps how deeply JSON arrays and objects may nest in an
	// event payload, a workflow input or an activity result; a deeper one is
	// refused (ErrEventInvalid, ErrInvalidArgument, or a non-retryable
	// activity failure) before anything is stored. At most
	// MaxPayloadDepthLimit. Default DefaultMaxPayloadDepth (128).
	MaxPayloadDepth int
	// EventRetention is how long an event sent to an instance that has not
	// started is kept before it is dropped (fate dropped/expired), unless
	// its event definition says otherwise. Default DefaultEventRetention
	// (24 h).
	EventRetention time.Duration
	// MaxSchemaBytes caps the size of an event definition's JSON Schema:
	// PutEventDefinition refuses a larger one with ErrDefinitionInvalid,
	// and an event whose stored definition has a larger one (put through a
	// client with a larger cap) is refused with ErrDefinitionInvalid
	// without compiling it. Default DefaultMaxSchemaBytes (256 KiB).
	MaxSchemaBytes int
	// BusMaxBacklog caps a tenant's event-bus backlog: published events
	// not yet routed plus executions not yet ended. Past it Publish
	// refuses with ErrBackPressure (HTTP 429) and stores nothing. The
	// count is refreshed from the store at most every second, so the cap
	// is soft by what other clients publish meanwhile. ctx.Publish is not
	// capped: a workflow's turn never fails for it. Default
	// DefaultBusMaxBacklog (100,000).
	BusMaxBacklog int
	// TracerProvider makes the OpenTelemetry spans of sends (RaiseEvent,
	// Enqueue, PutCorrelatedEvent, Publish, StartWorkflow), turns
	// ("herald.turn") and activity attempts ("herald.activity"). A send's
	// span context is stored with what it sends (a W3C traceparent), so the
	// turn that consumes it joins its trace, on whichever node and however
	// much later it runs; an activity attempt is a child of the turn that
	// scheduled it. Default (nil): otel.GetTracerProvider(), a no-op unless
	// the program installs one (otel.SetTracerProvider) — then no span
	// context is valid and nothing is stored.
	TracerProvider trace.TracerProvider
}

// Config configures a Runtime: its workers, leases, intervals and limits,
// and (through the embedded ClientConfig) the clients it hands out. A zero
// field means the default stated on it; a value that can never work
// (negative, contradictory) is refused by Validate, which NewRuntime
// calls, and never silently replaced.
type Config struct {
	ClientConfig

	// Tenants are the tenants whose work the runtime runs. Default (nil):
	// every registered tenant (a tenant is registered by the first write of
	// a client of it, or by Runtime.SetTenantLimits). A workflow or
	// activity registered with the runtime serves each of them; nothing is
	// ever read or written across tenants.
	Tenants []string
	// MaxUnconsumedEvents caps buffered positional events per instance
	// across names; past it an event is dropped (fate dropped/limit).
	// Default DefaultMaxUnconsumedEvents (100).
	MaxUnconsumedEvents int
	// MaxCarryForwardExecutions: a buffered event is carried across at most
	// this many continue-as-new boundaries, then dropped (fate
	// dropped/carry_forward_limit). Default DefaultMaxCarryForwardExecutions
	// (5).
	MaxCarryForwardExecutions int
	// MaxQueuedEvents caps unconsumed queue-lane messages per instance
	// across queues; past it a message is dropped (fate dropped/limit), and
	// continue-as-new carries at most this many (the oldest), dropping the
	// rest (carry_forward_limit). Default DefaultMaxQueuedEvents (20).
	MaxQueuedEvents int
	// ExpiryInterval is how often the runtime's maintenance runs: expiry
	// of events kept for instances that never started and of correlated
	// events past their TTL. Among runtimes sharing a store, only the
	// elected leader runs it. Default DefaultExpiryInterval (1 min).
	ExpiryInterval time.Duration
	// TurnWorkers is how many instance turns run at once. A turn spends most
	// of its time waiting for the store, and the store merges the claims and
	// commits of concurrent turns into one transaction (group commit), so
	// this is what lets one runtime keep the storage busy. Default
	// DefaultTurnWorkers (64).
	TurnWorkers int
	// ActivityWorkers is how many activities run at once. Default
	// DefaultActivityWorkers (16).
	ActivityWorkers int
	// TurnLease is how long a claimed turn is owned before another worker
	// may take it over. Default DefaultTurnLease (30 s).
	TurnLease time.Duration
	// ActivityLease is how long a claimed activity is owned without a
	// heartbeat. Default DefaultActivityLease (60 s).
	ActivityLease time.Duration
	// ActivityHeartbeat is how often a running activity's lease is
	// extended; it must be shorter than ActivityLease. Default a third of
	// ActivityLease.
	ActivityHeartbeat time.Duration
	// PollInterval is the fallback poll when no wake-up signal arrives.
	// Default DefaultPollInterval (500 ms).
	PollInterval time.Duration
	// DefaultRetry fills zero fields of activity retry policies. Default 3
	// attempts, 1 s initial interval, ×2 backoff, 1 min cap. A coefficient
	// must be 1 or more, and MaxInterval (after defaults) at least
	// InitialInterval.
	DefaultRetry RetryPolicy
	// Bus configures the runtime's event-bus workers.
	Bus BusConfig
}

// BusConfig configures how a runtime runs the event bus's executions
// (docs/bus.md).
type BusConfig struct {
	// Workers is how many executions run at once. Default 10.
	Workers int
	// QueueSize bounds the dispatch queue: claimed executions waiting for
	// a worker. The runtime claims only what the queue and idle workers
	// have room for (at most Workers + QueueSize executions of one tenant
	// are claimed and unfinished, and min(Workers, QueueSize/2) more of the
	// others'); the rest stays in the store. Default 1000.
	QueueSize int
	// Lease is how long a claimed execution is owned without a heartbeat;
	// a running or queued one is extended every Lease/3. Another runtime
	// takes over an execution whose lease ran out (its node died). Default
	// 1 min.
	Lease time.Duration
	// Timeout bounds one attempt unless its subscription sets one.
	// Default 30 s.
	Timeout time.Duration
	// ScriptMemory caps the memory a script may allocate (enforced by the
	// kernel on the script's child process, docs/bus.md). Default 128 MiB.
	ScriptMemory int64
	// ScriptProcesses is the number of script child processes: at most
	// that many script executions run at once, on workers of their own
	// (Workers bounds the other targets). Default Workers.
	ScriptProcesses int
	// TenantScriptProcesses is the most script child processes one
	// tenant's executions hold at once, even while the others are idle:
	// the rest stay for the other tenants, so one tenant's runaway scripts
	// never hold every child. At most ScriptProcesses. Default half of
	// ScriptProcesses, rounded up (docs/bus.md, "Isolation").
	TenantScriptProcesses int
	// RecordRetention is how long a published event whose executions all
	// ended is kept with its routes, executions and attempt records (dead
	// letters are kept until deleted). Default 7 days.
	RecordRetention time.Duration
	// Disabled: this runtime runs no bus work (other runtimes on the store
	// may).
	Disabled bool
}

// Bus defaults.
const (
	DefaultBusWorkers         = 10
	DefaultBusQueueSize       = 1000
	DefaultBusLease           = time.Minute
	DefaultBusTimeout         = 30 * time.Second
	DefaultBusScriptMemory    = 128 << 20
	DefaultBusRecordRetention = 7 * 24 * time.Hour
)

// WithDefaults returns a copy of c with every zero field set to its
// default. It does not check the values: see Validate.
func (c *ClientConfig) WithDefaults() *ClientConfig {
	out := ClientConfig{}
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Observer == nil {
		out.Observer = NopObserver{}
	}
	if out.Clock == nil {
		out.Clock = clock.Real()
	}
	if out.MaxPayloadBytes == 0 {
		out.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if out.MaxPayloadDepth == 0 {
		out.MaxPayloadDepth = DefaultMaxPayloadDepth
	}
	if out.EventRetention == 0 {
		out.EventRetention = DefaultEventRetention
	}
	if out.MaxSchemaBytes == 0 {
		out.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if out.BusMaxBacklog == 0 {
		out.BusMaxBacklog = DefaultBusMaxBacklog
	}
	if out.TracerProvider == nil {
		out.TracerProvider = otel.GetTracerProvider()
	}
	return &out
}

// WithDefaults returns a copy of c with every zero field set to its
// default. It does not check the values: see Validate.
func (c *Config) WithDefaults() *Config {
	out := Config{}
	if c != nil {
		out = *c
	}
	out.ClientConfig = *out.ClientConfig.WithDefaults()
	setDefault(&out.MaxUnconsumedEvents, DefaultMaxUnconsumedEvents)
	setDefault(&out.MaxCarryForwardExecutions, DefaultMaxCarryForwardExecutions)
	setDefault(&out.MaxQueuedEvents, DefaultMaxQueuedEvents)
	setDefault(&out.ExpiryInterval, DefaultExpiryInterval)
	setDefault(&out.TurnWorkers, DefaultTurnWorkers)
	setDefault(&out.ActivityWorkers, DefaultActivityWorkers)
	setDefault(&out.TurnLease, DefaultTurnLease)
	setDefault(&out.ActivityLease, DefaultActivityLease)
	setDefault(&out.ActivityHeartbeat, out.ActivityLease/3)
	setDefault(&out.PollInterval, DefaultPollInterval)
	r := &out.DefaultRetry
	setDefault(&r.MaxAttempts, 3)
	setDefault(&r.InitialInterval, time.Second)
	setDefault(&r.BackoffCoefficient, 2)
	setDefault(&r.MaxInterval, time.Minute)
	b := &out.Bus
	setDefault(&b.Workers, DefaultBusWorkers)
	setDefault(&b.QueueSize, DefaultBusQueueSize)
	setDefault(&b.Lease, DefaultBusLease)
	setDefault(&b.Timeout, DefaultBusTimeout)
	setDefault(&b.ScriptMemory, DefaultBusScriptMemory)
	setDefault(&b.ScriptProcesses, b.Workers)
	setDefault(&b.TenantScriptProcesses, (b.ScriptProcesses+1)/2)
	setDefault(&b.RecordRetention, DefaultBusRecordRetention)
	return &out
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate reports every problem of c in one *InvalidArgumentError
// (errors.Is(err, ErrInvalidArgument)): a negative size or duration, a
// MaxPayloadDepth over MaxPayloadDepthLimit. A nil c is valid (every
// default).
func (c *ClientConfig) Validate() error {
	return configError(c.problems(nil))
}

func (c *ClientConfig) problems(ps []string) []string {
	if c == nil {
		return ps
	}
	ps = negative(ps, "MaxPayloadBytes", c.MaxPayloadBytes)
	ps = negative(ps, "MaxPayloadDepth", c.MaxPayloadDepth)
	if c.MaxPayloadDepth > MaxPayloadDepthLimit {
		ps = append(ps, fmt.Sprintf("MaxPayloadDepth %d is over MaxPayloadDepthLimit (%d)", c.MaxPayloadDepth, MaxPayloadDepthLimit))
	}
	ps = negative(ps, "EventRetention", c.EventRetention)
	ps = negative(ps, "MaxSchemaBytes", c.MaxSchemaBytes)
	ps = negative(ps, "BusMaxBacklog", c.BusMaxBacklog)
	return ps
}

// Validate reports every problem of c in one *InvalidArgumentError
// (errors.Is(err, ErrInvalidArgument)): those ClientConfig.Validate finds,
// a tenant id in Tenants that breaks the text rules or comes twice, an
// empty non-nil Tenants, a negative count, interval or lease, a DefaultRetry whose
// BackoffCoefficient is below 1 (or not finite) or whose MaxInterval is
// shorter than its InitialInterval, and an ActivityHeartbeat that does not
// fit in ActivityLease. Contradictions are checked on the values after
// defaults, so a field left zero is checked by its default. A nil c is
// valid (every default).
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	ps := c.ClientConfig.problems(nil)
	seen := map[string]bool{}
	for _, t := range c.Tenants {
		if seen[t] {
			ps = append(ps, fmt.Sprintf("Tenants names %q twice", t))
		}
		seen[t] = true
		ps = tenantReasons(ps, t)
	}
	if c.Tenants != nil && len(c.Tenants) == 0 {
		ps = append(ps, "Tenants is empty but not nil: the runtime would serve no tenant (nil serves every tenant)")
	}
	ps = negative(ps, "MaxUnconsumedEvents", c.MaxUnconsumedEvents)
	ps = negative(ps, "MaxCarryForwardExecutions", c.MaxCarryForwardExecutions)
	ps = negative(ps, "MaxQueuedEvents", c.MaxQueuedEvents)
	ps = negative(ps, "ExpiryInterval", c.ExpiryInterval)
	ps = negative(ps, "TurnWorkers", c.TurnWorkers)
	ps = negative(ps, "ActivityWorkers", c.ActivityWorkers)
	ps = negative(ps, "TurnLease", c.TurnLease)
	ps = negative(ps, "ActivityLease", c.ActivityLease)
	ps = negative(ps, "ActivityHeartbeat", c.ActivityHeartbeat)
	ps = negative(ps, "PollInterval", c.PollInterval)
	r := c.DefaultRetry
	ps = retryReasons(ps, "DefaultRetry", r)
	ps = negative(ps, "Bus.Workers", c.Bus.Workers)
	ps = negative(ps, "Bus.QueueSize", c.Bus.QueueSize)
	ps = negative(ps, "Bus.Lease", c.Bus.Lease)
	ps = negative(ps, "Bus.Timeout", c.Bus.Timeout)
	ps = negative(ps, "Bus.ScriptProcesses", c.Bus.ScriptProcesses)
	ps = negative(ps, "Bus.TenantScriptProcesses", c.Bus.TenantScriptProcesses)
	ps = negative(ps, "Bus.RecordRetention", c.Bus.RecordRetention)
	if c.Bus.ScriptMemory < 0 {
		ps = append(ps, fmt.Sprintf("Bus.ScriptMemory is negative (%d)", c.Bus.ScriptMemory))
	}
	if c.Bus.Timeout > MaxSubscriptionTimeout {
		ps = append(ps, fmt.Sprintf("Bus.Timeout %v is over MaxSubscriptionTimeout (%v)", c.Bus.Timeout, MaxSubscriptionTimeout))
	}

	d := c.WithDefaults()
	if r.InitialInterval >= 0 && r.MaxInterval >= 0 && d.DefaultRetry.MaxInterval < d.DefaultRetry.InitialInterval {
		ps = append(ps, fmt.Sprintf("DefaultRetry.MaxInterval %v%s is shorter than DefaultRetry.InitialInterval %v%s",
			d.DefaultRetry.MaxInterval, isDefault(r.MaxInterval), d.DefaultRetry.InitialInterval, isDefault(r.InitialInterval)))
	}
	if c.ActivityLease >= 0 && c.ActivityHeartbeat >= 0 {
		switch {
		case d.ActivityHeartbeat <= 0:
			ps = append(ps, fmt.Sprintf("ActivityLease %v is too short for a heartbeat (a third of it rounds to zero)", d.ActivityLease))
		case d.ActivityHeartbeat >= d.ActivityLease:
			ps = append(ps, fmt.Sprintf("ActivityHeartbeat %v%s does not fit in ActivityLease %v%s: the lease would lapse between heartbeats",
				d.ActivityHeartbeat, isDefault(c.ActivityHeartbeat), d.ActivityLease, isDefault(c.ActivityLease)))
		}
	}
	if c.Bus.ScriptProcesses >= 0 && c.Bus.TenantScriptProcesses > 0 && d.Bus.TenantScriptProcesses > d.Bus.ScriptProcesses {
		ps = append(ps, fmt.Sprintf("Bus.TenantScriptProcesses %d is over Bus.ScriptProcesses %d%s (the script processes there are)",
			d.Bus.TenantScriptProcesses, d.Bus.ScriptProcesses, isDefault(c.Bus.ScriptProcesses)))
	}
	if c.Bus.Lease >= 0 && d.Bus.Lease > 0 && d.Bus.Lease < 3*time.Millisecond {
		ps = append(ps, fmt.Sprintf("Bus.Lease %v is too short for a heartbeat", d.Bus.Lease))
	}
	return configError(ps)
}

// isDefault marks a value in a message as the default, so that a refusal
// of a field the caller left zero names where the value came from.
func isDefault[T comparable](v T) string {
	var zero T
	if v == zero {
		return " (default)"
	}
	return ""
}

// retryReasons lists what is wrong with the fields of a retry policy
// (named what.Field): a negative count or interval, a backoff coefficient
// that is not finite or is below 1. Zero fields are valid: they take
// defaults.
func retryReasons(ps []string, what string, r RetryPolicy) []string {
	ps = negative(ps, what+".MaxAttempts", r.MaxAttempts)
	ps = negative(ps, what+".InitialInterval", r.InitialInterval)
	ps = negative(ps, what+".MaxInterval", r.MaxInterval)
	switch bc := r.BackoffCoefficient; {
	case math.IsNaN(bc) || math.IsInf(bc, 0):
		ps = append(ps, fmt.Sprintf("%s.BackoffCoefficient %v is not a finite number", what, bc))
	case bc != 0 && bc < 1:
		ps = append(ps, fmt.Sprintf("%s.BackoffCoefficient %v is below 1 (a retry would come sooner than the one before)", what, bc))
	}
	return ps
}

func negative[T int | time.Duration](ps []string, field string, v T) []string {
	if v < 0 {
		return append(ps, fmt.Sprintf("%s is negative (%v)", field, v))
	}
	return ps
}

func configError(ps []string) error {
	if len(ps) == 0 {
		return nil
	}
	return &InvalidArgumentError{Op: "Config", Reasons: ps}
}
