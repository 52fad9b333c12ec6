package herald_test

// The event bus's targets that reach workflows (docs/bus.md, "Targets"):
// starting one, and delivering into an instance's positional, queue and
// correlated lanes; and ctx.Publish, the bus's outbox inside a workflow.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

func TestBus_WorkflowTarget(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "onboard", func(ctx *herald.Context, ev herald.BusEvent) (string, error) {
			var data struct {
				User string `json:"user"`
			}
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				return "", err
			}
			return "welcome " + data.User + " (" + ev.Type + " " + ev.ID + ")", nil
		})
	})
	b.subscribe(herald.Subscription{ID: "s", Pattern: "user.created",
		Target: herald.Target{Kind: herald.TargetWorkflow, Workflow: "onboard", InstanceID: "user-{data.user}"}})
	b.publish("user.created", map[string]any{"user": "ann"}, "e1")
	x := b.waitExecution("e1", "s", "succeeded", statusIs(herald.ExecSucceeded))
	if string(x.Result) != `{"instance_id":"user-ann"}` {
		t.Fatalf("result %s", x.Result)
	}
	info := b.waitDone("user-ann")
	var out string
	_ = info.Result(&out)
	if out != "welcome ann (user.created e1)" {
		t.Fatalf("workflow result %q", out)
	}
	// Another event for the same user finds the instance: one instance per
	// template value, never two.
	b.publish("user.created", map[string]any{"user": "ann"}, "e2")
	b.waitExecution("e2", "s", "succeeded", statusIs(herald.ExecSucceeded))
	page, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{Workflow: "onboard"})
	if err != nil || len(page.Instances) != 1 {
		t.Fatalf("instances: %+v %v", page, err)
	}
	// A template that does not resolve is a validation failure: dead-lettered at once.
	b.publish("user.created", map[string]any{"name": "no user field"}, "e3")
	x = b.waitExecution("e3", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if x.Attempts != 1 || !strings.Contains(x.LastError, "data.user") {
		t.Fatalf("unresolved template: %+v", x)
	}
	d, _ := b.client.DeadLetterByID(b.ctx, x.DeadLetter)
	if d.ErrorKind != herald.ErrorValidation {
		t.Fatalf("dead letter kind %s", d.ErrorKind)
	}
}

func TestBus_LaneTargets(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, id string) (string, error) {
			var paid, shipped, signed map[string]any
			if err := ctx.WaitEvent("paid").Get(&paid); err != nil {
				return "", err
			}
			if err := ctx.Dequeue("shipments").Get(&shipped); err != nil {
				return "", err
			}
			if err := ctx.WaitCorrelated("contract.signed", "C-"+id).Get(&signed); err != nil {
				return "", err
			}
			return paid["amount"].(string) + "/" + shipped["carrier"].(string) + "/" + signed["by"].(string), nil
		})
	})
	b.define(herald.EventDefinition{Name: "contract.signed", Correlation: &herald.CorrelationConfig{}})
	b.subscribe(herald.Subscription{ID: "pay", Pattern: "order.paid",
		Target: herald.Target{Kind: herald.TargetSignal, Name: "paid", InstanceID: "order-{data.order}"}})
	b.subscribe(herald.Subscription{ID: "ship", Pattern: "order.shipped",
		Target: herald.Target{Kind: herald.TargetEnqueue, Name: "shipments", InstanceID: "order-{data.order}"}})
	b.subscribe(herald.Subscription{ID: "sign", Pattern: "contract.signed",
		Target: herald.Target{Kind: herald.TargetCorrelated, Name: "contract.signed", Key: "C-{data.contract}"}})
	b.start("order", "order-7", "7")
	b.publish("order.paid", map[string]any{"order": 7, "amount": "12.50"}, "p1")
	b.publish("order.shipped", map[string]any{"order": 7, "carrier": "ups"}, "s1")
	b.publish("contract.signed", map[string]any{"contract": 7, "by": "ann"}, "c1")
	info := b.waitDone("order-7")
	var out string
	_ = info.Result(&out)
	if out != "12.50/ups/ann" {
		t.Fatalf("order-7: %q", out)
	}
	// The delivered events carry ids derived from the bus event and the
	// subscription: a retried attempt would be a duplicate, not a second event.
	for _, c := range []struct{ sub, ev string }{{"pay", "p1"}, {"ship", "s1"}} {
		x := b.waitExecution(c.ev, c.sub, "succeeded", statusIs(herald.ExecSucceeded))
		var res map[string]any
		_ = json.Unmarshal(x.Result, &res)
		id, _ := res["event_id"].(string)
		if id != "bus:"+c.sub+":"+c.ev {
			t.Fatalf("%s delivered as %q", c.sub, id)
		}
		rec, err := b.client.EventFate(b.ctx, id)
		if err != nil || rec.Fate != history.FateDelivered || rec.InstanceID != "order-7" {
			t.Fatalf("fate of %s: %+v %v", id, rec, err)
		}
	}
	// Delivering into an instance that has ended cannot succeed later:
	// dead-lettered at once (permanent).
	b.publish("order.paid", map[string]any{"order": 7, "amount": "1"}, "p2")
	x := b.waitExecution("p2", "pay", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if x.Attempts != 1 || !strings.Contains(x.LastError, "not running") {
		t.Fatalf("delivery to an ended instance: %+v", x)
	}
}

