// Package heraldtest is a test kit for Herald workflows: a runtime on a
// store of its own with a virtual clock, driven step by step in the test's
// goroutine, and Permute, a harness that runs a workflow once per distinct
// order of arrival of its external events.
//
// # Env
//
// New returns an Env: a runtime with what the test registers, on a SQLite
// file in t.TempDir() (synchronous=OFF: a test needs no fsync), or on the
// store WithStore opens (a PostgreSQL schema, say: heraldtest itself does
// not import the PostgreSQL module). Its clock is a clock.Virtual starting at
// Epoch. The runtime is never started: nothing runs in the background.
// Every helper that writes — Start, Raise, Enqueue, PutCorrelated, Publish
// — runs, before it returns, every turn, activity attempt and bus attempt
// that becomes runnable (Settle), in the calling goroutine, one unit at a
// time, with the functions the runtime's own workers use. Advance(d) moves
// the clock to each wake-up that comes due within d in order — timers,
// wait timeouts, activity retry backoff, bus retry backoff — running what
// is due at each, then to now+d; event retention and correlated TTLs
// expire by the maintenance pass it runs at each stop. A workflow with a
// seven-day deadline is tested in milliseconds.
//
// Result, RequireStatus, RequireResult, RequireFate, RequireDropped,
// History and RequireHistory (the history's shape, with a line diff on
// failure) read and assert; MockActivity replaces an activity and records
// its calls; PutScript, Subscribe, Publish, Published, Attempts and
// DeadLetters test the event bus, scripts included. Failures are
// t.Fatalf with readable text.
//
// Script targets run in child processes that re-execute the test binary,
// so a package whose tests publish to a script must call
// herald.ServeScriptChild first thing in its TestMain:
//
//	func TestMain(m *testing.M) {
//		herald.ServeScriptChild()
//		os.Exit(m.Run())
//	}
//
// # Permute
//
// Permute(t, spec) starts spec.Workflow and, at every point between two
// units of work, chooses what happens next: deliver one of the events not
// delivered yet (positional raise, queue enqueue, correlated put, bus
// publish), or let the workflow take its next unit (a turn, an activity
// attempt, a bus attempt; when nothing is runnable at the current time the
// clock first advances to the next wake-up). The points therefore include
// before the instance starts, before and after each wait, timer and
// activity, and between a continue-as-new commit and the next execution's
// first turn. Each ordering runs in a fresh tenant of one store (tenants
// isolate instance ids, event ids and correlated keys), and spec.Check
// judges its Outcome: result or error, status, history, and every event's
// fate by label.
//
// The orderings are explored depth first. A run that reaches a state
// already explored — the same history (times as offsets from the run's
// start), the same fates of the delivered events, the same events still to
// deliver, the same attempts run, the same choices since the instance's
// last turn (the order its inbox filled in) and the same clock offset —
// with no fewer choices is cut short there: its continuations are the ones
// already explored (Spec.NoPrune turns this off). The exploration stops at
// Spec.Budget orderings (default 2,000); past it, Spec.Samples orderings
// more are drawn at random with Spec.Seed, and the log says the
// exploration was not exhaustive. A failure is reported once, as the
// shortest failing ordering (fewest choices), printed as a timeline:
//
//	start · turn[wait answer, timer 1h0m0s] · @+1h0m0s turn[timer fired, withdraw answer, call remind] · deliver a1 · turn[a1 dropped (withdrawn_wait)] · …
//
// Setting Spec.Ordering to that line runs exactly that ordering again.
//
// Activities and handlers run once per ordering: they must not carry state
// from one ordering to the next, or the orderings are not comparable.
package heraldtest
