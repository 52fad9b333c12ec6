package herald_test

// Sandbox escapes tried through the event bus, end to end: each attack is a
// stored script run by a real runtime in its script child processes. Every
// test asserts what was recorded (the execution's status, the attempt's
// error kind, the dead letter) and that the engine and other scripts keep
// working afterwards: a harmless script answers an event published after
// each attack. Subscriptions have MaxRetries 0, so a failure dead-letters
// at once. They run on SQLite, and on PostgreSQL with
// HERALD_TEST_BACKEND=postgres.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// sandboxTimeout is the subscription timeout of the attacks that should
// end in a timeout; attacks that should hit the memory cap get
// sandboxMemoryTimeout, long enough for the cap to come first (the child
// runs under the race detector too).
const (
	sandboxTimeout       = 2 * time.Second
	sandboxMemoryTimeout = 45 * time.Second
)

// sandbox starts a runtime with two script child processes and a harmless
// script ("ok", subscribed to "ok.ping") that stillServes uses.
func sandbox(t *testing.T) *sandboxBundle {
	t.Helper()
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 4, ScriptProcesses: 2}}, nil)
	b.script("ok", `return {pong: ctx.event.data.n, tenant: ctx.tenant.id};`)
	b.subscribe(herald.Subscription{ID: "ok", Pattern: "ok.ping", MaxRetries: intp(0),
		Timeout: herald.Duration(sandboxMemoryTimeout), Target: herald.Target{Kind: herald.TargetScript, Script: "ok"}})
	return &sandboxBundle{bundle: b}
}

type sandboxBundle struct {
	*bundle
	pings atomic.Int64
}