func TestBus_PublishFromWorkflow(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	var gotData atomic.Value
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			seen.Add(1)
			gotData.Store(string(ev.Data) + " from " + ev.Source)
			return nil, nil
		})
		herald.RegisterWorkflow(rt, "checkout", func(ctx *herald.Context, order string) ([]string, error) {
			id, err := ctx.Publish("order.placed", map[string]string{"order": order})
			if err != nil {
				return nil, err
			}
			named, err := ctx.Publish("order.audit", order, herald.WithEventID("audit-"+order))
			if err != nil {
				return nil, err
			}
			if _, err := ctx.Publish("bad..type", nil); err == nil {
				return nil, errors.New("a malformed type was accepted")
			}
			// A turn boundary after the publishes: replays of the code
			// above must not publish again.
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return nil, err
			}
			return []string{id, named}, nil
		})
	})
	b.handlerSub("s", "order.>", "h", nil)
	b.start("checkout", "co-1", "A-1")
	b.waitExec("co-1", 1, history.EventPublished, "", "", 2)
	b.raise("co-1", "go", nil, "go-1")
	info := b.waitDone("co-1")
	var ids []string
	_ = info.Result(&ids)
	if len(ids) != 2 || ids[0] != "co-1/1/2" || ids[1] != "audit-A-1" {
		t.Fatalf("published ids %v", ids)
	}
	for _, id := range ids {
		if ev := b.waitEnded(id); ev.Fate != herald.BusDone || ev.Source != "workflow:co-1" {
			t.Fatalf("%s: %s source %q", id, describeBus(ev), ev.Source)
		}
	}
	if seen.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (replays publish nothing)", seen.Load())
	}
	if got := gotData.Load().(string); !strings.Contains(got, "workflow:co-1") {
		t.Fatalf("handler saw %q", got)
	}
	b.replayAll("co-1")
}

// TestBus_BackPressure: past ClientConfig.BusMaxBacklog Publish refuses
// with ErrBackPressure and stores nothing; a workflow's ctx.Publish is not
// held back.
func TestBus_BackPressure(t *testing.T) {
	t.Parallel()
	obs := newBusObserver()
	// No runtime runs the bus here: nothing drains the backlog.
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Disabled: true},
		ClientConfig: herald.ClientConfig{BusMaxBacklog: 5, Observer: obs}}, nil)
	b.handlerSub("s", "job", "h", nil)
	for i := range 5 {
		b.publish("job", nil, fmt.Sprint("ok", i))
	}
	_, err := b.client.Publish(b.ctx, "job", nil, herald.WithEventID("over"))
	if !errors.Is(err, herald.ErrBackPressure) {
		t.Fatalf("the 6th publish: %v, want ErrBackPressure", err)
	}
	if _, err := b.client.PublishedEvent(b.ctx, "over"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a refused event was stored: %v", err)
	}
	obs.mu.Lock()
	refused := 0
	for _, r := range obs.published {
		if r.Refused {
			refused++
		}
	}
	obs.mu.Unlock()
	if refused != 1 {
		t.Fatalf("%d refusals reported, want 1", refused)
	}
}

// TestBus_DefinitionValidatesData: an event definition named like the
// event type validates published data.
func TestBus_DefinitionValidatesData(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.define(herald.EventDefinition{Name: "order.paid",
		Schema: []byte(`{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"}}}`)})
	if _, err := b.client.Publish(b.ctx, "order.paid", map[string]any{"amount": "lots"}); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("data against the schema: %v", err)
	}
	b.publish("order.paid", map[string]any{"amount": 3}, "good")
	if ev := b.waitEnded("good"); ev.Fate != herald.BusNoMatch {
		t.Fatalf("good: %s", describeBus(ev))
	}
}

