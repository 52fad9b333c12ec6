package heraldtest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
)

type approvalIn struct {
	Item     string
	Deadline time.Duration
}

// approval waits for a decision with a deadline: "approved by X" or
// "expired".
func approval(ctx *herald.Context, in approvalIn) (string, error) {
	if err := ctx.CallActivity("notify", in.Item).Get(nil); err != nil {
		return "", err
	}
	var who string
	err := ctx.WaitEvent("decision", herald.WithTimeout(in.Deadline)).Get(&who)
	if errors.Is(err, herald.ErrEventTimeout) {
		return "expired", nil
	}
	if err != nil {
		return "", err
	}
	return "approved by " + who, nil
}

func registerApproval(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "approval", approval)
	herald.RegisterActivity(rt, "notify", func(_ context.Context, item string) (string, error) {
		return "notified about " + item, nil
	})
}

func TestEnv_SevenDayDeadline(t *testing.T) {
	began := time.Now()
	env := newEnv(t, registerApproval)
	env.Start("approval", "a-1", approvalIn{Item: "desk", Deadline: 7 * 24 * time.Hour})
	env.RequireStatus(t, "a-1", herald.StatusRunning)
	if d, ok := env.NextWake(); !ok || d != 7*24*time.Hour {
		t.Fatalf("next wake %v %v, want in 7 days", d, ok)
	}
	env.Advance(7*24*time.Hour - time.Second)
	env.RequireStatus(t, "a-1", herald.StatusRunning)
	env.Advance(time.Second)
	env.RequireResult(t, "a-1", "expired")
	env.RequireHistory(t, "a-1",
		"ExecutionStarted approval",
		"ActivityScheduled notify",
		"ActivityCompleted notify",
		"EventSubscribed decision",
		"TimerCreated",
		"TimerFired",
		"EventSubscribedCancelled decision",
		"ExecutionCompleted",
	)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("a 7-day deadline took %v of wall time", took)
	}
	t.Logf("7-day deadline tested in %v of wall time", time.Since(began))
}

func TestEnv_DecisionBeforeDeadline(t *testing.T) {
	env := newEnv(t, registerApproval)
	env.Start("approval", "a-1", approvalIn{Item: "desk", Deadline: time.Hour})
	env.Advance(59 * time.Minute)
	rec := env.Raise("a-1", "decision", "ann", herald.WithEventID("d-1"))
	if rec.EventID != "d-1" {
		t.Fatalf("receipt %+v", rec)
	}
	env.RequireResult(t, "a-1", "approved by ann")
	env.RequireFate(t, "d-1", history.FateDelivered)
	var got string
	env.Result("a-1", &got)
	if got != "approved by ann" {
		t.Fatalf("result %q", got)
	}
}

func TestEnv_MockActivityAndRetryBackoff(t *testing.T) {
	env := newEnv(t, registerApproval, heraldtest.WithConfig(func(c *herald.Config) {
		c.DefaultRetry = herald.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Minute, BackoffCoefficient: 2, MaxInterval: time.Hour}
	}))
	calls := heraldtest.MockActivity(env, "notify", func(ctx context.Context, item string) (string, error) {
		if ai, _ := herald.ActivityInfoFrom(ctx); ai.Attempt < 3 {
			return "", errors.New("mail server down")
		}
		return "ok", nil
	})
	env.Start("approval", "a-1", approvalIn{Item: "desk", Deadline: time.Hour})
	if calls.Count() != 1 {
		t.Fatalf("%d calls after start, want the first attempt only", calls.Count())
	}
	if d, ok := env.NextWake(); !ok || d != time.Minute {
		t.Fatalf("next wake %v %v, want the retry in 1m", d, ok)
	}
	env.Advance(time.Minute - time.Millisecond)
	if calls.Count() != 1 {
		t.Fatalf("%d calls before the backoff passed", calls.Count())
	}
	env.Advance(time.Millisecond) // attempt 2 fails: next in 2m
	env.Advance(2 * time.Minute)  // attempt 3 succeeds
	if calls.Count() != 3 || string(calls.Inputs()[2]) != `"desk"` {
		t.Fatalf("calls %d %s", calls.Count(), calls.Inputs())
	}
	if u := env.Units(); !slices.Contains(u, "activity notify#2 a-1") || !slices.Contains(u, "activity notify#3 a-1") {
		t.Fatalf("units %q", u)
	}
	h := env.History("a-1")
	if n := len(h); n < 4 || h[3].Kind != history.EventSubscribed {
		t.Fatalf("history %v", heraldtest.Shape(h))
	}
}

