package gopool

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goid returns the calling goroutine's id, from its stack trace.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, err := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

// run runs fn on p and waits for it.
func run(p *Pool, fn func()) {
	done := make(chan struct{})
	p.Go(func() { defer close(done); fn() })
	<-done
}

// A function run after another has returned runs on the same goroutine,
// which keeps the stack the first one grew.
func TestReuse(t *testing.T) {
	p := New(4, time.Minute)
	defer p.Close()
	var first, second int64
	var grow func(n int) int
	grow = func(n int) int { // about 64 KiB of stack
		var pad [256]byte
		pad[n%256] = byte(n)
		if n == 0 {
			return int(pad[0])
		}
		return grow(n-1) + int(pad[n%256])
	}
	run(p, func() { first = goid(); grow(256) })
	eventually(t, "the goroutine waits for work", func() bool { return p.Idle() == 1 })
	run(p, func() { second = goid() })
	if first != second {
		t.Fatalf("second function ran on goroutine %d, want %d (the first one's)", second, first)
	}
	if got := p.Idle(); got > 1 {
		t.Fatalf("%d goroutines wait, want at most 1", got)
	}
}

// The goroutines waiting for work exit after the idle timeout, and no
// more than maxIdle wait.
func TestIdleGoroutinesExit(t *testing.T) {
	base := runtime.NumGoroutine()
	p := New(3, 50*time.Millisecond)
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 10 {
		started.Add(1)
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	close(release)
	eventually(t, "three goroutines wait", func() bool { return p.Idle() == 3 })
	eventually(t, "the waiting goroutines exit", func() bool { return p.Idle() == 0 })
	eventually(t, "the pool's goroutines are gone", func() bool { return runtime.NumGoroutine() <= base })
	run(p, func() {}) // the pool still works
	p.Close()
}

// Close makes the waiting goroutines exit and waits for them; Go still
// runs functions afterwards.
func TestClose(t *testing.T) {
	base := runtime.NumGoroutine()
	p := New(8, time.Hour)
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 5 {
		started.Add(1)
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while functions still ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-closed
	if got := p.Idle(); got != 0 {
		t.Fatalf("%d goroutines wait after Close, want 0", got)
	}
	// A goroutine that has left the pool may take a moment to be gone.
	eventually(t, "the pool's goroutines are gone", func() bool { return runtime.NumGoroutine() <= base })
	var ran atomic.Bool
	run(p, func() { ran.Store(true) })
	if !ran.Load() || p.Idle() != 0 {
		t.Fatalf("after Close: ran %v, %d goroutines wait", ran.Load(), p.Idle())
	}
	p.Close() // again: nothing to do
}

// A nil pool runs each function on a goroutine of its own.
func TestNilPool(t *testing.T) {
	var p *Pool
	var ran atomic.Bool
	run(p, func() { ran.Store(true) })
	if !ran.Load() || p.Idle() != 0 {
		t.Fatal("a nil pool did not run the function")
	}
	p.Close()
}

// runtime.Goexit ends the function's goroutine, as with go: its deferred
// calls run, and it does not come back to the pool.
func TestGoexit(t *testing.T) {
	p := New(4, time.Hour)
	done := make(chan struct{})
	p.Go(func() { defer close(done); runtime.Goexit() })
	<-done
	p.Close() // returns: the goroutine has gone
	if got := p.Idle(); got != 0 {
		t.Fatalf("%d goroutines wait, want 0", got)
	}
}

// Many goroutines use a pool at once, with an idle timeout short enough
// for goroutines to time out while Go hands them work: every function runs
// once (run with -race).
func TestConcurrent(t *testing.T) {
	p := New(4, time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int]int{}
	const callers, each = 8, 500
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				wg.Add(1)
				p.Go(func() {
					defer wg.Done()
					mu.Lock()
					seen[c*each+i]++
					mu.Unlock()
				})
				if i%50 == 0 {
					time.Sleep(2 * time.Millisecond) // let some time out
				}
			}
		}()
	}
	wg.Wait()
	p.Close()
	if len(seen) != callers*each {
		t.Fatalf("%d functions ran, want %d", len(seen), callers*each)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("function %d ran %d times", k, n)
		}
	}
}

// A panic the function does not recover ends the process, as with go: the
// pool recovers nothing. (Run in a child process.)
func TestPanicEndsProcess(t *testing.T) {
	if os.Getenv("GOPOOL_PANIC") == "1" {
		p := New(4, time.Hour)
		run(p, func() {}) // a goroutine waits: the panic is on a reused one
		p.Go(func() { panic("boom from the pool") })
		time.Sleep(10 * time.Second)
		os.Exit(0) // not reached
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicEndsProcess$")
	cmd.Env = append(os.Environ(), "GOPOOL_PANIC=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the process survived a panic in a pooled function:\n%s", out)
	}
	if !bytes.Contains(out, []byte("panic: boom from the pool")) {
		t.Fatalf("the process did not end with the function's panic: %v\n%s", err, out)
	}
}

// A panic the function recovers leaves its goroutine to the pool.
func TestRecoveredPanic(t *testing.T) {
	p := New(4, time.Hour)
	defer p.Close()
	var first, second int64
	run(p, func() {
		defer func() { _ = recover() }()
		first = goid()
		panic("recovered")
	})
	eventually(t, "the goroutine waits for work", func() bool { return p.Idle() == 1 })
	run(p, func() { second = goid() })
	if first != second {
		t.Fatalf("after a recovered panic the next function ran on goroutine %d, want %d", second, first)
	}
}

func BenchmarkGo(b *testing.B) {
	deep := func() {
		var grow func(n int) int
		grow = func(n int) int {
			var pad [128]byte
			pad[n%128] = byte(n)
			if n == 0 {
				return 0
			}
			return grow(n-1) + int(pad[n%128])
		}
		grow(128) // about 24 KiB of stack
	}
	benchGoVsPool(b, deep)
}

func BenchmarkGoShallow(b *testing.B) { benchGoVsPool(b, func() {}) }

// benchGoVsPool measures running work on a new goroutine (go) and on one
// of a pool's.
func benchGoVsPool(b *testing.B, work func()) {
	b.Run("go", func(b *testing.B) {
		done := make(chan struct{})
		for b.Loop() {
			go func() { work(); done <- struct{}{} }()
			<-done
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := New(4, time.Minute)
		defer p.Close()
		done := make(chan struct{})
		for b.Loop() {
			p.Go(func() { work(); done <- struct{}{} })
			<-done
		}
	})
}
