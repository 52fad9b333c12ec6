package jstarget

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// ChildEnv is the environment variable that turns a process started by a
// [Runner] into a script child. Its value is the memory cap in bytes.
const ChildEnv = "HERALD_JSTARGET_CHILD"

const (
	addressSlack  = 64 << 20
	maxCallStack  = 10000
	maxLogLines   = 1000
	maxLogLineLen = 4096
	maxCached     = 256
)

// request is one line the parent writes to a child's stdin.
type request struct {
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Event     json.RawMessage `json:"event"`
	Tenant    json.RawMessage `json:"tenant"`
	TimeoutMS int64           `json:"timeout_ms"`
}

// reply is one line a child writes to stdout for each request.
type reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Logs   []string        `json:"logs,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// ServeChild makes this process a script child if [ChildEnv] is set: it caps
// its own address space, then answers requests on stdin until stdin closes,
// and exits. If ChildEnv is not set it returns at once. Call it first thing
// in main (or TestMain) of any binary a [Runner] starts.
func ServeChild() {
	v, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		fmt.Fprintf(os.Stderr, "jstarget child: bad %s=%q\n", ChildEnv, v)
		os.Exit(2)
	}
	if err := capMemory(limit); err != nil {
		fmt.Fprintf(os.Stderr, "jstarget child: %v\n", err)
		os.Exit(2)
	}
	serve()
	os.Exit(0)
}

// capMemory sets RLIMIT_AS to the address space in use now plus limit plus
// slack. The baseline is large (the Go runtime reserves address space up
// front) but stable, and no script has run yet.
func capMemory(limit int64) error {
	base, err := vmSize()
	if err != nil {
		return err
	}
	as := uint64(base + limit + addressSlack)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_AS: %w", err)
	}
	debug.SetMemoryLimit(limit)
	return nil
}

func vmSize() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

func serve() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	cache := map[string]*goja.Program{}
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return
		}
		var req request
		var rep reply
		if jerr := json.Unmarshal(line, &req); jerr != nil {
			rep.Error = &Error{Kind: KindPermanent, Message: "bad request: " + jerr.Error()}
		} else {
			rep = execute(cache, req)
		}
		b, _ := json.Marshal(rep)
		out.Write(b)
		out.WriteByte('\n')
		if err := out.Flush(); err != nil {
			return
		}
	}
}

func execute(cache map[string]*goja.Program, req request) (rep reply) {
	key := req.Name + "\x00" + req.Source
	prg := cache[key]
	if prg == nil {
		p, err := compile(req.Name, req.Source)
		if err != nil {
			return reply{Error: &Error{Kind: KindSyntax, Message: err.Error()}}
		}
		if len(cache) >= maxCached {
			clear(cache)
		}
		cache[key], prg = p, p
	}

	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	timer := time.AfterFunc(timeout, func() { vm.Interrupt(errTimeout) })
	defer timer.Stop()

	// Every value a script can reach is built inside this runtime and
	// dropped with it; nothing is shared with the next execution.
	for _, name := range []string{"require", "process", "module", "exports", "global"} {
		vm.GlobalObject().Delete(name)
	}
	logf := func(call goja.FunctionCall) goja.Value {
		if len(rep.Logs) >= maxLogLines {
			return goja.Undefined()
		}
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			parts[i] = a.String()
		}
		s := strings.Join(parts, " ")
		if len(s) > maxLogLineLen {
			s = s[:maxLogLineLen]
		}
		rep.Logs = append(rep.Logs, s)
		return goja.Undefined()
	}
	ctxVal, permCtor, err := sandboxValues(vm, req.Event, req.Tenant)
	if err != nil {
		return reply{Error: &Error{Kind: KindRuntime, Message: "sandbox setup: " + err.Error()}}
	}

	// The helpers are made before the script runs, so that a script
	// replacing JSON.stringify or String changes nothing of how its
	// result and errors are read.
	h, err := newHelpers(vm, permCtor)
	if err != nil {
		return reply{Error: &Error{Kind: KindRuntime, Message: "sandbox setup: " + err.Error()}}
	}
	fnVal, err := vm.RunProgram(prg)
	if err != nil {
		return reply{Error: h.classify(err)}
	}
	fn, _ := goja.AssertFunction(fnVal)
	res, err := fn(goja.Undefined(), ctxVal, vm.ToValue(logf), permCtor)
	if err != nil {
		return reply{Logs: rep.Logs, Error: h.classify(err)}
	}
	b, e := h.encode(res)
	if e != nil {
		return reply{Logs: rep.Logs, Error: e}
	}
	rep.Result = b
	return rep
}

// helpers read what a script returned or threw with the runtime's own
// JSON.stringify and String, called as functions of the runtime: a
// getter, toJSON or toString that loops is then interrupted at the
// timeout like the script itself (a timeout, not a dead child), and one
// that throws is an error of the script, never a Go type name.
type helpers struct {
	stringify goja.Callable // JSON.stringify
	describe  goja.Callable // describeThrown, bound to this runtime
}

func newHelpers(vm *goja.Runtime, permCtor goja.Value) (*helpers, error) {
	stringify, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	if !ok {
		return nil, errors.New("no JSON.stringify")
	}
	mk, err := vm.RunProgram(describeThrownProgram)
	if err != nil {
		return nil, err
	}
	mkFn, _ := goja.AssertFunction(mk)
	d, err := mkFn(goja.Undefined(), permCtor)
	if err != nil {
		return nil, err
	}
	describe, ok := goja.AssertFunction(d)
	if !ok {
		return nil, errors.New("describeThrown is not a function")
	}
	return &helpers{stringify: stringify, describe: describe}, nil
}

// encode is JSON.stringify(res). What it gives no text for (undefined, a
// function, a symbol) is recorded as null, as when nothing is returned.
func (h *helpers) encode(res goja.Value) (json.RawMessage, *Error) {
	if res == nil || goja.IsUndefined(res) {
		return json.RawMessage("null"), nil
	}
	if str, ok := res.(goja.String); ok {
		// A string runs no script code when encoded, and Go's encoding
		// of it is the same JSON as JSON.stringify's, several times
		// faster on a large one — unless it holds a lone surrogate,
		// which Go's text would have replaced with U+FFFD.
		if text := str.String(); !strings.ContainsRune(text, utf8.RuneError) {
			b, err := json.Marshal(text)
			if err == nil {
				return b, nil
			}
		}
	}
	v, err := h.stringify(goja.Undefined(), res)
	if err != nil {
		e := h.classify(err)
		if e.Kind != KindTimeout && e.Kind != KindResource {
			e.Message = "result is not JSON: " + e.Message
		}
		return nil, e
	}
	if v == nil || goja.IsUndefined(v) {
		return json.RawMessage("null"), nil
	}
	return json.RawMessage(v.String()), nil
}

// describeThrownProgram makes the function that reads a thrown value:
// its message (String(e.message), or String(e) when it has none), its
// stack, and whether it is a PermanentError or a RangeError. String is
// taken before the script runs. Compiled once.
var describeThrownProgram = goja.MustCompile("sandbox", `(function (PermanentError) {
		'use strict';
		var toString = String;
		return function (e) {
			var out = {message: '', stack: '', permanent: false, range: false};
			if (e === null || (typeof e !== 'object' && typeof e !== 'function')) {
				out.message = toString(e);
				return out;
			}
			var m = e.message;
			out.message = m === undefined ? toString(e) : toString(m);
			var s = e.stack;
			if (s !== undefined) out.stack = toString(s);
			out.permanent = e instanceof PermanentError;
			out.range = e.name === 'RangeError';
			return out;
		};
	})`, true)

var errTimeout = errors.New("script timed out")

// sandboxValues builds, inside a fresh runtime, the deep-frozen ctx
// ({event, tenant}, decoded from their JSON) and the frozen PermanentError
// class.
//
// ctx is built from Go: the same objects, in the same key order, as
// JSON.parse gives, frozen with the runtime's own Object.freeze, at a
// fraction of the cost of parsing and freezing in JavaScript (which
// brings up the runtime's JSON and Array built-ins and runs a recursive
// freeze through getOwnPropertyNames and forEach: most of a trivial
// script's run). JSON with a \uD800–\uDFFF escape takes the
// JavaScript way: JSON.parse keeps a lone surrogate that Go's decoder
// would replace.
func sandboxValues(vm *goja.Runtime, event, tenant json.RawMessage) (ctx, permCtor goja.Value, err error) {
	if hasSurrogateEscape(event) || hasSurrogateEscape(tenant) {
		return sandboxValuesJS(vm, event, tenant)
	}
	freeze, ok := goja.AssertFunction(vm.Get("Object").ToObject(vm).Get("freeze"))
	if !ok {
		return nil, nil, errors.New("no Object.freeze")
	}
	b := frozenBuilder{vm: vm, freeze: freeze}
	ev, err := b.decode(event)
	if err != nil {
		return nil, nil, fmt.Errorf("event: %w", err)
	}
	tn, err := b.decode(tenant)
	if err != nil {
		return nil, nil, fmt.Errorf("tenant: %w", err)
	}
	obj := vm.NewObject()
	if err := obj.DefineDataProperty("event", ev, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		return nil, nil, err
	}
	if err := obj.DefineDataProperty("tenant", tn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		return nil, nil, err
	}
	if ctx, err = b.frozen(obj); err != nil {
		return nil, nil, err
	}
	perm, err := vm.RunProgram(permanentErrorProgram)
	if err != nil {
		return nil, nil, err
	}
	return ctx, perm, nil
}

// hasSurrogateEscape reports whether JSON text has a \u escape of a UTF-16
// surrogate (\uD800 to \uDFFF).
func hasSurrogateEscape(b []byte) bool {
	for i := 0; i+3 < len(b); i++ {
		if b[i] == '\\' {
			if b[i+1] == 'u' && (b[i+2] == 'd' || b[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", b[i+3]) >= 0 {
				return true
			}
			i++ // the escaped character (a backslash too) is not the start of an escape
		}
	}
	return false
}

// frozenBuilder turns JSON text into frozen runtime values.
type frozenBuilder struct {
	vm     *goja.Runtime
	freeze goja.Callable
}

func (b *frozenBuilder) decode(text json.RawMessage) (goja.Value, error) {
	p := jsonParser{b: b, s: text}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.skipSpace(); p.i != len(p.s) {
		return nil, p.errorf("trailing data")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of the JSON a child decodes (the
// event's data is bounded by its size cap; this keeps the recursion's
// stack small all the same).
const maxJSONDepth = 10000

// jsonParser is a recursive-descent JSON parser building frozen runtime
// values; strings with escapes and numbers are decoded by encoding/json and
// strconv.
type jsonParser struct {
	b *frozenBuilder
	s []byte
	i int
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (goja.Value, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested too deep")
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end")
	}
	vm := p.b.vm
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		obj := vm.NewObject()
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return p.b.frozen(obj)
		}
		for {
			p.skipSpace()
			key, err := p.str()
			if err != nil {
				return nil, err
			}
			p.skipSpace()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, p.errorf("want ':'")
			}
			p.i++
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			// Defined, not set, as JSON.parse does: a "__proto__" key is
			// an own property, not the prototype; a repeated key keeps
			// its first place and takes the last value.
			if err := obj.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				return nil, err
			}
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return p.b.frozen(obj)
			}
			return nil, p.errorf("want ',' or '}'")
		}
	case c == '[':
		p.i++
		var items []any
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return p.b.frozen(vm.NewArray())
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == ']' {
				p.i++
				return p.b.frozen(vm.NewArray(items...))
			}
			return nil, p.errorf("want ',' or ']'")
		}
	case c == '"':
		str, err := p.str()
		if err != nil {
			return nil, err
		}
		return vm.ToValue(str), nil
	case c == 't' && bytes.HasPrefix(p.s[p.i:], []byte("true")):
		p.i += 4
		return vm.ToValue(true), nil
	case c == 'f' && bytes.HasPrefix(p.s[p.i:], []byte("false")):
		p.i += 5
		return vm.ToValue(false), nil
	case c == 'n' && bytes.HasPrefix(p.s[p.i:], []byte("null")):
		p.i += 4
		return goja.Null(), nil
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.s) && strings.IndexByte("+-.eE0123456789", p.s[p.i]) >= 0 {
			p.i++
		}
		lit := p.s[start:p.i]
		if !json.Valid(lit) {
			return nil, p.errorf("bad number %q", lit)
		}
		// As goja's JSON.parse: the nearest double; out of range is an
		// error.
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			return nil, p.errorf("number %s: %v", lit, err)
		}
		return vm.ToValue(f), nil
	default:
		return nil, p.errorf("unexpected %q", c)
	}
}

// str reads a JSON string at p.i.
func (p *jsonParser) str() (string, error) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", p.errorf("want a string")
	}
	start, plain := p.i, true
	p.i++
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			if plain {
				return string(p.s[start+1 : p.i-1]), nil
			}
			var out string
			if err := json.Unmarshal(p.s[start:p.i], &out); err != nil {
				return "", p.errorf("%v", err)
			}
			return out, nil
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20 || c >= 0x80:
			plain = false // a control character (invalid) or UTF-8 to check
			p.i++
		default:
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

func (b *frozenBuilder) frozen(o *goja.Object) (goja.Value, error) {
	return b.freeze(goja.Undefined(), o)
}

// permanentErrorProgram is the frozen PermanentError class. Compiled once:
// a Program is not tied to a runtime.
var permanentErrorProgram = goja.MustCompile("sandbox", `(function () {
		'use strict';
		class PermanentError extends Error {
			constructor(message) { super(message); this.name = 'PermanentError'; }
		}
		Object.freeze(PermanentError);
		Object.freeze(PermanentError.prototype);
		return PermanentError;
	})()`, true)

// sandboxValuesJS is sandboxValues in JavaScript: JSON.parse and a
// recursive Object.freeze.
func sandboxValuesJS(vm *goja.Runtime, event, tenant json.RawMessage) (ctx, permCtor goja.Value, err error) {
	setup, err := vm.RunProgram(setupProgram)
	if err != nil {
		return nil, nil, err
	}
	setupFn, _ := goja.AssertFunction(setup)
	pair, err := setupFn(goja.Undefined(), vm.ToValue(string(event)), vm.ToValue(string(tenant)))
	if err != nil {
		return nil, nil, err
	}
	parts := pair.ToObject(vm)
	return parts.Get("0"), parts.Get("1"), nil
}

// setupProgram builds, inside a fresh runtime, the deep-frozen ctx and
// the PermanentError class in JavaScript (sandboxValuesJS). Compiled once.
var setupProgram = goja.MustCompile("sandbox", `(function (eventJSON, tenantJSON) {
		'use strict';
		function deepFreeze(o) {
			if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
				Object.freeze(o);
				Object.getOwnPropertyNames(o).forEach(function (k) { deepFreeze(o[k]); });
			}
			return o;
		}
		class PermanentError extends Error {
			constructor(message) { super(message); this.name = 'PermanentError'; }
		}
		Object.freeze(PermanentError);
		Object.freeze(PermanentError.prototype);
		var ctx = deepFreeze({event: JSON.parse(eventJSON), tenant: JSON.parse(tenantJSON)});
		return [ctx, PermanentError];
	})`, true)

// classify reads an error a call into the runtime returned. A thrown
// object's message and stack are read by the describe helper, itself
// under the interrupt: a loop in a getter or toString is a timeout, and
// an error thrown while reading them becomes the error (unless it is
// again an object, which is then named only by its stack).
func (h *helpers) classify(err error) *Error {
	return h.classifyDepth(err, 0)
}

func (h *helpers) classifyDepth(err error, depth int) *Error {
	var intr *goja.InterruptedError
	if errors.As(err, &intr) {
		return &Error{Kind: KindTimeout, Message: "script did not finish within its timeout", Stack: intr.String()}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Kind: KindResource, Message: "maximum call stack size exceeded", Stack: so.String()}
	}
	var ex *goja.Exception
	if !errors.As(err, &ex) {
		return &Error{Kind: KindRuntime, Message: err.Error()}
	}
	if _, isObj := ex.Value().(*goja.Object); !isObj {
		// A primitive's text is Go's to read: no script code runs.
		return &Error{Kind: KindRuntime, Message: ex.Error(), Stack: ex.String()}
	}
	e := &Error{Kind: KindRuntime, Stack: stackOf(ex)}
	d, derr := h.describe(goja.Undefined(), ex.Value())
	if derr != nil {
		if depth > 0 {
			return e // the caller says the message cannot be read
		}
		inner := h.classifyDepth(derr, depth+1)
		if inner.Kind == KindTimeout || inner.Kind == KindResource {
			return inner
		}
		e.Message = "the script threw a value whose message cannot be read"
		if inner.Message != "" {
			e.Message += ": " + inner.Message
		}
		return e
	}
	// d is the helper's own plain object: reading it runs no script code.
	obj := d.(*goja.Object)
	e.Message = obj.Get("message").String()
	if s := obj.Get("stack").String(); s != "" {
		e.Stack = s
	}
	if obj.Get("permanent").ToBoolean() {
		e.Kind = KindPermanent
	}
	if obj.Get("range").ToBoolean() {
		// A RangeError is goja refusing an allocation (string or array
		// length); it is a resource limit.
		e.Kind = KindResource
	}
	return e
}

// stackOf formats an exception's stack frames without reading its value
// (whose toString is the script's).
func stackOf(ex *goja.Exception) string {
	var b bytes.Buffer
	for _, f := range ex.Stack() {
		b.WriteString("\tat ")
		f.Write(&b)
		b.WriteByte('\n')
	}
	return b.String()
}
