package herald_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
)

// mustClient returns a client of tenant over st; the configs tests pass are
// valid, so an error is a bug in the test.
func mustClient(st storage.Store, tenant string, cfg *herald.ClientConfig) *herald.Client {
	c, err := herald.NewClient(st, tenant, cfg)
	if err != nil {
		panic(err)
	}
	return c
}

// mustRuntimeClient returns the runtime's client of tenant.
func mustRuntimeClient(rt *herald.Runtime, tenant string) *herald.Client {
	c, err := rt.Client(tenant)
	if err != nil {
		panic(err)
	}
	return c
}

// nowCfg is a client config whose clock reads now.
func nowCfg(now func() time.Time) herald.ClientConfig {
	return herald.ClientConfig{Clock: funcClock(now)}
}

// funcClock reads the time from a function and runs its timers on the wall
// clock: for tests that move the time by hand (offsets, jumps) but still
// want maintenance passes and heartbeats every so many milliseconds.
type funcClock func() time.Time

func (f funcClock) Now() time.Time                     { return f() }
func (funcClock) NewTimer(d time.Duration) clock.Timer { return clock.Real().NewTimer(d) }

// atRetention is nowCfg with an EventRetention.
func atRetention(now func() time.Time, retention time.Duration) herald.ClientConfig {
	c := nowCfg(now)
	c.EventRetention = retention
	return c
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	type tc struct {
		name string
		cfg  *herald.Config
		want []string // fragments, one per expected problem; nil: valid
	}
	cc := func(c herald.ClientConfig) *herald.Config { return &herald.Config{ClientConfig: c} }
	cases := []tc{
		{"nil", nil, nil},
		{"zero", &herald.Config{}, nil},
		{"every field set", &herald.Config{
			ClientConfig: herald.ClientConfig{MaxPayloadBytes: 10, MaxPayloadDepth: herald.MaxPayloadDepthLimit,
				EventRetention: time.Hour, MaxSchemaBytes: 10},
			MaxUnconsumedEvents: 1, MaxCarryForwardExecutions: 1, MaxQueuedEvents: 1, ExpiryInterval: time.Second,
			TurnWorkers: 1, ActivityWorkers: 1, TurnLease: time.Second, ActivityLease: time.Second,
			ActivityHeartbeat: 999 * time.Millisecond, PollInterval: time.Millisecond,
			DefaultRetry: herald.RetryPolicy{MaxAttempts: 1, InitialInterval: time.Second, BackoffCoefficient: 1,
				MaxInterval: time.Second},
		}, nil},
		{"retry interval over the default cap, cap raised", &herald.Config{DefaultRetry: herald.RetryPolicy{
			InitialInterval: 2 * time.Minute, MaxInterval: 2 * time.Minute}}, nil},
		{"negative client fields", cc(herald.ClientConfig{MaxPayloadBytes: -1, MaxPayloadDepth: -1, EventRetention: -1,
			MaxSchemaBytes: -1}), []string{"MaxPayloadBytes is negative", "MaxPayloadDepth is negative",
			"EventRetention is negative", "MaxSchemaBytes is negative"}},
		{"depth over the limit", cc(herald.ClientConfig{MaxPayloadDepth: herald.MaxPayloadDepthLimit + 1}),
			[]string{"MaxPayloadDepth 1001 is over MaxPayloadDepthLimit"}},
		{"negative runtime fields", &herald.Config{MaxUnconsumedEvents: -1, MaxCarryForwardExecutions: -1,
			MaxQueuedEvents: -1, ExpiryInterval: -1, TurnWorkers: -1, ActivityWorkers: -1, TurnLease: -1,
			PollInterval: -1},
			[]string{"MaxUnconsumedEvents is negative", "MaxCarryForwardExecutions is negative",
				"MaxQueuedEvents is negative", "ExpiryInterval is negative", "TurnWorkers is negative",
				"ActivityWorkers is negative", "TurnLease is negative", "PollInterval is negative"}},
		{"negative leases", &herald.Config{ActivityLease: -time.Second, ActivityHeartbeat: -time.Second},
			[]string{"ActivityLease is negative", "ActivityHeartbeat is negative"}},
		{"negative retry", &herald.Config{DefaultRetry: herald.RetryPolicy{MaxAttempts: -1, InitialInterval: -1,
			MaxInterval: -1}}, []string{"DefaultRetry.MaxAttempts is negative",
			"DefaultRetry.InitialInterval is negative", "DefaultRetry.MaxInterval is negative"}},
		{"coefficient in (0,1)", &herald.Config{DefaultRetry: herald.RetryPolicy{BackoffCoefficient: 0.5}},
			[]string{"BackoffCoefficient 0.5 is below 1"}},
		{"negative coefficient", &herald.Config{DefaultRetry: herald.RetryPolicy{BackoffCoefficient: -2}},
			[]string{"BackoffCoefficient -2 is below 1"}},
		{"coefficient not finite", &herald.Config{DefaultRetry: herald.RetryPolicy{BackoffCoefficient: math.Inf(1)}},
			[]string{"BackoffCoefficient +Inf is not a finite number"}},
		{"max interval under initial", &herald.Config{DefaultRetry: herald.RetryPolicy{InitialInterval: time.Minute,
			MaxInterval: time.Second}}, []string{"DefaultRetry.MaxInterval 1s is shorter than DefaultRetry.InitialInterval 1m0s"}},
		{"default max interval under initial", &herald.Config{DefaultRetry: herald.RetryPolicy{InitialInterval: 2 * time.Minute}},
			[]string{"DefaultRetry.MaxInterval 1m0s (default) is shorter than DefaultRetry.InitialInterval 2m0s"}},
		{"heartbeat as long as the lease", &herald.Config{ActivityLease: time.Second, ActivityHeartbeat: time.Second},
			[]string{"ActivityHeartbeat 1s does not fit in ActivityLease 1s"}},
		{"heartbeat over the default lease", &herald.Config{ActivityHeartbeat: 2 * time.Minute},
			[]string{"ActivityHeartbeat 2m0s does not fit in ActivityLease 1m0s (default)"}},
		{"lease too short for a heartbeat", &herald.Config{ActivityLease: 2},
			[]string{"ActivityLease 2ns is too short for a heartbeat"}},
		{"tenant script share of every process", &herald.Config{Bus: herald.BusConfig{ScriptProcesses: 3,
			TenantScriptProcesses: 3}}, nil},
		{"negative tenant script share", &herald.Config{Bus: herald.BusConfig{TenantScriptProcesses: -1}},
			[]string{"Bus.TenantScriptProcesses is negative"}},
		{"tenant script share over the processes", &herald.Config{Bus: herald.BusConfig{ScriptProcesses: 2,
			TenantScriptProcesses: 3}}, []string{"Bus.TenantScriptProcesses 3 is over Bus.ScriptProcesses 2 (the"}},
		{"tenant script share over the default processes", &herald.Config{Bus: herald.BusConfig{Workers: 4,
			TenantScriptProcesses: 5}}, []string{"Bus.TenantScriptProcesses 5 is over Bus.ScriptProcesses 4 (default)"}},
		{"every problem at once", &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadBytes: -1},
			TurnWorkers: -1, DefaultRetry: herald.RetryPolicy{BackoffCoefficient: 0.1}},
			[]string{"MaxPayloadBytes is negative", "TurnWorkers is negative", "BackoffCoefficient 0.1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var ia *herald.InvalidArgumentError
			if !errors.Is(err, herald.ErrInvalidArgument) || !errors.As(err, &ia) {
				t.Fatalf("Validate: %v, want an *InvalidArgumentError", err)
			}
			if len(ia.Reasons) != len(c.want) {
				t.Fatalf("Validate reasons %q, want %d matching %q", ia.Reasons, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(ia.Reasons[i], w) {
					t.Errorf("reason %d %q, want it to contain %q", i, ia.Reasons[i], w)
				}
			}
			// NewRuntime refuses the same config with the same error.
			_, rerr := herald.NewRuntime(sqliteStore(t), c.cfg)
			if rerr == nil || rerr.Error() != err.Error() {
				t.Fatalf("NewRuntime: %v, want %v", rerr, err)
			}
		})
	}

	// A client refuses its own problems, and a nil store or a bad tenant,
	// all in one error.
	_, err := herald.NewClient(nil, "", &herald.ClientConfig{MaxPayloadDepth: -1})
	var ia *herald.InvalidArgumentError
	if !errors.As(err, &ia) || len(ia.Reasons) != 3 {
		t.Fatalf("NewClient: %v, want 3 reasons (depth, store, tenant)", err)
	}
	if c, err := herald.NewClient(sqliteStore(t), herald.DefaultTenant, nil); err != nil || c == nil {
		t.Fatalf("NewClient with defaults: %v", err)
	}
}

