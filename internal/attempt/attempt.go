// Package attempt is the one executor of attempts that activities and bus
// executions share: the lease keeper that renews an attempt's lease while
// it runs (Keep), the wrapper that bounds it by its timeout and recovers a
// panic (Run), the classifier that says what a failure is (Classify), and
// the pure decision of what follows it (Decide), over RetryPolicy as the
// one retry schedule.
//
// The executors differ only in what they record: an activity's end is an
// ActivityComplete or ActivityRetry, a bus attempt's a BusResult; a Fail
// decision fails the activity, or dead-letters the bus execution.
package attempt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// Failure is a failed attempt, classified.
type Failure struct {
	Kind  heraldtype.ErrorKind
	Msg   string
	Stack string
	// Canceled: the attempt's own context was cancelled under it (a Stop
	// that abandoned it, a lost lease, an activity's cancellation). Its
	// kind is ErrorRuntime: transient.
	Canceled bool
	// Cause is the raw error of a store failure whose message is
	// storage.ErrorText (no backend names, no driver text); it goes to the
	// log.
	Cause error
	// Err is the error classified (nil: the executor made the failure).
	Err error
}

func (f *Failure) Error() string { return string(f.Kind) + ": " + f.Msg }

// Failf returns a failure of kind with a formatted message.
func Failf(kind heraldtype.ErrorKind, format string, args ...any) *Failure {
	return &Failure{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// KindLeaseLost is the kind of an attempt whose lease was taken over while
// it ran (Keeper.Stop reported it): its end is not the executor's to
// record. It is never stored.
const KindLeaseLost heraldtype.ErrorKind = "lease_lost"

// LeaseLost is the failure of an attempt whose lease was lost.
var LeaseLost = &Failure{Kind: KindLeaseLost, Msg: "the attempt's lease was taken over"}

// PanicError is a panic that Run recovered.
type PanicError struct {
	What  string // what panicked: "activity", "handler"
	Name  string // its name, if it has one
	Value any
	Stack string
}

func (e *PanicError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s %q panicked: %v", e.What, e.Name, e.Value)
	}
	return fmt.Sprintf("%s panicked: %v", e.What, e.Value)
}

// Run calls fn with ctx bounded by timeout (none if timeout ≤ 0), a panic
// in it recovered as a *PanicError (what and name say what panicked;
// name may be empty), and classifies its error (Classify, against the
// bounded context, with engine).
func Run[T any](ctx context.Context, timeout time.Duration, what, name string, engine func(error) heraldtype.ErrorKind,
	fn func(context.Context) (T, error)) (T, *Failure) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	v, err := call(ctx, what, name, fn)
	if err != nil {
		return v, Classify(ctx, err, engine)
	}
	return v, nil
}

func call[T any](ctx context.Context, what, name string, fn func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{What: what, Name: name, Value: p, Stack: string(debug.Stack())}
		}
	}()
	return fn(ctx)
}

// Classify says what an attempt's error is, given the attempt's context:
//
//   - a *Failure (already classified) as it is;
//   - a recovered panic (*PanicError): ErrorRuntime, with its stack;
//   - a heraldtype.PermanentError anywhere in its chain (herald.Permanent,
//     and its deprecated alias NonRetryable): ErrorPermanent, its message
//     the wrapped error's;
//   - the context's deadline: ErrorTimeout;
//   - an error of the engine's own that engine (nil: none) gives a kind
//     (the bus's deliveries into the engine: refused input, an instance
//     that has ended);
//   - the context cancelled: ErrorRuntime, Canceled;
//   - a store failure: ErrorRuntime in Herald's words (storage.ErrorText),
//     the raw error as Cause;
//   - anything else: ErrorRuntime, as it is.
func Classify(ctx context.Context, err error, engine func(error) heraldtype.ErrorKind) *Failure {
	f := classify(ctx, err, engine)
	if f != nil && f.Err == nil {
		f.Err = err
	}
	return f
}

func classify(ctx context.Context, err error, engine func(error) heraldtype.ErrorKind) *Failure {
	var (
		f  *Failure
		pe *PanicError
		pm *heraldtype.PermanentError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &f):
		return f
	case errors.As(err, &pe):
		return &Failure{Kind: heraldtype.ErrorRuntime, Msg: pe.Error(), Stack: pe.Stack}
	case errors.As(err, &pm):
		return Failf(heraldtype.ErrorPermanent, "%v", pm.Err)
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Failf(heraldtype.ErrorTimeout, "%s", storage.ErrorText(err))
	}
	if engine != nil {
		if k := engine(err); k != "" {
			return Failf(k, "%s", storage.ErrorText(err))
		}
	}
	switch {
	case ctx.Err() != nil:
		return &Failure{Kind: heraldtype.ErrorRuntime, Msg: err.Error(), Canceled: true}
	case storage.StoreFailure(err) != "":
		return &Failure{Kind: heraldtype.ErrorRuntime, Msg: storage.ErrorText(err), Cause: err}
	}
	return Failf(heraldtype.ErrorRuntime, "%v", err)
}