// stillServes publishes an event to the harmless script and waits for its
// execution to succeed with the right answer: the engine and the script
// sandbox survived whatever ran before.
func (b *sandboxBundle) stillServes() {
	b.t.Helper()
	n := b.pings.Add(1)
	id := fmt.Sprintf("ping-%d", n)
	b.publish("ok.ping", map[string]any{"n": n}, id)
	x := b.waitExecution(id, "ok", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
	want := fmt.Sprintf(`{"pong":%d,"tenant":"%s"}`, n, herald.DefaultTenant)
	if x.Status != herald.ExecSucceeded || string(x.Result) != want {
		b.t.Fatalf("the harmless script after an attack: %s result %s (%s), want succeeded with %s",
			x.Status, x.Result, x.LastError, want)
	}
}

// attackResult is what became of one attack.
type attackResult struct {
	ev      *herald.PublishedEvent
	x       *herald.Execution
	attempt *herald.Attempt
	letter  *herald.DeadLetter // nil unless dead-lettered
}

// attack stores src as script id, subscribes it to event type "attack.<id>"
// with no retries and the given timeout, publishes one event and waits for
// its fate to be final. It checks the records agree: one execution, ended,
// with exactly one attempt record; a dead letter exactly when it did not
// succeed, naming the same error kind.
func (b *sandboxBundle) attack(id, src string, timeout time.Duration) *attackResult {
	b.t.Helper()
	return b.attackData(id, src, timeout, map[string]any{"secret": "of " + id})
}

func (b *sandboxBundle) attackData(id, src string, timeout time.Duration, data any) *attackResult {
	b.t.Helper()
	b.script(id, src)
	b.subscribe(herald.Subscription{ID: id, Pattern: "attack." + id, MaxRetries: intp(0), Timeout: herald.Duration(timeout),
		Target: herald.Target{Kind: herald.TargetScript, Script: id}})
	evID := fmt.Sprintf("%s-%d", id, b.pings.Add(1))
	b.publish("attack."+id, data, evID)
	return b.outcome(evID, id)
}

// outcome reads what became of event evID's execution for subscription
// sub once the event's fate is final, and checks the records agree.
func (b *sandboxBundle) outcome(evID, sub string) *attackResult {
	b.t.Helper()
	ev := b.waitEnded(evID)
	r := routeOf(ev, sub)
	if ev.Fate != herald.BusDone || r == nil || r.Execution == nil {
		b.t.Fatalf("attack %s: %s, want done with an execution", sub, describeBus(ev))
	}
	out := &attackResult{ev: ev, x: r.Execution}
	as := b.attempts(evID)
	if len(as) != 1 || as[0].Number != 1 || as[0].Subscription != sub {
		b.t.Fatalf("attack %s: %d attempt records %+v, want exactly one (MaxRetries 0)", sub, len(as), as)
	}
	out.attempt = as[0]
	switch out.x.Status {
	case herald.ExecSucceeded:
		if !out.attempt.Succeeded || out.x.DeadLetter != 0 {
			b.t.Fatalf("attack %s: succeeded execution with attempt %+v, dead letter %d", sub, out.attempt, out.x.DeadLetter)
		}
	case herald.ExecDeadLettered:
		dl, err := b.client.DeadLetterByID(b.ctx, out.x.DeadLetter)
		if err != nil {
			b.t.Fatalf("attack %s: dead letter %d: %v", sub, out.x.DeadLetter, err)
		}
		if out.attempt.Succeeded || dl.ErrorKind != out.attempt.ErrorKind || dl.EventID != evID || dl.Subscription != sub ||
			dl.Attempts != 1 || dl.Target.Kind != herald.TargetScript || dl.Target.Script != sub {
			b.t.Fatalf("attack %s: dead letter %+v does not match attempt %+v", sub, dl, out.attempt)
		}
		out.letter = dl
	default:
		b.t.Fatalf("attack %s: execution %s after the event ended", sub, out.x.Status)
	}
	return out
}

// failed checks an attack dead-lettered with kind and an error message
// containing each fragment (case-insensitive).
func (a *attackResult) failed(t *testing.T, kind herald.ErrorKind, fragments ...string) {
	t.Helper()
	if a.x.Status != herald.ExecDeadLettered || a.attempt.ErrorKind != kind || a.attempt.Result != nil {
		t.Fatalf("%s: execution %s, attempt kind %q (%s) result %.80s; want dead-lettered with kind %s",
			a.x.Subscription, a.x.Status, a.attempt.ErrorKind, a.attempt.Error, a.attempt.Result, kind)
	}
	for _, f := range fragments {
		if !strings.Contains(strings.ToLower(a.attempt.Error), strings.ToLower(f)) {
			t.Errorf("%s: error %q does not mention %q", a.x.Subscription, a.attempt.Error, f)
		}
	}
	if a.x.LastError != a.attempt.Error || a.letter.Error != a.attempt.Error {
		t.Errorf("%s: execution error %q / letter error %q differ from the attempt's %q", a.x.Subscription,
			a.x.LastError, a.letter.Error, a.attempt.Error)
	}
}

// succeeded checks an attack's script ran to completion and decodes its
// result into out.
func (a *attackResult) succeeded(t *testing.T, out any) {
	t.Helper()
	if a.x.Status != herald.ExecSucceeded {
		t.Fatalf("%s: %s (%s: %s), want succeeded", a.x.Subscription, a.x.Status, a.attempt.ErrorKind, a.attempt.Error)
	}
	if err := json.Unmarshal(a.x.Result, out); err != nil {
		t.Fatalf("%s: result %s: %v", a.x.Subscription, a.x.Result, err)
	}
	if string(a.attempt.Result) != string(a.x.Result) {
		t.Fatalf("%s: attempt result %s differs from the execution's %s", a.x.Subscription, a.attempt.Result, a.x.Result)
	}
}

func TestBusSandbox_RequireFS(t *testing.T) {
	b := sandbox(t)
	b.attack("req", `const fs = require('fs'); return fs.readFileSync('/etc/passwd', 'utf8');`, sandboxTimeout).
		failed(t, herald.ErrorRuntime, "require")
	b.stillServes()
	// Nor through the other names Node programs reach for.
	var got map[string]string
	b.attack("req-names", `const out = {};
		for (const n of ['require', 'process', 'module', 'exports', 'global', 'Buffer', 'setTimeout', 'setInterval',
		                 'fetch', 'XMLHttpRequest', 'WebSocket', 'Deno', 'Bun', 'os', 'fs', 'child_process', '__dirname'])
			out[n] = typeof globalThis[n];
		return out;`, sandboxTimeout).succeeded(t, &got)
	for n, typ := range got {
		if typ != "undefined" {
			t.Errorf("a script can see %s (%s)", n, typ)
		}
	}
	if len(got) != 17 {
		t.Fatalf("probe answered %d names: %v", len(got), got)
	}
	b.stillServes()
}

func TestBusSandbox_Process(t *testing.T) {
	b := sandbox(t)
	b.attack("exit", `process.exit(1); return 'still here';`, sandboxTimeout).failed(t, herald.ErrorRuntime, "process")
	b.stillServes()
	b.attack("env", `return process.env;`, sandboxTimeout).failed(t, herald.ErrorRuntime, "process")
	b.stillServes()
	// Throwing what looks like an exit is an ordinary error.
	b.attack("fake-exit", `throw {code: 'EXIT', status: 1};`, sandboxTimeout).failed(t, herald.ErrorRuntime)
	b.stillServes()
}

// leakRounds runs a script that reports whether it sees what an earlier
// execution left behind, then leaves it behind itself. Four executions in a
// row over two script children: the runner hands out children in turn, so
// at least two executions run in a child an earlier one polluted.
func (b *sandboxBundle) leakRounds(id, src string, check func(round int, got map[string]any)) {
	b.t.Helper()
	b.script(id, src)
	b.subscribe(herald.Subscription{ID: id, Pattern: "attack." + id, MaxRetries: intp(0), Timeout: herald.Duration(sandboxTimeout),
		Target: herald.Target{Kind: herald.TargetScript, Script: id}})
	for round := range 4 {
		evID := fmt.Sprintf("%s-%d", id, round)
		b.publish("attack."+id, map[string]any{"round": round}, evID)
		var got map[string]any
		b.outcome(evID, id).succeeded(b.t, &got)
		check(round, got)
	}
	b.stillServes()
}

func TestBusSandbox_GlobalThis(t *testing.T) {
	b := sandbox(t)
	b.leakRounds("global", `
		const seen = {x: typeof globalThis.x, y: typeof y, json: JSON.stringify === undefined ? 'gone' : typeof JSON.stringify,
			math: Math.random === Math.max ? 'swapped' : 'ok'};
		globalThis.x = 1;
		globalThis.y = ctx.event.data.round;
		JSON.stringify = undefined;
		Math.random = Math.max;
		return seen;`,
		func(round int, got map[string]any) {
			want := map[string]any{"x": "undefined", "y": "undefined", "json": "function", "math": "ok"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("execution %d saw %s = %v left by an earlier one (want %v)", round, k, got[k], v)
				}
			}
		})
}

