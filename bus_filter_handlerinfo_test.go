package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/bus/rule"
)

// TestBusFilter_AbsentFieldAndNumericOrdering (issue 32 item 8): a
// subscription whose rule says "status ne cancelled" does not receive an
// event without a status (nin likewise), and an ordering op with a string
// operand is refused at save with a typed problem, nothing stored.
func TestBusFilter_AbsentFieldAndNumericOrdering(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", nil) })
	for id, cond := range map[string]string{
		"ne":  `{"field":"data.status","op":"ne","value":"cancelled"}`,
		"nin": `{"field":"data.status","op":"nin","value":["cancelled"]}`,
	} {
		b.subscribe(herald.Subscription{ID: id, Pattern: "order.*",
			Filter: json.RawMessage(`{"logic":"AND","conditions":[` + cond + `]}`),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	}
	b.publish("order.paid", map[string]any{"amount": 5}, "no-status")
	b.publish("order.paid", map[string]any{"status": "open"}, "open")
	ev := b.waitEnded("no-status")
	for _, sub := range []string{"ne", "nin"} {
		r := routeOf(ev, sub)
		if r == nil || r.Matched || !strings.Contains(r.FilteredBy, "data.status "+sub+"): absent") {
			t.Errorf("no status, %s: %s; want filtered out as absent", sub, describeBus(ev))
		}
	}
	if ev.Fate != herald.BusFiltered {
		t.Errorf("no status: fate %s, want filtered", ev.Fate)
	}
	ev = b.waitEnded("open")
	for _, sub := range []string{"ne", "nin"} {
		if r := routeOf(ev, sub); r == nil || !r.Matched {
			t.Errorf("status open, %s: %s; want matched", sub, describeBus(ev))
		}
	}

	_, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: "big", Pattern: "order.*",
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.amount","op":"gt","value":"abc"},{"field":"data.n","op":"lte","value":"10"}]}`),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	var se *herald.SubscriptionInvalidError
	var ie *rule.InvalidError
	if !errors.As(err, &se) || !errors.As(err, &ie) || !errors.Is(err, herald.ErrInvalidArgument) || !errors.Is(err, rule.ErrNotNumeric) {
		t.Fatalf("gt \"abc\": %v; want a *SubscriptionInvalidError with the filter's not-numeric problems", err)
	}
	if len(ie.Problems) != 2 || ie.Problems[0].Code != rule.CodeNotNumeric || ie.Problems[0].Path != "$.conditions[0].value" ||
		ie.Problems[1].Code != rule.CodeNotNumeric || ie.Problems[1].Path != "$.conditions[1].value" {
		t.Errorf("problems %+v, want both ordering operands named", ie.Problems)
	}
	if len(se.Reasons) != 2 || !strings.Contains(se.Reasons[0], `op gt needs a number, not "abc"`) {
		t.Errorf("reasons %q", se.Reasons)
	}
	if _, err := b.client.Subscription(b.ctx, "big"); !errors.Is(err, herald.ErrNotFound) {
		t.Errorf("refused subscription: Subscription = %v, want ErrNotFound (nothing stored)", err)
	}
}

// infoHandler registers "who": it answers with what BusHandlerInfoFrom
// told it, failing (transiently) its first attempt when the event asks.
func infoHandler(rt *herald.Runtime) {
	herald.RegisterBusHandler(rt, "who", func(ctx context.Context, ev herald.BusEvent) (any, error) {
		bi, ok := herald.BusHandlerInfoFrom(ctx)
		if !ok {
			return nil, herald.Permanent(errors.New("no BusHandlerInfo on the handler's ctx"))
		}
		if d, has := ctx.Deadline(); !has || !d.Equal(bi.Deadline) {
			return nil, herald.Permanent(fmt.Errorf("Deadline %v, ctx.Deadline() %v %v", bi.Deadline, d, has))
		}
		if strings.Contains(string(ev.Data), `"fail_first"`) && bi.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		return bi, nil
	})
}

// TestBusHandlerInfo (issue 32 item 9): a Go handler is told its tenant,
// subscription, execution, event, attempt and deadline, so two tenants
// publishing the same event id get distinct idempotency keys, and a retry
// sees attempt 2 with the key of attempt 1.
func TestBusHandlerInfo(t *testing.T) {
	t.Parallel()
	b, vc := virtualBus(t, infoHandler)
	acme := b.as(mustRuntimeClient(b.rt, "acme"))
	globex := b.as(mustRuntimeClient(b.rt, "globex"))
	for _, c := range []*bundle{acme, globex} {
		c.subscribe(herald.Subscription{ID: "s", Pattern: "order.paid", Timeout: herald.Duration(7 * time.Second),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "who"}})
	}
	acme.publish("order.paid", map[string]any{"n": 1}, "same-id")
	globex.publish("order.paid", map[string]any{"n": 2}, "same-id")
	infos := map[string]herald.BusHandlerInfo{}
	for name, c := range map[string]*bundle{"acme": acme, "globex": globex} {
		x := c.waitExecution("same-id", "s", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
		var bi herald.BusHandlerInfo
		if err := json.Unmarshal(x.Result, &bi); err != nil || x.Status != herald.ExecSucceeded {
			t.Fatalf("%s: %s, result %s: %v", name, x.Status, x.Result, err)
		}
		if bi.Tenant != name || bi.Subscription != "s" || bi.EventID != "same-id" || bi.Execution != x.ID || bi.Attempt != 1 ||
			bi.Deadline.IsZero() || bi.IdempotencyKey != fmt.Sprintf("bus/%s/%d", name, x.ID) {
			t.Errorf("%s: handler told %+v (execution %d)", name, bi, x.ID)
		}
		infos[name] = bi
	}
	if a, g := infos["acme"], infos["globex"]; a.Execution == g.Execution || a.IdempotencyKey == g.IdempotencyKey {
		t.Errorf("two tenants' deliveries of event id same-id share an execution or key: %+v, %+v", a, g)
	}

	// A retried attempt is told attempt 2, with the same execution and key.
	acme.publish("order.paid", map[string]any{"fail_first": true}, "retried")
	x := acme.waitExecution("retried", "s", "retrying", func(x *herald.Execution) bool {
		return x.Status == herald.ExecRetrying && x.Attempts == 1
	})
	vc.Advance(2 * time.Second)
	x = acme.waitExecution("retried", "s", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
	var bi herald.BusHandlerInfo
	if err := json.Unmarshal(x.Result, &bi); err != nil || x.Status != herald.ExecSucceeded {
		t.Fatalf("retried: %s, result %s: %v", x.Status, x.Result, err)
	}
	if bi.Attempt != 2 || x.Attempts != 2 || bi.Execution != x.ID || bi.EventID != "retried" || bi.Tenant != "acme" ||
		bi.IdempotencyKey != fmt.Sprintf("bus/acme/%d", x.ID) {
		t.Errorf("retried: handler told %+v; execution %+v", bi, x)
	}
}

// TestBusSandbox_ResultAndErrorReading (issue 32 items 11 and 12): a
// script's result is what JSON.stringify makes of it, what it refuses is
// said in JavaScript's words, and a loop in a getter, toJSON or toString
// of what a script returns or throws is a timeout, not a dead child
// blamed on memory.
func TestBusSandbox_ResultAndErrorReading(t *testing.T) {
	b := sandbox(t)
	var got map[string]any
	a := b.attack("drops-f", `return {a: 1, f() {}, u: undefined, j: {toJSON() { return 'J'; }}};`, sandboxTimeout)
	a.succeeded(t, &got)
	if string(a.x.Result) != `{"a":1,"j":"J"}` {
		t.Errorf("result %s, want {\"a\":1,\"j\":\"J\"} as JSON.stringify gives", a.x.Result)
	}
	a = b.attack("cycle", `const o = {}; o.o = o; return o;`, sandboxTimeout)
	a.failed(t, herald.ErrorRuntime, "result is not JSON: Converting circular structure to JSON")
	noGoTypes(t, a.attempt.Error)
	a = b.attack("bigint", `return 10n;`, sandboxTimeout)
	a.failed(t, herald.ErrorRuntime, "result is not JSON: Do not know how to serialize a BigInt")
	noGoTypes(t, a.attempt.Error)
	for id, src := range map[string]string{
		"getter-loop":   `return {get x() { while (true) {} }};`,
		"tojson-loop":   `return {toJSON() { for (;;) {} }};`,
		"tostring-loop": `throw {toString() { while (true) {} }};`,
	} {
		a = b.attack(id, src, sandboxTimeout)
		a.failed(t, herald.ErrorTimeout)
		if e := strings.ToLower(a.attempt.Error); strings.Contains(e, "memory") || strings.Contains(e, "died") {
			t.Errorf("%s: %q blames the process or memory", id, a.attempt.Error)
		}
		b.stillServes()
	}
}

func noGoTypes(t *testing.T, msg string) {
	t.Helper()
	for _, g := range []string{"goja", "interface {}", "map[", "func(", "json: "} {
		if strings.Contains(msg, g) {
			t.Errorf("message %q names Go (%q)", msg, g)
		}
	}
}
