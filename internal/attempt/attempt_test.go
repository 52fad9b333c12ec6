package attempt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/heraldtype"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDecide(t *testing.T) {
	activity := heraldtype.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second, BackoffCoefficient: 2, MaxInterval: 3 * time.Second}
	transient := Failf(heraldtype.ErrorRuntime, "boom")
	timeout := Failf(heraldtype.ErrorTimeout, "late")
	resource := Failf(heraldtype.ErrorResource, "memory")
	canceled := &Failure{Kind: heraldtype.ErrorRuntime, Msg: "canceled", Canceled: true}
	for _, c := range []struct {
		name    string
		f       *Failure
		attempt int
		p       heraldtype.RetryPolicy
		want    Action
		wait    time.Duration // Retry's
	}{
		{"success", nil, 1, activity, Complete, 0},
		{"success on the last attempt", nil, 3, activity, Complete, 0},
		{"success past the last attempt", nil, 9, activity, Complete, 0},
		{"success with max_retries 0", nil, 1, BusPolicy(0), Complete, 0},
		{"lease lost", LeaseLost, 1, activity, Drop, 0},
		{"lease lost on the last attempt", LeaseLost, 3, activity, Drop, 0},
		{"transient, first attempt", transient, 1, activity, Retry, time.Second},
		{"transient, second attempt", transient, 2, activity, Retry, 2 * time.Second},
		{"transient, last attempt", transient, 3, activity, Fail, 0},
		{"transient, past the last attempt", transient, 4, activity, Fail, 0},
		{"timeout retries", timeout, 1, activity, Retry, time.Second},
		{"resource retries", resource, 1, activity, Retry, time.Second},
		{"cancelled retries", canceled, 1, activity, Retry, time.Second},
		{"permanent, first attempt", Failf(heraldtype.ErrorPermanent, "no"), 1, activity, Fail, 0},
		{"validation, first attempt", Failf(heraldtype.ErrorValidation, "no"), 1, BusPolicy(3), Fail, 0},
		{"permission, first attempt", Failf(heraldtype.ErrorPermission, "no"), 1, BusPolicy(3), Fail, 0},
		{"max_retries 0: the first attempt is the last", transient, 1, BusPolicy(0), Fail, 0},
		{"max_attempts 0 allows no retry", transient, 1, heraldtype.RetryPolicy{InitialInterval: time.Second}, Fail, 0},
		{"bus: attempt 1 waits 2 s", transient, 1, BusPolicy(3), Retry, 2 * time.Second},
		{"bus: attempt 3 waits 8 s", transient, 3, BusPolicy(3), Retry, 8 * time.Second},
		{"bus: attempt 4 of max_retries 3 dead-letters", transient, 4, BusPolicy(3), Fail, 0},
		{"bus: attempt 20 of max_retries 20 waits 2^20 s", transient, 20, BusPolicy(20), Retry, (1 << 20) * time.Second},
		{"bus: attempt 21 of max_retries 20 dead-letters", transient, 21, BusPolicy(20), Fail, 0},
		{"backoff at its cap", transient, 2, heraldtype.RetryPolicy{MaxAttempts: 9, InitialInterval: 2 * time.Second,
			BackoffCoefficient: 2, MaxInterval: 3 * time.Second}, Retry, 3 * time.Second},
		{"backoff capped far past the cap", transient, 50, heraldtype.RetryPolicy{MaxAttempts: 100, InitialInterval: time.Second,
			BackoffCoefficient: 2, MaxInterval: 3 * time.Second}, Retry, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.f, c.attempt, c.p, now)
			if d.Action != c.want {
				t.Fatalf("Decide = %v, want %v", d.Action, c.want)
			}
			var wantAt time.Time
			if c.want == Retry {
				wantAt = now.Add(c.wait)
			}
			if !d.At.Equal(wantAt) {
				t.Fatalf("At = %v, want %v (a wait of %v)", d.At, wantAt, c.wait)
			}
		})
	}
}