func TestBusSandbox_PrototypePollution(t *testing.T) {
	b := sandbox(t)
	b.leakRounds("proto", `
		const seen = {
			objectProto: ({}).polluted === undefined,
			arrayProto: typeof [].map === 'function' && [].injected === undefined,
			eventProto: ctx.event.evil === undefined && ctx.event.data.evil === undefined,
			logProp: log.leak === undefined,
			permProto: PermanentError.prototype.x === undefined,
			frozen: Object.isFrozen(ctx) && Object.isFrozen(ctx.event) && Object.isFrozen(ctx.event.data) && Object.isFrozen(ctx.tenant),
			round: ctx.event.data.round,
		};
		// Pollute everything reachable; what must not change throws (strict mode).
		Object.prototype.polluted = 'yes';
		Array.prototype.map = null;
		Array.prototype.injected = 1;
		Object.getPrototypeOf(ctx.event).evil = 1;
		log.leak = 1;
		const refused = [];
		for (const [name, f] of [
			['event.data', () => { ctx.event.data.round = 99; }],
			['event.type', () => { ctx.event.type = 'other'; }],
			['event.proto', () => { Object.setPrototypeOf(ctx.event, {isAdmin: true}); }],
			['event.__proto__', () => { ctx.event.__proto__ = {isAdmin: true}; }],
			['tenant.id', () => { ctx.tenant.id = 'globex'; }],
			['ctx.extra', () => { ctx.extra = 1; }],
			['delete', () => { delete ctx.event.id; }],
			['defineProperty', () => { Object.defineProperty(ctx.event, 'id', {value: 'forged'}); }],
			['PermanentError.prototype', () => { PermanentError.prototype.x = 1; }],
		]) {
			try { f(); } catch (e) { if (e instanceof TypeError) refused.push(name); }
		}
		seen.refused = refused.length;
		seen.after = [ctx.event.data.round, ctx.event.type, ctx.tenant.id, ctx.event.isAdmin === undefined, ctx.event.id !== 'forged'];
		return seen;`,
		func(round int, got map[string]any) {
			for _, k := range []string{"objectProto", "arrayProto", "eventProto", "logProp", "permProto", "frozen"} {
				if got[k] != true {
					t.Errorf("execution %d: %s = %v: it saw what an earlier execution polluted, or ctx was not frozen", round, k, got[k])
				}
			}
			if got["refused"] != float64(9) {
				t.Errorf("execution %d: only %v of 9 changes to ctx were refused with a TypeError", round, got["refused"])
			}
			after, _ := json.Marshal(got["after"])
			if want := fmt.Sprintf(`[%d,"attack.proto","default",true,true]`, round); string(after) != want {
				t.Errorf("execution %d: ctx after the attempts: %s, want %s", round, after, want)
			}
		})
	// The stored event data is untouched.
	ev := b.published("proto-0")
	if string(ev.Data) != `{"round":0}` || ev.Type != "attack.proto" {
		t.Fatalf("stored event changed: %s %s", ev.Type, ev.Data)
	}
}

