package jstarget

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Error kinds a script execution can fail with. Timeout, runtime and
// resource are transient (the bus retries them); permanent and syntax are
// not.
const (
	KindSyntax    = "syntax"
	KindRuntime   = "runtime"
	KindTimeout   = "timeout"
	KindResource  = "resource"
	KindPermanent = "permanent"
)

// Error is a failed script execution, as the child reported it or as the
// parent saw the child die.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
	// Logs are the lines the script logged before it failed.
	Logs []string `json:"-"`
}

func (e *Error) Error() string { return "script " + e.Kind + " error: " + e.Message }

// ErrClosed is returned by [Runner.Run] after [Runner.Close].
var ErrClosed = errors.New("jstarget: runner closed")

// Event is what a script sees as ctx.event.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Timestamp time.Time       `json:"timestamp"`
}

// Input is one execution's data.
type Input struct {
	Event    Event
	TenantID string
	// Timeout overrides [Config].Timeout when positive.
	Timeout time.Duration
}

// Result is a successful execution: the script's return value as JSON
// (null when it returned nothing) and the lines it logged.
type Result struct {
	Value json.RawMessage
	Logs  []string
}

// Config configures a [Runner]. Zero fields take their defaults.
type Config struct {
	// Children is the number of child processes, hence of scripts
	// running at once. Default 2.
	Children int
	// MemoryLimit is the address space a child may add to its baseline.
	// Default 128 MiB.
	MemoryLimit int64
	// Timeout is the default per-execution timeout. Default 30 s.
	Timeout time.Duration
	// KillGrace is how long past the timeout the parent waits for the
	// child's answer before it kills the child. Default 1 s.
	KillGrace time.Duration
	// Command builds the command for a new child; the runner adds
	// [ChildEnv] to its environment. Default: this executable with no
	// arguments, which must call [ServeChild] first thing.
	Command func() *exec.Cmd
}

// Runner runs scripts in a pool of sandboxed child processes. A child that
// dies or is killed is replaced on the next use. Runner is safe for
// concurrent use.
type Runner struct {
	cfg   Config
	slots chan *child // nil entries are slots whose child must be started
	once  sync.Once
	done  chan struct{}
}

// NewRunner returns a runner; children start lazily. It returns an error only
// for a negative configuration value.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Children < 0 || cfg.MemoryLimit < 0 || cfg.Timeout < 0 || cfg.KillGrace < 0 {
		return nil, fmt.Errorf("jstarget: negative configuration value in %+v", cfg)
	}
	if cfg.Children == 0 {
		cfg.Children = 2
	}
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = 128 << 20
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = time.Second
	}
	if cfg.Command == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("jstarget: find own executable: %w", err)
		}
		cfg.Command = func() *exec.Cmd { return exec.Command(exe) }
	}
	r := &Runner{cfg: cfg, slots: make(chan *child, cfg.Children), done: make(chan struct{})}
	for range cfg.Children {
		r.slots <- nil
	}
	return r, nil
}

// Run executes s with in. A failed execution returns an *Error; ctx ending
// first returns ctx.Err() (the child is killed, since it may still be
// running the script); a closed runner returns ErrClosed.
func (r *Runner) Run(ctx context.Context, s *Script, in Input) (*Result, error) {
	var c *child
	select {
	case c = <-r.slots:
	case <-r.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-r.done:
		if c != nil {
			c.kill()
		}
		r.slots <- nil
		return nil, ErrClosed
	default:
	}
	if c == nil {
		var err error
		if c, err = r.start(); err != nil {
			r.slots <- nil
			return nil, err
		}
	}
	res, err, healthy := r.exec(ctx, c, s, in)
	select {
	case <-r.done:
		// Close has already drained the pool; this child is the run's
		// to stop.
		healthy = false
	default:
	}
	if !healthy {
		c.kill()
		c = nil
	}
	r.slots <- c
	return res, err
}

