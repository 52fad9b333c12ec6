package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// TestTestScript_Outcomes: a dry run returns the script's value and logs,
// or its failure with the kind the bus would record (runtime with a stack,
// permanent, timeout, resource), in a sandbox child process; nothing is
// stored.
func TestTestScript_Outcomes(t *testing.T) {
	b := setup(t, &herald.Config{Bus: herald.BusConfig{ScriptMemory: 32 << 20}}, nil)
	ev := herald.BusEvent{Type: "order.paid", Data: json.RawMessage(`{"amount":1200,"order_id":"o-1"}`)}
	run := func(src string, timeout time.Duration) *herald.ScriptTestResult {
		t.Helper()
		res, err := b.rt.TestScript(b.ctx, "acme", herald.ScriptTest{Name: "check", Source: src, Event: ev, Timeout: timeout})
		if err != nil {
			t.Fatalf("TestScript(%q): %v", src, err)
		}
		return res
	}

	res := run(`log("order", ctx.event.data.order_id, ctx.event.id); return {big: ctx.event.data.amount > 1000, tenant: ctx.tenant.id, type: ctx.event.type}`, 0)
	if !res.Succeeded || string(res.Result) != `{"big":true,"tenant":"acme","type":"order.paid"}` ||
		len(res.Logs) != 1 || res.Logs[0] != "order o-1 dry-run" || res.ErrorKind != "" {
		t.Fatalf("success: %+v (result %s)", res, res.Result)
	}

	res = run("log('before');\nfunction inner() { throw new Error('boom'); }\ninner();", 0)
	if res.Succeeded || res.ErrorKind != herald.ErrorRuntime || res.Error != "boom" ||
		!strings.Contains(res.Stack, "inner") || len(res.Logs) != 1 || res.Logs[0] != "before" {
		t.Fatalf("throw: %+v", res)
	}

	if res = run(`throw new PermanentError("needs review")`, 0); res.ErrorKind != herald.ErrorPermanent || res.Error != "needs review" {
		t.Fatalf("permanent: %+v", res)
	}

	began := time.Now()
	if res = run(`while (true) {}`, 200*time.Millisecond); res.Succeeded || res.ErrorKind != herald.ErrorTimeout {
		t.Fatalf("endless loop: %+v", res)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the endless loop ran %v past a 200ms timeout", d)
	}

	res = run(`var a = []; for (;;) a.push({i: a.length, s: 'some payload text'});`, 30*time.Second)
	if res.Succeeded || res.ErrorKind != herald.ErrorResource {
		t.Fatalf("unbounded allocation: %+v", res)
	}
	if res = run(`function f(n) { return f(n + 1) + 1 } return f(0)`, 0); res.ErrorKind != herald.ErrorResource {
		t.Fatalf("deep recursion: %+v", res)
	}
	if res = run(`return 'x'.repeat(2 << 20)`, 0); res.Succeeded || res.ErrorKind != herald.ErrorResource ||
		!strings.Contains(res.Error, "over the") {
		t.Fatalf("result over MaxBusResultBytes: %+v", res.ErrorKind)
	}
	if res = run(`return 'after'`, 0); !res.Succeeded || string(res.Result) != `"after"` {
		t.Fatalf("after the failures: %+v", res)
	}

	// Nothing was stored for the tenant.
	acme, err := b.rt.Client("acme")
	if err != nil {
		t.Fatal(err)
	}
	if ss, err := acme.Scripts(b.ctx); err != nil || len(ss) != 0 {
		t.Fatalf("scripts after dry runs: %v, %v", ss, err)
	}
}

// TestTestScript_Refusals: bad input is a typed error before any process
// starts; a syntax error carries its position.
func TestTestScript_Refusals(t *testing.T) {
	b := setup(t, nil, nil)
	ok := herald.ScriptTest{Source: `return 1`, Event: herald.BusEvent{Type: "a.b"}}
	_, err := b.rt.TestScript(b.ctx, "t", herald.ScriptTest{Source: "return 1;\nreturn (;", Event: ok.Event})
	var se *herald.ScriptSyntaxError
	if !errors.As(err, &se) || se.Err.Line != 2 || !errors.Is(err, herald.ErrScriptSyntax) || !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("syntax error: %v", err)
	}
	bad := []struct {
		name   string
		tenant string
		mod    func(*herald.ScriptTest)
		reason string
	}{
		{"tenant", "a\x00b", func(*herald.ScriptTest) {}, "tenant"},
		{"no type", "t", func(s *herald.ScriptTest) { s.Event.Type = "" }, "event type"},
		{"wildcard type", "t", func(s *herald.ScriptTest) { s.Event.Type = "a.*" }, "event type"},
		{"data not JSON", "t", func(s *herald.ScriptTest) { s.Event.Data = json.RawMessage(`{"a":`) }, "event data"},
		{"deep data", "t", func(s *herald.ScriptTest) {
			s.Event.Data = json.RawMessage(strings.Repeat("[", 200) + strings.Repeat("]", 200))
		}, "event data"},
		{"huge data", "t", func(s *herald.ScriptTest) {
			s.Event.Data = json.RawMessage(`"` + strings.Repeat("x", herald.DefaultMaxPayloadBytes) + `"`)
		}, "event data"},
		{"NUL source", "t", func(s *herald.ScriptTest) { s.Source = "return 1\x00" }, "source"},
		{"huge source", "t", func(s *herald.ScriptTest) { s.Source = strings.Repeat(" ", herald.MaxScriptBytes+1) }, "source"},
		{"timeout", "t", func(s *herald.ScriptTest) { s.Timeout = time.Hour }, "timeout"},
		{"negative timeout", "t", func(s *herald.ScriptTest) { s.Timeout = -1 }, "timeout"},
		{"event id", "t", func(s *herald.ScriptTest) { s.Event.ID = strings.Repeat("i", 300) }, "event id"},
	}
	for _, c := range bad {
		in := ok
		c.mod(&in)
		_, err := b.rt.TestScript(b.ctx, c.tenant, in)
		var ia *herald.InvalidArgumentError
		if !errors.As(err, &ia) || !strings.Contains(strings.Join(ia.Reasons, "; "), c.reason) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.rt.TestScript(ctx, "t", ok); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
}

// TestValidateScript: nil for a script that parses, the position of a
// syntax error, a typed refusal of text that cannot be a script.
func TestValidateScript(t *testing.T) {
	if err := herald.ValidateScript(`log(ctx.event.type); return 1`); err != nil {
		t.Fatal(err)
	}
	var se *herald.ScriptSyntaxError
	if err := herald.ValidateScript("var a = 1;\n  a = ;"); !errors.As(err, &se) || se.Err.Line != 2 || se.Err.Column < 1 {
		t.Fatalf("syntax error: %v", err)
	}
	for _, src := range []string{"return 1\x00", "return '\xff'", strings.Repeat(" ", herald.MaxScriptBytes+1)} {
		var ia *herald.InvalidArgumentError
		if err := herald.ValidateScript(src); !errors.As(err, &ia) {
			t.Errorf("%.20q: %v", src, err)
		}
	}
}