func TestBusSandbox_OtherTenantsData(t *testing.T) {
	b := sandbox(t)
	acme := b.as(mustRuntimeClient(b.rt, "acme"))
	globex := b.as(mustRuntimeClient(b.rt, "globex"))
	// acme's script reports everything it can find; globex keeps a script
	// of its own with a secret in its source.
	acme.script("snoop", `
		const names = Object.getOwnPropertyNames(Function('return this')());
		return {tenant: ctx.tenant.id, id: ctx.event.id, type: ctx.event.type, data: ctx.event.data,
			ctxKeys: Object.keys(ctx), eventKeys: Object.keys(ctx.event), hostNames: names.filter(n => /tenant|store|db|herald|event|globex/i.test(n))};`)
	acme.subscribe(herald.Subscription{ID: "snoop", Pattern: ">", MaxRetries: intp(0), Timeout: herald.Duration(sandboxTimeout),
		Target: herald.Target{Kind: herald.TargetScript, Script: "snoop"}})
	globex.script("vault", `return "globex-script-secret";`)

	// An acme subscription cannot name globex's script: to acme it does
	// not exist.
	_, err := acme.client.PutSubscription(acme.ctx, herald.Subscription{ID: "steal", Pattern: "x",
		Target: herald.Target{Kind: herald.TargetScript, Script: "vault"}})
	if !errors.Is(err, herald.ErrInvalidArgument) || !strings.Contains(err.Error(), "target.script") {
		t.Fatalf("acme subscribing to globex's script: %v, want refused", err)
	}
	if _, err := acme.client.Script(acme.ctx, "vault", 0); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("acme reading globex's script: %v, want ErrNotFound", err)
	}

	// globex publishes first, with an id acme then reuses.
	globex.publish("doc.saved", map[string]any{"secret": "globex-only"}, "doc-1")
	globex.publish("doc.other", map[string]any{"secret": "globex-only-2"}, "doc-g")
	acme.publish("doc.saved", map[string]any{"secret": "acme-only"}, "doc-1")
	for _, id := range []string{"doc-1", "doc-g"} {
		if ev := globex.waitEnded(id); ev.Fate != herald.BusNoMatch || len(ev.Routes) != 0 {
			t.Fatalf("globex's %s: %s, want no_match (acme's subscription must not see it)", id, describeBus(ev))
		}
	}
	x := acme.waitExecution("doc-1", "snoop", "succeeded", statusIs(herald.ExecSucceeded))
	var got struct {
		Tenant, ID, Type string
		Data             map[string]string
		CtxKeys          []string
		EventKeys        []string
		HostNames        []string
	}
	if err := json.Unmarshal(x.Result, &got); err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || got.ID != "doc-1" || got.Type != "doc.saved" || got.Data["secret"] != "acme-only" || len(got.Data) != 1 {
		t.Fatalf("acme's script saw %+v, want acme's own event", got)
	}
	slices.Sort(got.CtxKeys)
	slices.Sort(got.EventKeys)
	if !slices.Equal(got.CtxKeys, []string{"event", "tenant"}) || !slices.Equal(got.EventKeys, []string{"data", "id", "timestamp", "type"}) ||
		len(got.HostNames) != 0 {
		t.Fatalf("acme's script found more than its event: ctx %v, event %v, globals %v", got.CtxKeys, got.EventKeys, got.HostNames)
	}
	if strings.Contains(string(x.Result), "globex") {
		t.Fatalf("acme's result mentions globex: %s", x.Result)
	}
	// acme's subscription ran once, for acme's event only; globex's events
	// have no attempt records, in either tenant.
	p, err := acme.client.Attempts(acme.ctx, herald.AttemptFilter{Subscription: "snoop"})
	if err != nil || len(p.Attempts) != 1 || p.Attempts[0].EventID != "doc-1" {
		t.Fatalf("acme's snoop attempts: %+v %v, want one, for doc-1", p, err)
	}
	for _, c := range []*bundle{acme, globex} {
		if as := c.attempts("doc-g"); len(as) != 0 {
			t.Fatalf("attempt records for globex's doc-g: %+v", as)
		}
	}
	if as := globex.attempts("doc-1"); len(as) != 0 {
		t.Fatalf("globex's doc-1 has attempt records: %+v", as)
	}
	b.stillServes()
}