// Action is what follows an attempt.
type Action int

const (
	// Complete: the attempt succeeded; record its result.
	Complete Action = iota
	// Retry: record the failure and run another attempt at Decision.At.
	Retry
	// Fail: the failure is final (permanent, or the last attempt's): fail
	// the activity, dead-letter the bus execution.
	Fail
	// Drop: the attempt's lease was lost; record nothing (the attempt that
	// took it over records its own end).
	Drop
)

func (a Action) String() string {
	switch a {
	case Complete:
		return "complete"
	case Retry:
		return "retry"
	case Fail:
		return "fail"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what follows an attempt, and when.
type Decision struct {
	Action Action
	At     time.Time // Retry's: when the next attempt is due
}

// Decide is what follows attempt number attempt (from 1) that ended with
// f (nil: it succeeded) at now, under policy p: a success completes; a
// lost lease drops; a permanent kind fails at once; a transient failure is
// retried while attempt < p.MaxAttempts (MaxAttempts ≤ 0 allows none), at
// now + Backoff(p, attempt); the last attempt's fails.
func Decide(f *Failure, attempt int, p heraldtype.RetryPolicy, now time.Time) Decision {
	switch {
	case f == nil:
		return Decision{Action: Complete}
	case f.Kind == KindLeaseLost:
		return Decision{Action: Drop}
	case f.Kind.Permanent() || attempt >= p.MaxAttempts:
		return Decision{Action: Fail}
	}
	return Decision{Action: Retry, At: now.Add(Backoff(p, attempt))}
}

// Exhausted reports whether an attempt numbered attempt may not run under
// p: every attempt allowed was started, and lost with its worker (a crash,
// an OOM kill, a stalled node), so the count went past MaxAttempts. The
// executor fails it rather than retrying it forever.
func Exhausted(attempt int, p heraldtype.RetryPolicy) bool {
	return p.MaxAttempts > 0 && attempt > p.MaxAttempts
}

// Backoff is the wait after failed attempt n (from 1; less counts as 1)
// before attempt n+1: InitialInterval × BackoffCoefficient^(n-1), at most
// MaxInterval (when set). There is no jitter: attempts are due at a store
// time the claim loops find, not a sleep that many workers end at once.
func Backoff(p heraldtype.RetryPolicy, n int) time.Duration {
	n = max(n, 1)
	d := float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(n-1))
	if p.MaxInterval > 0 && d > float64(p.MaxInterval) {
		return p.MaxInterval
	}
	if d >= math.MaxInt64 { // an unbounded policy's overflow
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// BusRetry is the bus's retry schedule: attempt n's failure waits 2^n s
// (2 s, 4 s, 8 s …), at most 2^30 s. A subscription's MaxRetries gives
// MaxAttempts (BusPolicy).
var BusRetry = heraldtype.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2,
	MaxInterval: (1 << 30) * time.Second}

// BusPolicy is BusRetry with maxRetries retries after the first attempt.
func BusPolicy(maxRetries int) heraldtype.RetryPolicy {
	p := BusRetry
	p.MaxAttempts = maxRetries + 1
	return p
}

// Keeper renews one lease on the engine's clock until it is stopped.
type Keeper struct {
	done chan struct{}
	wg   sync.WaitGroup
	lost bool // written by the keeper's goroutine, read after wg.Wait
}

// Keep renews a lease every interval on clk (the engine's clock, as the
// lease is) until Stop or ctx ends. renew is one renewal; when it returns
// heraldtype.ErrLeaseLost the lease was taken over: the keeper stops, and
// calls lost (if not nil). Other errors are the next renewal's to get
// past: the lease has two more renewals before it runs out.
func Keep(ctx context.Context, clk clock.Clock, every time.Duration, renew func() error, lost func()) *Keeper {
	k := &Keeper{done: make(chan struct{})}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		t := clk.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-ctx.Done():
				return
			case <-t.C():
				// Armed before the renewal: a renewal that takes long
				// does not push every later one back.
				t.Reset(every)
				if errors.Is(renew(), heraldtype.ErrLeaseLost) {
					k.lost = true
					if lost != nil {
						lost()
					}
					return
				}
			}
		}
	}()
	return k
}

// Stop stops the keeper, waiting for a renewal in flight, and reports
// whether the lease was lost.
func (k *Keeper) Stop() (lost bool) {
	close(k.done)
	k.wg.Wait()
	return k.lost
}

// Wait waits until the keeper's context ends (or it lost its lease).
func (k *Keeper) Wait() { k.wg.Wait() }