// The bus's schedule as a RetryPolicy is the 2^n s it had hard-coded
// (attempt n < 1 counting as 1, n > 30 as 30), for every attempt a
// subscription can reach and beyond.
func TestBusRetryIsTwoToTheN(t *testing.T) {
	old := func(n int) time.Duration {
		n = min(max(n, 1), 30)
		return time.Duration(1<<n) * time.Second
	}
	for n := -1; n <= 80; n++ {
		if got, want := Backoff(BusRetry, n), old(n); got != want {
			t.Errorf("Backoff(BusRetry, %d) = %v, want %v", n, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := heraldtype.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaxInterval: time.Minute}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 1500 * time.Millisecond, 3: 2250 * time.Millisecond,
		20: time.Minute, 100000: time.Minute} {
		if got := Backoff(p, n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
	// No cap: a wait past what a Duration holds is the longest one, not
	// an overflow into the past.
	p.MaxInterval = 0
	if got := Backoff(p, 10000); got <= 0 {
		t.Errorf("uncapped Backoff(10000) = %v, want a positive wait", got)
	}
	// Deterministic: no jitter.
	if Backoff(BusRetry, 5) != Backoff(BusRetry, 5) {
		t.Error("Backoff is not deterministic")
	}
}

func TestExhausted(t *testing.T) {
	p := BusPolicy(3)
	for n, want := range map[int]bool{1: false, 4: false, 5: true} {
		if got := Exhausted(n, p); got != want {
			t.Errorf("Exhausted(%d, max_retries 3) = %v, want %v", n, got, want)
		}
	}
	if Exhausted(100, heraldtype.RetryPolicy{}) {
		t.Error("a policy of no MaxAttempts exhausted")
	}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	base := errors.New("customer does not exist")
	engine := func(err error) heraldtype.ErrorKind {
		if errors.Is(err, heraldtype.ErrNotFound) {
			return heraldtype.ErrorPermanent
		}
		return ""
	}
	expired, cancel := context.WithTimeout(ctx, -time.Second)
	defer cancel()
	cancelled, cancel2 := context.WithCancel(ctx)
	cancel2()
	for _, c := range []struct {
		name     string
		ctx      context.Context
		err      error
		kind     heraldtype.ErrorKind
		msg      string
		canceled bool
	}{
		{"plain", ctx, base, heraldtype.ErrorRuntime, base.Error(), false},
		{"permanent", ctx, &heraldtype.PermanentError{Err: base}, heraldtype.ErrorPermanent, base.Error(), false},
		{"permanent, wrapped", ctx, fmt.Errorf("charge: %w", &heraldtype.PermanentError{Err: base}), heraldtype.ErrorPermanent, base.Error(), false},
		{"deadline", expired, fmt.Errorf("call: %w", context.DeadlineExceeded), heraldtype.ErrorTimeout, "call: context deadline exceeded", false},
		{"deadline passed, another error", expired, base, heraldtype.ErrorTimeout, base.Error(), false},
		{"engine's own", ctx, fmt.Errorf("start: %w", heraldtype.ErrNotFound), heraldtype.ErrorPermanent, "", false},
		{"cancelled", cancelled, base, heraldtype.ErrorRuntime, base.Error(), true},
		{"classified", ctx, fmt.Errorf("x: %w", Failf(heraldtype.ErrorPermission, "deleted")), heraldtype.ErrorPermission, "deleted", false},
		{"panic", ctx, &PanicError{What: "activity", Value: "boom", Stack: "stack"}, heraldtype.ErrorRuntime, "activity panicked: boom", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := Classify(c.ctx, c.err, engine)
			if f.Kind != c.kind || (c.msg != "" && f.Msg != c.msg) || f.Canceled != c.canceled {
				t.Fatalf("Classify = %+v, want kind %s, message %q, canceled %v", f, c.kind, c.msg, c.canceled)
			}
			if Decide(f, 1, BusPolicy(3), now).Action == Fail != c.kind.Permanent() {
				t.Fatalf("kind %s decided %v", f.Kind, Decide(f, 1, BusPolicy(3), now).Action)
			}
		})
	}
	if Classify(ctx, nil, nil) != nil {
		t.Error("Classify(nil) is a failure")
	}
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	v, f := Run(ctx, time.Minute, "handler", "", nil, func(ctx context.Context) (int, error) {
		if _, ok := ctx.Deadline(); !ok {
			return 0, errors.New("no deadline")
		}
		return 7, nil
	})
	if f != nil || v != 7 {
		t.Fatalf("Run = %v, %v", v, f)
	}
	_, f = Run(ctx, 0, "handler", "h", nil, func(context.Context) (int, error) { panic("kaboom") })
	if f == nil || f.Kind != heraldtype.ErrorRuntime || f.Msg != `handler "h" panicked: kaboom` || !strings.Contains(f.Stack, "attempt_test.go") {
		t.Fatalf("a panic gave %+v", f)
	}
	// The bound is the wrapper's: the function sees its deadline pass.
	_, f = Run(ctx, time.Nanosecond, "handler", "", nil, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if f == nil || f.Kind != heraldtype.ErrorTimeout {
		t.Fatalf("a timeout gave %+v", f)
	}
}

func TestKeeper(t *testing.T) {
	clk := clock.NewVirtual(now)
	renewed := make(chan struct{})
	lostCalled := make(chan struct{})
	n := 0
	k := Keep(context.Background(), clk, time.Second, func() error {
		n++
		renewed <- struct{}{}
		if n == 2 {
			return fmt.Errorf("renew: %w", heraldtype.ErrLeaseLost)
		}
		return errors.New("store down") // the next renewal's to get past
	}, func() { close(lostCalled) })
	for range 2 {
		waitTimer(clk)
		clk.Advance(time.Second)
		<-renewed
	}
	<-lostCalled
	if !k.Stop() {
		t.Fatal("Stop did not report the lost lease")
	}

	// Stopped before the lease is lost: not lost, no renewal after Stop.
	k = Keep(context.Background(), clk, time.Second, func() error { t.Error("renewed"); return nil }, nil)
	if k.Stop() {
		t.Fatal("reported lost")
	}
	clk.Advance(time.Hour)
}

// waitTimer waits until a timer is armed on clk.
func waitTimer(clk *clock.Virtual) {
	for {
		armed := clk.TimerArmed()
		if clk.Timers() > 0 {
			return
		}
		<-armed
	}
}