func TestBusSandbox_HugeString(t *testing.T) {
	b := sandbox(t)
	a := b.attack("huge-string", `const s = 'x'.repeat(2**31); return s.length;`, sandboxMemoryTimeout)
	if a.x.Status != herald.ExecDeadLettered || (a.attempt.ErrorKind != herald.ErrorResource && a.attempt.ErrorKind != herald.ErrorRuntime) {
		t.Fatalf("2 GiB string: %s, kind %q (%s), want dead-lettered with kind resource or runtime", a.x.Status, a.attempt.ErrorKind, a.attempt.Error)
	}
	t.Logf("2 GiB string: %s: %s", a.attempt.ErrorKind, a.attempt.Error)
	b.stillServes()
	// Built up by doubling instead of in one call: the same end.
	a = b.attack("doubling", `let s = 'xy'; for (;;) s = s + s; return s.length;`, sandboxMemoryTimeout)
	if a.x.Status != herald.ExecDeadLettered || (a.attempt.ErrorKind != herald.ErrorResource && a.attempt.ErrorKind != herald.ErrorRuntime) {
		t.Fatalf("doubling string: %s, kind %q (%s)", a.x.Status, a.attempt.ErrorKind, a.attempt.Error)
	}
	t.Logf("doubling string: %s: %s", a.attempt.ErrorKind, a.attempt.Error)
	b.stillServes()
}

func TestBusSandbox_UnboundedArray(t *testing.T) {
	b := sandbox(t)
	// Other scripts run while the attack grows: the second child serves
	// them.
	b.script("grow", `const a = []; for (;;) a.push({i: a.length, s: 'some payload text ' + a.length}); return a.length;`)
	b.subscribe(herald.Subscription{ID: "grow", Pattern: "attack.grow", MaxRetries: intp(0),
		Timeout: herald.Duration(sandboxMemoryTimeout), Target: herald.Target{Kind: herald.TargetScript, Script: "grow"}})
	b.publish("attack.grow", map[string]any{}, "grow-1")
	b.waitExecution("grow-1", "grow", "running", func(x *herald.Execution) bool { return x.Status != herald.ExecQueued })
	b.stillServes()
	b.stillServes()
	b.outcome("grow-1", "grow").failed(t, herald.ErrorResource)
	b.stillServes()
}

