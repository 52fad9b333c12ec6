package jstarget

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	setup, err := vm.RunProgram(setupProgram)
	if err != nil {
		return reply{Error: &Error{Kind: KindRuntime, Message: "sandbox setup: " + err.Error()}}
	}
	setupFn, _ := goja.AssertFunction(setup)
	pair, err := setupFn(goja.Undefined(), vm.ToValue(string(req.Event)), vm.ToValue(string(req.Tenant)))
	if err != nil {
		return reply{Error: &Error{Kind: KindRuntime, Message: "sandbox setup: " + err.Error()}}
	}
	parts := pair.ToObject(vm)
	ctxVal, permCtor := parts.Get("0"), parts.Get("1")

	fnVal, err := vm.RunProgram(prg)
	if err != nil {
		return reply{Error: classify(vm, err, permCtor)}
	}
	fn, _ := goja.AssertFunction(fnVal)
	res, err := fn(goja.Undefined(), ctxVal, vm.ToValue(logf), permCtor)
	if err != nil {
		return reply{Logs: rep.Logs, Error: classify(vm, err, permCtor)}
	}
	if res == nil || goja.IsUndefined(res) {
		rep.Result = json.RawMessage("null")
		return rep
	}
	b, err := json.Marshal(res.Export())
	if err != nil {
		return reply{Logs: rep.Logs, Error: &Error{Kind: KindRuntime, Message: "result is not JSON-encodable: " + err.Error()}}
	}
	rep.Result = b
	return rep
}

var errTimeout = errors.New("script timed out")

// setupProgram builds, inside each fresh runtime, the deep-frozen ctx and
// the PermanentError class. Compiled once: a Program is not tied to a
// runtime.
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

func classify(vm *goja.Runtime, err error, permCtor goja.Value) *Error {
	var intr *goja.InterruptedError
	if errors.As(err, &intr) {
		return &Error{Kind: KindTimeout, Message: "script did not finish within its timeout", Stack: intr.String()}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Kind: KindResource, Message: "maximum call stack size exceeded", Stack: so.String()}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		e := &Error{Kind: KindRuntime, Message: ex.Error(), Stack: ex.String()}
		if v := ex.Value(); v != nil {
			if obj, ok := v.(*goja.Object); ok {
				if m := obj.Get("message"); m != nil && !goja.IsUndefined(m) {
					e.Message = m.String()
				}
				if s := obj.Get("stack"); s != nil && !goja.IsUndefined(s) {
					e.Stack = s.String()
				}
				if ctor, ok := permCtor.(*goja.Object); ok && vm.InstanceOf(obj, ctor) {
					e.Kind = KindPermanent
				}
				if name := obj.Get("name"); name != nil && name.String() == "RangeError" {
					// A RangeError is goja refusing an allocation
					// (string or array length); it is a resource limit.
					e.Kind = KindResource
				}
			}
		}
		return e
	}
	return &Error{Kind: KindRuntime, Message: err.Error()}
}
