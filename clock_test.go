package herald_test

import (
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// TestClock_VirtualTimeFiresTimers: with a virtual clock in the config, a
// 24-hour durable timer and a 7-day correlated wait time out when the test
// advances the clock; ctx.Now() reads the virtual time. The wall-clock poll
// is set to an hour, so nothing but the virtual clock can fire them within
// the test's deadline (the wall time taken is logged, not asserted: speed
// belongs to benchmarks).
func TestClock_VirtualTimeFiresTimers(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	vc := clock.NewVirtual(start)
	b := setup(t, &herald.Config{PollInterval: time.Hour, ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "day", func(ctx *herald.Context, _ struct{}) (time.Time, error) {
			if err := ctx.Sleep(24 * time.Hour); err != nil {
				return time.Time{}, err
			}
			return ctx.Now(), nil
		})
		herald.RegisterWorkflow(rt, "week", func(ctx *herald.Context, _ struct{}) (string, error) {
			err := ctx.WaitCorrelated("invoice.paid", "inv-1", herald.WithTimeout(7*24*time.Hour)).Get(nil)
			if !errors.Is(err, herald.ErrEventTimeout) {
				return "", errors.New("want a timeout, got " + errString(err))
			}
			return "timed out at " + ctx.Now().Format(time.RFC3339), nil
		})
	})
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "invoice.paid",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	for _, wf := range []string{"day", "week"} {
		if _, err := b.client.StartWorkflow(b.ctx, wf, nil, herald.WithInstanceID(wf)); err != nil {
			t.Fatal(err)
		}
		b.waitHistory(wf, history.TimerCreated, "", 1)
	}

	began := time.Now()
	vc.Advance(24 * time.Hour)
	var at time.Time
	b.result("day", &at)
	if want := start.Add(24 * time.Hour); !at.Equal(want) {
		t.Errorf("ctx.Now() after the 24 h timer = %v, want %v", at, want)
	}
	if info, err := b.client.Status(b.ctx, "week"); err != nil || info.Status.Terminal() {
		t.Fatalf("week after one day: %v %v, want it still waiting", info, err)
	}
	vc.Advance(6 * 24 * time.Hour)
	var msg string
	b.result("week", &msg)
	if want := "timed out at " + start.Add(7*24*time.Hour).Format(time.RFC3339); msg != want {
		t.Errorf("week: %q, want %q", msg, want)
	}
	elapsed := time.Since(began)
	t.Logf("a day and a week of virtual time took %v of wall time", elapsed)
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