// sqliteStore opens a store nothing will run on: for calls that must be
// refused before they touch it.
func sqliteStore(t *testing.T) storage.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A WithRetry policy that makes no sense fails the workflow with the
// reasons (deterministically: a panic at CallActivity) instead of being
// replaced by defaults; a sensible one runs.
func TestCallActivity_RetryPolicyRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterActivity(rt, "noop", func(ctx context.Context, _ any) (string, error) { return "ran", nil })
		herald.RegisterWorkflow(rt, "call", func(ctx *herald.Context, p herald.RetryPolicy) (string, error) {
			var out string
			err := ctx.CallActivity("noop", nil, herald.WithRetry(p)).Get(&out)
			return out, err
		})
	})
	for id, tc := range map[string]struct {
		p    herald.RetryPolicy
		want string // "" = completes
	}{
		"coefficient": {herald.RetryPolicy{BackoffCoefficient: 0.5}, "WithRetry.BackoffCoefficient 0.5 is below 1"},
		"negative":    {herald.RetryPolicy{MaxAttempts: -1, InitialInterval: -time.Second}, "WithRetry.MaxAttempts is negative (-1); WithRetry.InitialInterval is negative (-1s)"},
		"intervals":   {herald.RetryPolicy{InitialInterval: 2 * time.Minute, MaxInterval: time.Minute}, "WithRetry.MaxInterval 1m0s is shorter than its InitialInterval 2m0s"},
		"sensible":    {herald.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, BackoffCoefficient: 1.5}, ""},
	} {
		b.start("call", id, tc.p)
		info := b.waitDone(id)
		if tc.want == "" {
			var out string
			if err := info.Result(&out); err != nil || out != "ran" {
				t.Errorf("%s: %q, %v; want it to run", id, out, err)
			}
			continue
		}
		var we *herald.WorkflowError
		if !errors.As(info.Err(), &we) || we.Kind != "panic" || !strings.Contains(we.Message, tc.want) {
			t.Errorf("%s: %v; want a panic failure saying %q", id, info.Err(), tc.want)
		}
	}
}
