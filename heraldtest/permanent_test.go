package heraldtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
)

// markers are the two names of the one "do not retry" marker: Permanent,
// and its deprecated alias NonRetryable. Each is tested bare and wrapped.
var markers = []struct {
	name string
	mark func(error) error
}{
	{"Permanent", herald.Permanent},
	{"NonRetryable", herald.NonRetryable},
	{"Permanent wrapped", func(err error) error { return fmt.Errorf("charge: %w", herald.Permanent(err)) }},
	{"NonRetryable wrapped", func(err error) error { return fmt.Errorf("charge: %w", herald.NonRetryable(err)) }},
}

// A permanent error stops an activity's retries: its first attempt fails
// the activity (and so the workflow), though the policy allows five.
// Without the marker the same error is retried (the control).
func TestPermanent_StopsActivityRetries(t *testing.T) {
	for _, m := range append(markers, struct {
		name string
		mark func(error) error
	}{"unmarked", func(err error) error { return err }}) {
		t.Run(m.name, func(t *testing.T) {
			env := newEnv(t, func(rt *herald.Runtime) {
				herald.RegisterWorkflow(rt, "charge", func(ctx *herald.Context, _ any) (string, error) {
					var out string
					err := ctx.CallActivity("charge", "card").Get(&out)
					return out, err
				})
			}, heraldtest.WithConfig(func(c *herald.Config) {
				c.DefaultRetry = herald.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Minute, BackoffCoefficient: 2, MaxInterval: time.Hour}
			}))
			calls := heraldtest.MockActivity(env, "charge", func(context.Context, string) (string, error) {
				return "", m.mark(errors.New("card declined"))
			})
			env.Start("charge", "c-1", nil)
			if m.name == "unmarked" {
				env.RequireStatus(t, "c-1", herald.StatusRunning)
				env.Advance(time.Minute)
				if calls.Count() != 2 {
					t.Fatalf("an unmarked error: %d calls after its backoff, want 2 (retried)", calls.Count())
				}
				return
			}
			env.RequireStatus(t, "c-1", herald.StatusFailed)
			env.AdvanceUntilIdle(24 * time.Hour)
			if calls.Count() != 1 {
				t.Fatalf("%d calls, want 1: a permanent error is not retried", calls.Count())
			}
			info := env.Info("c-1")
			if info.Failure == nil || !strings.Contains(info.Failure.Message, "card declined") {
				t.Fatalf("failure %+v, want the activity's error", info.Failure)
			}
		})
	}
}

// A permanent error stops a bus execution's retries: its first attempt
// dead-letters it, with kind permanent, though the subscription allows
// three retries. Without the marker the same error is retried.
func TestPermanent_StopsBusRetries(t *testing.T) {
	for _, m := range append(markers, struct {
		name string
		mark func(error) error
	}{"unmarked", func(err error) error { return err }}) {
		t.Run(m.name, func(t *testing.T) {
			calls := 0
			env := newEnv(t, func(rt *herald.Runtime) {
				herald.RegisterBusHandler(rt, "charge", func(context.Context, herald.BusEvent) (any, error) {
					calls++
					return nil, m.mark(errors.New("card declined"))
				})
			})
			env.Subscribe(herald.Subscription{ID: "charge", Pattern: "order.*", Enabled: true, MaxRetries: intp(3),
				Target: herald.Target{Kind: herald.TargetHandler, Handler: "charge"}})
			env.Publish("order.paid", map[string]int{"amount": 1}, herald.WithEventID("pay-1"))
			if m.name == "unmarked" {
				if dl := env.DeadLetters("charge"); len(dl) != 0 {
					t.Fatalf("an unmarked error dead-lettered at once: %+v", dl)
				}
				env.Advance(2 * time.Second)
				if calls != 2 {
					t.Fatalf("an unmarked error: %d calls after 2 s, want 2 (retried)", calls)
				}
				return
			}
			env.AdvanceUntilIdle(24 * time.Hour)
			if calls != 1 {
				t.Fatalf("%d handler calls, want 1: a permanent error is not retried", calls)
			}
			dl := env.DeadLetters("charge")
			if len(dl) != 1 || dl[0].ErrorKind != herald.ErrorPermanent || !strings.Contains(dl[0].Error, "card declined") {
				t.Fatalf("dead letters %+v, want one of kind permanent with the handler's error", dl)
			}
			if at := env.Attempts("pay-1", "charge"); len(at) != 1 || at[0].ErrorKind != herald.ErrorPermanent {
				t.Fatalf("attempts %+v, want one permanent", at)
			}
		})
	}
}

// The markers are one: errors.As finds a *PermanentError through either
// name and through wrapping, errors.Is reaches the cause, and a nil error
// stays nil.
func TestPermanent_OneMarker(t *testing.T) {
	cause := errors.New("card declined")
	for _, m := range markers {
		err := m.mark(cause)
		var pe *herald.PermanentError
		if !errors.As(err, &pe) || pe.Err != cause {
			t.Errorf("%s: errors.As found %v", m.name, pe)
		}
		if !errors.Is(err, cause) {
			t.Errorf("%s: errors.Is does not reach the cause", m.name)
		}
	}
	if herald.Permanent(nil) != nil || herald.NonRetryable(nil) != nil {
		t.Error("a nil error marked is not nil")
	}
}