func (r *Runner) exec(ctx context.Context, c *child, s *Script, in Input) (*Result, error, bool) {
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = r.cfg.Timeout
	}
	if in.Event.Data == nil {
		in.Event.Data = json.RawMessage("null")
	}
	ev, err := json.Marshal(in.Event)
	if err != nil {
		return nil, &Error{Kind: KindPermanent, Message: "event is not valid JSON: " + err.Error()}, true
	}
	tenant, _ := json.Marshal(map[string]string{"id": in.TenantID})
	req, _ := json.Marshal(request{Name: s.Name, Source: s.Source, Event: ev, Tenant: tenant, TimeoutMS: timeout.Milliseconds()})
	if _, err := c.stdin.Write(append(req, '\n')); err != nil {
		return nil, c.deathError(), false
	}
	t := time.NewTimer(timeout + r.cfg.KillGrace)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			return nil, c.deathError(), false
		}
		var rep reply
		if err := json.Unmarshal(line, &rep); err != nil {
			return nil, &Error{Kind: KindRuntime, Message: "unreadable reply from script child: " + err.Error()}, false
		}
		if rep.Error != nil {
			rep.Error.Logs = rep.Logs
			return nil, rep.Error, true
		}
		return &Result{Value: rep.Result, Logs: rep.Logs}, nil, true
	case <-t.C:
		return nil, &Error{Kind: KindTimeout, Message: fmt.Sprintf("script did not finish within %v; its process was killed", timeout)}, false
	case <-ctx.Done():
		return nil, ctx.Err(), false
	}
}

// Close kills every child and makes later runs fail with ErrClosed. It waits
// for nothing: runs in flight lose their child and return an error.
func (r *Runner) Close() error {
	r.once.Do(func() {
		close(r.done)
		for range r.cfg.Children {
			select {
			case c := <-r.slots:
				if c != nil {
					c.kill()
				}
				r.slots <- nil
			default:
			}
		}
	})
	return nil
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	exited chan struct{}
	stderr *headBuffer
}

func (r *Runner) start() (*child, error) {
	cmd := r.cfg.Command()
	cmd.Env = append(os.Environ(), ChildEnv+"="+strconv.FormatInt(r.cfg.MemoryLimit, 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan []byte, 1), exited: make(chan struct{}), stderr: &headBuffer{max: 4096}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jstarget: start script child: %w", err)
	}
	go func() {
		rd := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				break
			}
			c.lines <- line
		}
		cmd.Wait()
		close(c.exited)
		close(c.lines)
	}()
	return c, nil
}

func (c *child) kill() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	<-c.exited
}

// deathError describes a child that died on its own in the middle of a
// script (the parent's own kills are reported by their cause, never
// here), with the real reason: its exit status or signal and the first
// lines it wrote to stderr. The memory cap is blamed only on its evidence:
// the cap is RLIMIT_AS plus the Go memory limit (capMemory), so reaching
// it makes the Go runtime report that it is out of memory; a SIGKILL the
// parent did not send is the kernel's, whose usual reason is memory too.
// Anything else (a crash of the child) is kind runtime.
func (c *child) deathError() *Error {
	<-c.exited
	st := c.cmd.ProcessState
	stderr := firstLines(c.stderr.String(), 2)
	how := st.String() // "exit status 2", "signal: killed"
	if stderr != "" {
		how += ": " + stderr
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return &Error{Kind: KindResource, Message: "the script process was killed by the system (" + how +
			"), most likely for using too much memory"}
	}
	if outOfMemory(c.stderr.String()) {
		return &Error{Kind: KindResource, Message: "the script process died at its memory cap (" + how + ")"}
	}
	return &Error{Kind: KindRuntime, Message: "the script process died (" + how + ")"}
}

// outOfMemory reports whether a child's stderr says the Go runtime could
// not get memory: what reaching the child's RLIMIT_AS looks like (the
// last two are the race detector's runtime and ThreadSanitizer failing to
// map memory under the cap).
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "cannot map pages",
		"address space collisions", "failed to allocate"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// headBuffer keeps the first max bytes written: a Go runtime crash states
// its cause first.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// firstLines returns the first n lines of s, joined by "; ": the cause of a
// Go runtime crash without its goroutine dump.
func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "; ")
}