func TestBusSandbox_InfiniteLoop(t *testing.T) {
	b := sandbox(t)
	a := b.attack("spin", `while (true) {}`, sandboxTimeout)
	a.failed(t, herald.ErrorTimeout)
	if d := time.Duration(a.attempt.Duration); d < sandboxTimeout {
		t.Errorf("the attempt ended after %v, before its %v timeout", d, sandboxTimeout)
	}
	b.stillServes()
	// A loop that catches whatever stops it, and one in a promise job that
	// runs after the script returned, end the same way.
	b.attack("spin-catch", `for (;;) { try { while (true) {} } catch (e) {} }`, sandboxTimeout).failed(t, herald.ErrorTimeout)
	b.stillServes()
	b.attack("spin-job", `Promise.resolve().then(() => { for (;;) {} }); return 'returned';`, sandboxTimeout).
		failed(t, herald.ErrorTimeout)
	b.stillServes()
}

func TestBusSandbox_DeepRecursion(t *testing.T) {
	b := sandbox(t)
	b.attack("recurse", `function f(n) { return f(n + 1) + 1; } return f(0);`, sandboxTimeout).failed(t, herald.ErrorResource, "stack")
	b.stillServes()
	// Mutual recursion through a getter and a catch that retries.
	b.attack("recurse-catch", `const o = {get x() { try { return this.x; } catch (e) { return this.x; } }}; return o.x;`, sandboxMemoryTimeout).
		failed(t, herald.ErrorResource, "stack")
	b.stillServes()
}

func TestBusSandbox_EvalAndFunction(t *testing.T) {
	b := sandbox(t)
	// eval, Function and the constructors reachable from the host
	// function log all compile code inside the sandbox's own runtime: the
	// global they reach holds ECMAScript's built-ins (and goja's GoError),
	// nothing of the host.
	var got map[string]any
	b.attack("eval", `
		const viaEval = (0, eval)('this');
		const viaFunction = Function('return this')();
		const viaLog = log.constructor('return this')();
		const viaGen = Object.getPrototypeOf(function* () {}).constructor('yield this')().next().value;
		const names = Object.getOwnPropertyNames(viaFunction);
		return {
			same: viaEval === globalThis && viaFunction === globalThis && viaLog === globalThis && viaGen === globalThis,
			names: names,
			require: [eval('typeof require'), Function('return typeof process')(), log.constructor('return typeof module')()],
			logSource: String(log).includes('[native code]'),
			logOwn: Object.getOwnPropertyNames(log),
		};`, sandboxTimeout).succeeded(t, &got)
	if got["same"] != true {
		t.Errorf("eval/Function reached another global: %v", got)
	}
	if r, _ := json.Marshal(got["require"]); string(r) != `["undefined","undefined","undefined"]` {
		t.Errorf("eval/Function reached host objects: %s", r)
	}
	if own, _ := json.Marshal(got["logOwn"]); string(own) != `["length","name"]` {
		t.Errorf("log has own properties %s", own)
	}
	standard := map[string]bool{}
	for _, n := range strings.Fields(`Object Function Array String Number BigInt RegExp Date Boolean Proxy Reflect Error AggregateError
		TypeError ReferenceError SyntaxError RangeError EvalError URIError GoError eval Math JSON ArrayBuffer DataView Uint8Array
		Uint8ClampedArray Int8Array Uint16Array Int16Array Uint32Array Int32Array Float32Array Float64Array BigInt64Array
		BigUint64Array Symbol WeakSet WeakMap Map Set Promise globalThis NaN undefined Infinity isNaN parseInt parseFloat isFinite
		decodeURI decodeURIComponent encodeURI encodeURIComponent escape unescape`) {
		standard[n] = true
	}
	names, _ := got["names"].([]any)
	if len(names) == 0 {
		t.Fatalf("no global names: %v", got)
	}
	for _, n := range names {
		if !standard[n.(string)] {
			t.Errorf("the script's global has %q, which is not an ECMAScript built-in", n)
		}
	}
	b.stillServes()
	// GoError, goja's wrapper for Go errors, is a plain constructor here.
	var ge map[string]any
	b.attack("goerror", `const e = new GoError('x'); return {own: Object.getOwnPropertyNames(e), value: e.value === undefined};`,
		sandboxTimeout).succeeded(t, &ge)
	b.stillServes()
	// Code eval compiles is bound by the same limits.
	b.attack("eval-spin", `eval('while (true) {}');`, sandboxTimeout).failed(t, herald.ErrorTimeout)
	b.stillServes()
	// goja's Function constructor parses its body as part of the
	// function's text, so a body can close the function early (V8 refuses
	// this); the code it runs is still the sandbox's own.
	var inj []string
	b.attack("eval-escape", `return Function('}); (function(){ return [typeof require, typeof process, String(this === globalThis)]')();`,
		sandboxTimeout).succeeded(t, &inj)
	if !slices.Equal(inj, []string{"undefined", "undefined", "true"}) {
		t.Errorf("code injected through Function's body saw %v", inj)
	}
	b.stillServes()
}

