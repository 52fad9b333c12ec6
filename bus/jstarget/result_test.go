package jstarget

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childPID is the pid of the one child of a Children: 1 runner (0: none
// started): a script that fails without killing its child leaves the pid
// unchanged.
func childPID(t *testing.T, r *Runner) int {
	t.Helper()
	c := <-r.slots
	defer func() { r.slots <- c }()
	if c == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// noGoTypes fails when a message shown to a script author names Go.
func noGoTypes(t *testing.T, src, msg string) {
	t.Helper()
	for _, g := range []string{"goja", "interface {}", "map[", "func(", "json: ", "panic"} {
		if strings.Contains(msg, g) {
			t.Errorf("%s: message %q names Go (%q)", src, msg, g)
		}
	}
}

// TestResultIsJSONStringify (issue 32 item 12): a result is what
// JSON.stringify makes of it: functions and undefined dropped or null,
// toJSON called, keys in insertion order; what it refuses (a cycle, a
// BigInt) is an error in JavaScript's words.
func TestResultIsJSONStringify(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	for _, c := range []struct{ src, want string }{
		{`return {a: 1, f() {}}`, `{"a":1}`},
		{`return {b: 1, a: undefined, c: Symbol('s'), d: 2}`, `{"b":1,"d":2}`},
		{`return [1, undefined, function () {}, Symbol('s')]`, `[1,null,null,null]`},
		{`return {toJSON() { return {v: 5}; }}`, `{"v":5}`},
		{`return {when: new Date(Date.UTC(2030, 0, 2))}`, `{"when":"2030-01-02T00:00:00.000Z"}`},
		{`return {z: 1, y: 2, x: 3}`, `{"z":1,"y":2,"x":3}`},
		{`return new Map([[1, 2]])`, `{}`},
		{`return [NaN, Infinity, -0]`, `[null,null,0]`},
		{`return 'a\u2028<b>'`, `"a\u2028\u003cb\u003e"`},
		// JSON.stringify gives no text: recorded as null, as returning
		// nothing is.
		{`return undefined`, `null`},
		{`return function () {}`, `null`},
		{`return Symbol('s')`, `null`},
		{`return {toJSON() { return undefined; }}`, `null`},
		// The script cannot change how its result is encoded.
		{`JSON.stringify = function () { return '"forged"'; }; return {a: 1}`, `{"a":1}`},
	} {
		mustValue(t, r, c.src, c.want)
	}
	for _, c := range []struct{ src, kind, msg string }{
		{`var a = {}; a.self = a; return a`, KindRuntime, "result is not JSON: Converting circular structure to JSON"},
		{`return {n: 10n}`, KindRuntime, "result is not JSON: Do not know how to serialize a BigInt"},
		{`return {toJSON() { throw new Error('no'); }}`, KindRuntime, "result is not JSON: no"},
		{`return {toJSON() { throw new PermanentError('never'); }}`, KindPermanent, "result is not JSON: never"},
	} {
		pid := childPID(t, r)
		_, err := run(t, r, c.src, 0)
		e := wantKind(t, err, c.kind)
		if e.Message != c.msg {
			t.Errorf("%s: message %q, want %q", c.src, e.Message, c.msg)
		}
		noGoTypes(t, c.src, e.Message)
		if got := childPID(t, r); got != pid {
			t.Errorf("%s: the child was replaced (pid %d, then %d)", c.src, pid, got)
		}
	}
}

// TestLoopWhileReadingResultOrErrorTimesOut (issue 32 item 11): a loop in
// a getter, toJSON or toString of what a script returns or throws is
// interrupted at the timeout like the script: kind timeout, the child
// alive and reused, no blame on memory.
func TestLoopWhileReadingResultOrErrorTimesOut(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	mustValue(t, r, `return 'start'`, `"start"`)
	for _, src := range []string{
		`return {get x() { while (true) {} }}`,
		`return {toJSON() { while (true) {} }}`,
		`return [1, {get y() { for (;;) {} }}]`,
		`throw {toString() { while (true) {} }}`,
		`throw {get message() { while (true) {} }}`,
		`const e = new Error('m'); Object.defineProperty(e, 'stack', {get() { while (true) {} }}); throw e`,
		`throw {message: {toString() { while (true) {} }}}`,
		`throw new Proxy({}, {get() { while (true) {} }})`,
	} {
		pid := childPID(t, r)
		_, err := run(t, r, src, 200*time.Millisecond)
		e := wantKind(t, err, KindTimeout)
		if strings.Contains(e.Message, "memory") || strings.Contains(e.Message, "died") || strings.Contains(e.Message, "killed") {
			t.Errorf("%s: %q", src, e.Message)
		}
		if got := childPID(t, r); got != pid {
			t.Errorf("%s: the child was replaced (pid %d, then %d)", src, pid, got)
		}
		mustValue(t, r, `return 'after'`, `"after"`)
	}
}

// TestThrownValueMessages: what a script throws is read with its own
// String(), and reading it may itself throw.
func TestThrownValueMessages(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	for _, c := range []struct{ src, msg string }{
		{`throw {toString() { return 'custom'; }}`, "custom"},
		{`throw {message: 42}`, "42"},
		{`throw {toString() { throw new Error('inner'); }}`, "the script threw a value whose message cannot be read: inner"},
		{`throw {toString() { throw {toString() { throw 1; }}; }}`, "the script threw a value whose message cannot be read"},
		{`String = function () { return 'forged'; }; throw new Error('real')`, "real"},
	} {
		_, err := run(t, r, c.src, 0)
		e := wantKind(t, err, KindRuntime)
		if e.Message != c.msg {
			t.Errorf("%s: message %q, want %q", c.src, e.Message, c.msg)
		}
		noGoTypes(t, c.src, e.Message)
	}
}

// TestChildDeathReason: a child that dies on its own is reported with its
// real exit status or signal and what it wrote to stderr; the memory cap
// is named only when the child said it ran out of memory or the system
// killed it.
func TestChildDeathReason(t *testing.T) {
	for _, c := range []struct {
		name, sh, kind string
		want           []string
		not            []string
	}{
		{"crash", `read l; echo 'fatal error: unexpected signal' >&2; exit 3`, KindRuntime,
			[]string{"the script process died (exit status 3: fatal error: unexpected signal)"}, []string{"memory"}},
		{"out of memory", `read l; echo 'fatal error: runtime: out of memory' >&2; exit 2`, KindResource,
			[]string{"the script process died at its memory cap (exit status 2: fatal error: runtime: out of memory)"}, nil},
		{"sigkill", `read l; kill -9 $$`, KindResource,
			[]string{"the script process was killed by the system (signal: killed)", "memory"}, nil},
		{"sigsegv", `read l; kill -11 $$`, KindRuntime,
			[]string{"the script process died (signal: segmentation fault)"}, []string{"memory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRunner(t, Config{Children: 1, Command: func() *exec.Cmd { return exec.Command("sh", "-c", c.sh) }})
			_, err := run(t, r, `return 1`, 5*time.Second)
			e := wantKind(t, err, c.kind)
			for _, w := range c.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q, want it to contain %q", e.Message, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(e.Message, n) {
					t.Errorf("message %q names %q", e.Message, n)
				}
			}
		})
	}
}

// TestStringResultEncoding: a string result is the JSON JSON.stringify
// gives, lone surrogates included, whichever way it is encoded.
func TestStringResultEncoding(t *testing.T) {
	r := newRunner(t, Config{Children: 1})
	for _, c := range []struct{ src, want string }{
		{`return 'plain'`, `"plain"`},
		{`return 'q"\\ \n\t\u0001 é 😀'`, `"q\"\\ \n\t\u0001 é 😀"`},
		{`return '\ud800 lone'`, `"\ud800 lone"`},
		{`return '\ufffd kept'`, `"� kept"`},
		{`return ['\ud800']`, `["\ud800"]`},
	} {
		mustValue(t, r, c.src, c.want)
	}
}