// TestBus_RecordRetention: an ended published event is pruned with its
// executions and attempts once Bus.RecordRetention has passed (on the
// engine clock); dead letters stay until deleted; an event still in
// progress is kept.
func TestBus_RecordRetention(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := setup(t, &herald.Config{ExpiryInterval: time.Minute, Bus: herald.BusConfig{RecordRetention: time.Hour},
		ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		okHandler(rt, "ok", nil)
		herald.RegisterBusHandler(rt, "bad", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			return nil, herald.Permanent(errors.New("no"))
		})
		herald.RegisterBusHandler(rt, "flaky", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			return nil, errors.New("later")
		})
	})
	b.handlerSub("ok", "done", "ok", nil)
	b.handlerSub("bad", "dead", "bad", nil)
	b.handlerSub("flaky", "slow", "flaky", intp(20))
	b.publish("done", nil, "e-done")
	b.publish("dead", nil, "e-dead")
	b.publish("slow", nil, "e-slow")
	b.waitEnded("e-done")
	x := b.waitExecution("e-dead", "bad", "dead-lettered", statusIs(herald.ExecDeadLettered))
	b.waitExecution("e-slow", "flaky", "retrying", statusIs(herald.ExecRetrying))
	vc.Advance(2 * time.Hour) // past the retention; the maintenance pass runs
	deadline := time.Now().Add(testTimeout(t))
	for {
		_, err := b.client.PublishedEvent(b.ctx, "e-done")
		if errors.Is(err, herald.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("e-done was not pruned: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if p, _ := b.client.Attempts(b.ctx, herald.AttemptFilter{EventID: "e-done"}); len(p.Attempts) != 0 {
		t.Fatalf("attempts of a pruned event remain")
	}
	if _, err := b.client.DeadLetterByID(b.ctx, x.DeadLetter); err != nil {
		t.Fatalf("the dead letter went with its event: %v", err)
	}
	if _, err := b.client.PublishedEvent(b.ctx, "e-slow"); err != nil {
		t.Fatalf("an event still retrying was pruned: %v", err)
	}
}

// TestBus_FailedScriptKeepsItsLogs: the lines a script logged before it
// threw are in the failed attempt's record.
func TestBus_FailedScriptKeepsItsLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.script("s", `log("step 1", ctx.event.id); log("step 2"); throw new Error("broke");`)
	b.subscribe(herald.Subscription{ID: "s", Pattern: "job", MaxRetries: intp(0), Target: herald.Target{Kind: herald.TargetScript, Script: "s"}})
	b.publish("job", nil, "e")
	b.waitExecution("e", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	as := b.attempts("e")
	if len(as) != 1 || len(as[0].Logs) != 2 || as[0].Logs[0] != "step 1 e" || !strings.Contains(as[0].Error, "broke") {
		t.Fatalf("attempt: %+v", as)
	}
}

// TestBus_ScriptVersionPerClaim: the runtime keeps a script's latest
// version cached, checked against the subscription generation every claim
// reads; a new version put, or the script deleted, through the store is
// what the next attempt runs (or fails on), with no cache left stale.
func TestBus_ScriptVersionPerClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.script("s", `return "v1";`)
	b.subscribe(herald.Subscription{ID: "s", Pattern: "job", MaxRetries: intp(0), Target: herald.Target{Kind: herald.TargetScript, Script: "s"}})
	run := func(id string) *herald.Execution {
		t.Helper()
		b.publish("job", nil, id)
		return b.waitExecution(id, "s", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
	}
	for _, id := range []string{"a1", "a2"} { // the second from the cache
		if x := run(id); x.Status != herald.ExecSucceeded || string(x.Result) != `"v1"` {
			t.Fatalf("%s: %s, result %s, want succeeded with \"v1\"", id, x.Status, x.Result)
		}
	}
	b.script("s", `return "v2";`)
	if x := run("b"); x.Status != herald.ExecSucceeded || string(x.Result) != `"v2"` {
		t.Fatalf("after version 2 was put: %s, result %s, want succeeded with \"v2\"", x.Status, x.Result)
	}
	if err := b.client.DeleteScript(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	x := run("c")
	as := b.attempts("c")
	if x.Status != herald.ExecDeadLettered || len(as) != 1 || !strings.Contains(as[0].Error, "deleted") {
		t.Fatalf("after the script was deleted: %s, attempts %+v, want dead-lettered: the script was deleted", x.Status, as)
	}
}