func TestBusSandbox_Import(t *testing.T) {
	b := sandbox(t)
	// Modules do not exist: import() and import declarations do not
	// compile, so PutScript refuses them and stores nothing.
	for id, src := range map[string]string{
		"dyn":    `return import('fs');`,
		"static": `import fs from 'fs'; return 1;`,
		"meta":   `return import.meta;`,
	} {
		_, err := b.client.PutScript(b.ctx, id, src)
		var se *herald.ScriptSyntaxError
		if !errors.As(err, &se) || !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("PutScript(%s, %q): %v, want a *ScriptSyntaxError", id, src, err)
		}
		if _, err := b.client.Script(b.ctx, id, 0); !errors.Is(err, herald.ErrNotFound) {
			t.Errorf("refused script %s was stored: %v", id, err)
		}
	}
	// Reached at run time, through eval, it is a syntax error of that run.
	b.attack("eval-import", `return eval("import('fs')");`, sandboxTimeout).failed(t, herald.ErrorRuntime)
	b.stillServes()
}

func TestBusSandbox_HugeResult(t *testing.T) {
	b := sandbox(t)
	// 50 MB does not survive the child's memory cap (the string, its
	// export and its JSON encoding): the child dies, kind resource.
	b.attack("result-50mb", `return 'x'.repeat(50 * 1024 * 1024);`, sandboxMemoryTimeout).failed(t, herald.ErrorResource)
	b.stillServes()
	// 20 MB reaches the engine (unless the child runs under the race
	// detector, whose shadow memory counts against its cap): one way or
	// the other, kind resource and no result recorded.
	b.attack("result-20mb", `return 'x'.repeat(20 * 1024 * 1024);`, sandboxMemoryTimeout).failed(t, herald.ErrorResource)
	b.stillServes()
	// 5 MB reaches the engine, which refuses to store a result over
	// MaxBusResultBytes.
	b.attack("result-5mb", `return 'x'.repeat(5 * 1024 * 1024);`, sandboxMemoryTimeout).
		failed(t, herald.ErrorResource, "result is 5242882 bytes", "over the 1048576-byte cap")
	b.stillServes()
	// Just over and just under the cap (the JSON string's quotes count).
	b.attack("result-over", fmt.Sprintf(`return 'y'.repeat(%d);`, herald.MaxBusResultBytes-1), sandboxTimeout).
		failed(t, herald.ErrorResource, "result")
	var s string
	b.attack("result-under", fmt.Sprintf(`return 'y'.repeat(%d);`, herald.MaxBusResultBytes-2), sandboxTimeout).succeeded(t, &s)
	if len(s) != herald.MaxBusResultBytes-2 {
		t.Fatalf("result under the cap came back %d bytes", len(s))
	}
	b.stillServes()
	// A huge error message and stack (8× MaxBusErrorBytes each) are cut,
	// not stored whole. (4 MB each made the child pass its memory cap
	// under the race detector, whose shadow memory counts against it.)
	a := b.attack("error-512k", `const e = new Error('e'.repeat(512 * 1024)); e.stack = 's'.repeat(512 * 1024); throw e;`,
		sandboxMemoryTimeout)
	a.failed(t, herald.ErrorRuntime, "cut")
	if len(a.attempt.Error) > herald.MaxBusErrorBytes || len(a.attempt.Stack) > herald.MaxBusErrorBytes ||
		len(a.letter.Stack) > herald.MaxBusErrorBytes || len(a.x.LastError) > herald.MaxBusErrorBytes {
		t.Fatalf("error %d bytes, stack %d, letter stack %d, last error %d: over the %d-byte cap", len(a.attempt.Error),
			len(a.attempt.Stack), len(a.letter.Stack), len(a.x.LastError), herald.MaxBusErrorBytes)
	}
	b.stillServes()
	// NUL bytes and lone surrogates in what a script returns, throws and
	// logs are stored (PostgreSQL refuses NUL in text) and read back.
	a = b.attack("nul", `throw new Error('c\u0000d\ud800');`, sandboxTimeout)
	a.failed(t, herald.ErrorRuntime)
	if !strings.Contains(a.attempt.Error, "c\x00d") || !strings.Contains(a.letter.Error, "c\x00d") {
		t.Fatalf("NUL in the error: %q / %q", a.attempt.Error, a.letter.Error)
	}
	var nul map[string]string
	a = b.attack("nul-result", `log('a\u0000b', '\ud800'); return {k: 'a\u0000b', ['\u0000']: 'x'};`, sandboxTimeout)
	a.succeeded(t, &nul)
	if nul["k"] != "a\x00b" || nul["\x00"] != "x" || len(a.attempt.Logs) != 1 || !strings.HasPrefix(a.attempt.Logs[0], "a\x00b ") {
		t.Fatalf("NUL in the result and logs: %q %q", nul, a.attempt.Logs)
	}
	b.stillServes()
}

