package herald_test

// The event bus's targets that reach workflows (docs/bus.md, "Targets"):
// starting one, and delivering into an instance's positional, queue and
// correlated lanes; and ctx.Publish, the bus's outbox inside a workflow.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heraldwf/herald"
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
