package jstarget

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the script child: the runner
// re-executes it with ChildEnv set.
func TestMain(m *testing.M) {
	ServeChild()
	os.Exit(m.Run())
}

func newRunner(t *testing.T, cfg Config) *Runner {
	t.Helper()
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var testEvent = Event{ID: "ev-1", Type: "user.created", Data: json.RawMessage(`{"role":"admin","n":3,"tags":["a"]}`),
	Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

func run(t *testing.T, r *Runner, src string, timeout time.Duration) (*Result, error) {
	t.Helper()
	s, err := Compile("t.js", src)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return r.Run(context.Background(), s, Input{Event: testEvent, TenantID: "acme", Timeout: timeout})
}

func mustValue(t *testing.T, r *Runner, src, want string) {
	t.Helper()
	res, err := run(t, r, src, 0)
	if err != nil {
		t.Fatalf("run %q: %v", src, err)
	}
	if string(res.Value) != want {
		t.Fatalf("run %q = %s, want %s", src, res.Value, want)
	}
}

func wantKind(t *testing.T, err error, kind string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Fatalf("error = %v, want kind %s", err, kind)
	}
	return e
}

func TestReturnsValueAndLogs(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	res, err := run(t, r, `log('hello', ctx.tenant.id, 42);
return {id: ctx.event.id, type: ctx.event.type, role: ctx.event.data.role, n: ctx.event.data.n + 1, ts: ctx.event.timestamp};`, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"ev-1","type":"user.created","role":"admin","n":4,"ts":"2026-01-02T03:04:05Z"}` // JSON.stringify: in insertion order
	if string(res.Value) != want {
		t.Fatalf("value = %s, want %s", res.Value, want)
	}
	if len(res.Logs) != 1 || res.Logs[0] != "hello acme 42" {
		t.Fatalf("logs = %q", res.Logs)
	}
	mustValue(t, r, `log('nothing returned')`, "null")
}

func TestSyntaxErrorLineColumn(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
	}{
		{"return 1 +;", 1, 11},
		{"var a = 1;\nvar b = ;\nreturn a;", 2, 9},
		{"let x = 1;\nlet x = 2;", 2, 5},
	}
	for _, c := range cases {
		_, err := Compile("s.js", c.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Compile(%q) error = %v, want *SyntaxError", c.src, err)
		}
		if se.Line != c.line || se.Column != c.col {
			t.Errorf("Compile(%q) at %d:%d (%s), want %d:%d", c.src, se.Line, se.Column, se.Message, c.line, c.col)
		}
	}
	// The wrapper must not be escapable: closing it early is a syntax
	// error, not a way to run code outside the function.
	if _, err := Compile("s.js", "}); (function(){"); err == nil {
		t.Fatal("closing the wrapper compiled")
	}
}

func TestNoHostObjects(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	mustValue(t, r, `return [typeof require, typeof process, typeof module, typeof exports, typeof global, typeof setTimeout, typeof fetch]`,
		`["undefined","undefined","undefined","undefined","undefined","undefined","undefined"]`)
	_, err := run(t, r, `return require('fs')`, 0)
	if e := wantKind(t, err, KindRuntime); !strings.Contains(e.Message, "require") {
		t.Fatalf("message %q does not name require", e.Message)
	}
	_, err = run(t, r, `return process.env`, 0)
	wantKind(t, err, KindRuntime)
}

func TestGlobalMutationDoesNotSurvive(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	mustValue(t, r, `globalThis.leak = 'tenant a secret'; Object.prototype.polluted = 1; Array.prototype.push = null; JSON.parse = function(){ return 'x' }; return 1`, "1")
	mustValue(t, r, `return [typeof globalThis.leak, typeof ({}).polluted, typeof [].push, JSON.parse('2')]`,
		`["undefined","undefined","function",2]`)
}

func TestContextFrozen(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	for _, src := range []string{
		`ctx.event.data.role = 'root'`,
		`ctx.event.data.tags.push('b')`,
		`ctx.tenant.id = 'other'`,
		`ctx.evil = 1`,
		`delete ctx.event.type`,
		`Object.setPrototypeOf(ctx.event.data, {isAdmin: true})`,
		`ctx.event.data.__proto__.isAdmin = true; return ({}).isAdmin`,
		`PermanentError.prototype.x = 1`,
	} {
		_, err := run(t, r, src, 0)
		if src == `ctx.event.data.__proto__.isAdmin = true; return ({}).isAdmin` {
			// Object.prototype itself is not frozen (the script owns
			// its runtime), but the pollution must not outlive it.
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			continue
		}
		if e := wantKind(t, err, KindRuntime); !strings.Contains(e.Message, "TypeError") && !strings.Contains(e.Message, "read") &&
			!strings.Contains(e.Message, "extensible") && !strings.Contains(e.Message, "delete") && !strings.Contains(e.Message, "Cannot") {
			t.Logf("%s: %s", src, e.Message)
		}
	}
	mustValue(t, r, `return [ctx.event.data.role, ctx.event.data.tags.length, ctx.tenant.id, ({}).isAdmin === undefined, Object.isFrozen(ctx.event.data.tags)]`,
		`["admin",1,"acme",true,true]`)
}

func TestPermanentError(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	_, err := run(t, r, "log('before');\nthrow new PermanentError('bad input: ' + ctx.event.id)", 0)
	e := wantKind(t, err, KindPermanent)
	if e.Message != "bad input: ev-1" || !strings.Contains(e.Stack, "t.js") {
		t.Fatalf("permanent error = %+v", e)
	}
	_, err = run(t, r, `throw new Error('flaky')`, 0)
	if e := wantKind(t, err, KindRuntime); e.Message != "flaky" {
		t.Fatalf("runtime error message %q", e.Message)
	}
}

func TestInfiniteLoopTimesOut(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	start := time.Now()
	_, err := run(t, r, `while (true) {}`, 200*time.Millisecond)
	wantKind(t, err, KindTimeout)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestParentKillsUnresponsiveChild(t *testing.T) {
	// A native built-in ignores vm.Interrupt; the parent's kill is the
	// backstop. Catastrophic regexp backtracking stays inside native code.
	r := newRunner(t, Config{Children: 1, KillGrace: 100 * time.Millisecond})
	_, err := run(t, r, `return /^(?=a)(a+)+$/.test('a'.repeat(40) + 'b')`, 100*time.Millisecond)
	if e := wantKind(t, err, KindTimeout); !strings.Contains(e.Message, "killed") {
		t.Fatalf("timeout not enforced by the parent: %+v", e)
	}
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestHugeStringIsResourceError(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	_, err := run(t, r, `return 'x'.repeat(2**31).length`, 10*time.Second)
	t.Log(wantKind(t, err, KindResource).Message)
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestUnboundedArrayIsResourceError(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	_, err := run(t, r, `var a = []; for (;;) a.push({i: a.length, s: 'some payload text'});`, 20*time.Second)
	t.Log(wantKind(t, err, KindResource).Message)
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestDeepRecursion(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	_, err := run(t, r, `function f(n) { return f(n + 1) + 1 } return f(0)`, 0)
	wantKind(t, err, KindResource)
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestOtherScriptsKeepRunningWhileOneChildDies(t *testing.T) {
	r := newRunner(t, Config{Children: 2})
	done := make(chan error, 1)
	go func() {
		_, err := run(t, r, `return 'x'.repeat(2**31).length`, 10*time.Second)
		done <- err
	}()
	for range 50 {
		mustValue(t, r, `return ctx.event.data.n * 2`, "6")
	}
	wantKind(t, <-done, KindResource)
	mustValue(t, r, `return 'after'`, `"after"`)
}

func TestNotJSONResult(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	_, err := run(t, r, `var a = {}; a.self = a; return a`, 0)
	wantKind(t, err, KindRuntime)
}

func TestClosed(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	mustValue(t, r, `return 1`, "1")
	r.Close()
	if _, err := run(t, r, `return 1`, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := NewRunner(Config{Children: -1}); err == nil {
		t.Fatal("negative Children accepted")
	}
}

func BenchmarkTrivialRoundTrip(b *testing.B) {
	r, err := NewRunner(Config{Children: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s, _ := Compile("b.js", `return ctx.event.data.n + 1`)
	in := Input{Event: testEvent, TenantID: "acme"}
	if _, err := r.Run(context.Background(), s, in); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Run(context.Background(), s, in); err != nil {
			b.Fatal(err)
		}
	}
}