// TestBusSandbox_HandlerHugeResult: the cap is the engine's, so a Go
// handler's result is held to it too.
func TestBusSandbox_HandlerHugeResult(t *testing.T) {
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "big", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			var n int
			_ = json.Unmarshal(ev.Data, &n)
			return strings.Repeat("z", n), nil
		})
		herald.RegisterBusHandler(rt, "loud", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			return nil, errors.New(strings.Repeat("é", herald.MaxBusErrorBytes))
		})
	})
	b.handlerSub("big", "big", "big", intp(0))
	b.handlerSub("loud", "loud", "loud", intp(0))
	b.publish("big", 5<<20, "big-5mb")
	b.publish("big", 100, "big-small")
	b.publish("loud", nil, "loud-1")
	if x := b.waitExecution("big-5mb", "big", "dead-lettered", statusIs(herald.ExecDeadLettered)); !strings.Contains(x.LastError, "cap") {
		t.Fatalf("a 5 MB handler result: %q", x.LastError)
	}
	if as := b.attempts("big-5mb"); len(as) != 1 || as[0].ErrorKind != herald.ErrorResource || as[0].Result != nil {
		t.Fatalf("attempts of big-5mb: %+v", as)
	}
	if x := b.waitExecution("big-small", "big", "succeeded", statusIs(herald.ExecSucceeded)); len(x.Result) != 102 {
		t.Fatalf("a small result: %d bytes", len(x.Result))
	}
	x := b.waitExecution("loud-1", "loud", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if len(x.LastError) > herald.MaxBusErrorBytes || !strings.HasSuffix(x.LastError, "bytes in all)") || !strings.HasPrefix(x.LastError, "é") {
		t.Fatalf("a 128 KiB error message was stored as %d bytes ending %q", len(x.LastError), x.LastError[max(0, len(x.LastError)-40):])
	}
	for i := range len(x.LastError) - len(" … (cut: 131072 bytes in all)") {
		if x.LastError[i] != "é"[0] && x.LastError[i] != "é"[1] {
			t.Fatalf("the cut error is not whole runes of é at byte %d: %q", i, x.LastError[i:i+4])
		}
	}
}