func TestEnv_TimerAndSleep(t *testing.T) {
	env := newEnv(t, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "nap", func(ctx *herald.Context, d time.Duration) (time.Time, error) {
			if err := ctx.Sleep(d); err != nil {
				return time.Time{}, err
			}
			return ctx.Now(), nil
		})
	})
	env.Start("nap", "n", 36*time.Hour)
	env.Advance(24 * time.Hour)
	env.RequireStatus(t, "n", herald.StatusRunning)
	env.Advance(24 * time.Hour)
	var woke time.Time
	env.Result("n", &woke)
	if want := heraldtest.Epoch.Add(36 * time.Hour); !woke.Equal(want) {
		t.Fatalf("woke at %v, want %v (the timer's time, not the end of Advance)", woke, want)
	}
}

func TestEnv_RetentionExpiry(t *testing.T) {
	env := newEnv(t, registerApproval)
	env.DefineEvent(herald.EventDefinition{Name: "decision", Retention: 2 * time.Hour})
	env.Raise("later", "decision", "bob", herald.WithEventID("early"))
	env.RequireFate(t, "early", history.FatePending)
	env.Advance(2*time.Hour + time.Second)
	env.RequireDropped(t, "early", history.DropExpired)
}

func TestEnv_CorrelatedTTL(t *testing.T) {
	env := newEnv(t, nil)
	env.DefineEvent(herald.EventDefinition{Name: "payment", Correlation: &herald.CorrelationConfig{TTL: time.Hour}})
	env.PutCorrelated("payment", "order-1", map[string]int{"amount": 5})
	if _, err := env.Client().GetCorrelatedEvent(env.Context(), "payment", "order-1"); err != nil {
		t.Fatalf("get before the TTL: %v", err)
	}
	env.Advance(time.Hour + time.Second)
	if _, err := env.Client().GetCorrelatedEvent(env.Context(), "payment", "order-1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("get after the TTL: %v, want not found", err)
	}
}

func TestEnv_TenantAndStart(t *testing.T) {
	start := time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)
	env := newEnv(t, registerApproval, heraldtest.WithTenant("acme"), heraldtest.WithStart(start))
	if env.Tenant() != "acme" || !env.Now().Equal(start) || !env.Clock().Now().Equal(start) {
		t.Fatalf("tenant %q, now %v", env.Tenant(), env.Now())
	}
	env.Start("approval", "a-1", approvalIn{Item: "desk", Deadline: time.Hour})
	// The instance is the tenant's: another tenant's client does not see it.
	other, err := env.Runtime().Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Status(env.Context(), "a-1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("the default tenant sees acme's instance: %v", err)
	}
	if n := env.Settle(); n != 0 {
		t.Fatalf("Settle ran %d units on a settled Env", n)
	}
	if moved := env.AdvanceUntilIdle(2 * time.Hour); moved != time.Hour {
		t.Fatalf("AdvanceUntilIdle moved %v, want the 1h deadline", moved)
	}
	env.RequireResult(t, "a-1", "expired")
	if h := env.History("a-1"); !h[0].Time.Equal(start) {
		t.Fatalf("history starts at %v, want %v", h[0].Time, start)
	}
}
