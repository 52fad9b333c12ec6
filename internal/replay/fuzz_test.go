package replay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
)

// The fuzz script is a byte string. Bytes with the high bit clear are the
// workflow's program, run in order by the workflow code (and carried across
// continue-as-new in its input); bytes with the high bit set are what
// happens outside, run in order by the harness between turns. Low three
// bits pick the operation, the next two the event name.
var fuzzNames = []string{"a", "b", "c"}

const (
	wfWait         = iota // WaitEvent(name)
	wfSelectTimer         // Select(WaitEvent(name), timer); variants: waits that may have received, raced
	wfTimeout             // WaitEvent(name, timeout)
	wfSleep               // a timer
	wfActivity            // an activity, awaited
	wfContinue            // ContinueAsNew with the rest of the program
	wfContinueDrop        // the same, DropUnconsumed
	wfSelectOther         // Select(WaitEvent(name), WaitEvent(next name)) or Select(WaitEvent(name), activity)
)

const (
	exRaise  = iota // raise an event of the name (0, 1, 2: raising is common)
	exRaise2        //
	exRaise3        //
	exFire          // fire the oldest timer of the current execution
	exFinish        // complete (or fail) the oldest activity of the current execution
	exTurn          // run a turn
	exTurn2         //
	exStale         // deliver a stale result (older execution, cancelled activity) or raise
)

func fuzzOpName(b byte) string {
	name := fuzzNames[int(b>>3&3)%len(fuzzNames)]
	if b&0x80 == 0 {
		return [...]string{"wait", "select-timer", "timeout", "sleep", "activity", "continue", "continue-drop", "select-other"}[b&7] + " " + name
	}
	return [...]string{"raise", "raise", "raise", "fire", "finish", "turn", "turn", "stale"}[b&7] + " " + name
}

type fuzzInput struct {
	Prog []byte `json:"prog"`
	Step int    `json:"step"` // program steps run by earlier executions
}

// fuzzWorkflow interprets its program. It notes every event it receives
// ("got <id>") so the harness can compare what the code saw with the
// ledger.
func fuzzWorkflow(h *harness) replay.WorkflowFunc {
	return func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
		var in fuzzInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		got := func(op int, v json.RawMessage, err error) error {
			switch {
			case err == nil:
				h.note("%d got %s", op, v)
			case errors.Is(err, replay.ErrEventTimeout), errors.Is(err, replay.ErrCanceled):
				h.note("%d %v", op, err)
			default:
				return fmt.Errorf("op %d: unexpected error %w", op, err)
			}
			return nil
		}
		for i, b := range in.Prog {
			op := in.Step + i
			name := fuzzNames[int(b>>3&3)%len(fuzzNames)]
			other := fuzzNames[(int(b>>3&3)+1)%len(fuzzNames)]
			next := func(drop bool) error {
				input, _ := json.Marshal(fuzzInput{Prog: in.Prog[i+1:], Step: op + 1})
				return &replay.ContinueAsNewError{Input: input, DropUnconsumed: drop}
			}
			switch b & 7 {
			case wfWait:
				v, err := s.WaitEvent(name, 0).Get()
				if err := got(op, v, err); err != nil {
					return nil, err
				}
			case wfSelectTimer:
				// Variants 1–3 race waits that may all have received
				// already. The code reads only the winner (and waits that
				// are not in the race): a loser's event must not be lost,
				// so it is given back, and a later wait receives it.
				var fs []*replay.Future // read after the race
				race := func(sel ...*replay.Future) {
					i := s.Select(sel...)
					h.note("%d winner %d", op, i)
					fs = append(fs, sel[i])
				}
				switch b >> 5 & 3 {
				case 0:
					fs = []*replay.Future{s.WaitEvent(name, 0)}
					s.Select(fs[0], s.NewTimer(time.Minute))
				case 1:
					// Resolved by arrivals of earlier turns: two waits made
					// before a timer, raced after it.
					w1, w2 := s.WaitEvent(name, 0), s.WaitEvent(other, 0)
					if _, err := s.NewTimer(time.Minute).Get(); err != nil {
						return nil, err
					}
					race(w2, w1)
				case 2:
					// The timeout-wrapped wait loses to a timer that has
					// fired; a second wait of the name is listening and
					// receives what the loser gives back.
					w1, w2 := s.WaitEvent(name, 2*time.Minute), s.WaitEvent(name, 0)
					t := s.NewTimer(time.Minute)
					if _, err := t.Get(); err != nil {
						return nil, err
					}
					h.note("%d winner %d", op, s.Select(t, w1))
					fs = append(fs, w2)
				case 3:
					// Three waits raced at once (resolved by buffered
					// events), the first read before the race if it can
					// be: a loser whose result the code got keeps it.
					w1, w2, w3 := s.WaitEvent(name, 0), s.WaitEvent(other, 0), s.WaitEvent(name, 0)
					read := w1.Ready()
					if read {
						v, err := w1.Get()
						if err := got(op, v, err); err != nil {
							return nil, err
						}
					}
					race(w2, w1, w3)
					if fs[0] == w1 && read {
						fs = nil
					}
				}
				for _, f := range fs {
					v, err := f.Get()
					if err := got(op, v, err); err != nil {
						return nil, err
					}
				}
			case wfTimeout:
				v, err := s.WaitEvent(name, time.Minute).Get()
				if err := got(op, v, err); err != nil {
					return nil, err
				}
			case wfSleep:
				if _, err := s.NewTimer(time.Minute).Get(); err != nil {
					return nil, err
				}
			case wfActivity:
				v, err := s.CallActivity("work", jsonOf(op), heraldtype.RetryPolicy{}).Get()
				var ae *replay.ActivityError
				if errors.As(err, &ae) {
					h.note("%d activity failed: %s", op, ae.Message)
				} else {
					h.note("%d activity %s %v", op, v, err)
				}
			case wfContinue:
				return nil, next(false)
			case wfContinueDrop:
				return nil, next(true)
			case wfSelectOther:
				// Bits 5–6 pick the variant: select against a wait of the
				// next name, against an activity, against a second wait of
				// the same name, or two outstanding waits of the same name
				// joined with All.
				w := s.WaitEvent(name, 0)
				var f2 *replay.Future
				isActivity := false
				switch b >> 5 & 3 {
				case 0:
					f2 = s.WaitEvent(other, 0)
				case 1:
					f2, isActivity = s.CallActivity("work", jsonOf(op), heraldtype.RetryPolicy{}), true
				default:
					f2 = s.WaitEvent(name, 0)
				}
				if b>>5&3 == 3 {
					_ = s.All(w, f2)
				} else {
					h.note("%d winner %d", op, s.Select(w, f2))
				}
				for _, f := range []*replay.Future{w, f2} {
					v, err := f.Get()
					if f == f2 && isActivity {
						h.note("%d activity %s %v", op, v, err)
						continue
					}
					if err := got(op, v, err); err != nil {
						return nil, err
					}
				}
			}
		}
		return jsonOf(fmt.Sprintf("done after %d ops", in.Step+len(in.Prog))), nil
	}
}

// runFuzzScript runs one script and checks the lane invariants after every
// turn (harness.check and harness.checkReplay) and at the end.
func runFuzzScript(t testing.TB, script []byte) *harness {
	var prog, ext []byte
	for _, b := range script {
		if b&0x80 == 0 {
			prog = append(prog, b)
		} else {
			ext = append(ext, b)
		}
	}
	if len(prog) > 64 {
		prog = prog[:64]
	}
	if len(ext) > 128 {
		ext = ext[:128]
	}
	input, _ := json.Marshal(fuzzInput{Prog: prog})
	h := newHarness(t, string(input), nil)
	h.wf = fuzzWorkflow(h)
	h.limits = replay.Limits{MaxUnconsumedEvents: 3, MaxCarryForwardExecutions: 2}
	var trace []string
	defer func() {
		if t.Failed() {
			t.Logf("script %x\nprogram: %v\nexternal: %v", script, opNames(prog), trace)
			for e := 1; e <= h.exec(); e++ {
				t.Logf("execution %d:\n%s", e, dumpEvents(h.execution(e)))
			}
		}
	}()
	nextID := 0
	raise := func(name string) {
		nextID++
		id := fmt.Sprintf("%s%d", name, nextID)
		h.raise(name, id, "")
	}
	turn := func() {
		if !h.status.Terminal() {
			h.turn()
		}
	}
	for _, b := range ext {
		if h.status.Terminal() {
			break
		}
		trace = append(trace, fuzzOpName(b))
		name := fuzzNames[int(b>>3&3)%len(fuzzNames)]
		switch b & 7 {
		case exRaise, exRaise2, exRaise3:
			raise(name)
		case exFire:
			for _, k := range h.timers {
				if k.exec == h.exec() {
					h.fire(k.exec, k.seq)
					break
				}
			}
		case exFinish:
			for _, k := range h.acts {
				if k.exec == h.exec() && !k.cancelled {
					if b&0x08 == 0 {
						h.completeActivity(k.exec, k.seq, string(jsonOf(fmt.Sprint("r", k.seq))))
					} else {
						h.failActivity(k.exec, k.seq, fmt.Sprint("f", k.seq))
					}
					break
				}
			}
		case exTurn, exTurn2:
			turn()
		case exStale:
			sent := false
			for _, k := range h.acts {
				if k.exec < h.exec() || k.cancelled {
					h.completeActivity(k.exec, k.seq, `"stale"`)
					sent = true
					break
				}
			}
			if !sent {
				for _, k := range h.timers {
					if k.exec < h.exec() {
						h.fire(k.exec, k.seq)
						sent = true
						break
					}
				}
			}
			if !sent {
				raise(name)
			}
		}
	}
	turn()
	// Drain: answer whatever the workflow still waits for, a bounded number
	// of times, so that programs run to their end.
	for range 40 {
		if h.status.Terminal() {
			break
		}
		progress := false
		for _, k := range h.timers {
			if k.exec == h.exec() {
				h.fire(k.exec, k.seq)
				progress = true
			}
		}
		for _, k := range h.acts {
			if k.exec == h.exec() && !k.cancelled {
				h.completeActivity(k.exec, k.seq, `"drained"`)
				progress = true
			}
		}
		for _, name := range activeWaits(h.cur()) {
			raise(name)
			progress = true
		}
		if !progress && len(h.inbox) == 0 {
			break
		}
		turn()
	}
	checkFuzzEnd(t, h)
	return h
}

// activeWaits lists the names of the waits of hist that are still
// listening, oldest first.
func activeWaits(hist []history.Event) []string {
	open := map[int]string{}
	var order []int
	for _, ev := range hist {
		switch {
		case ev.Kind == history.EventSubscribed && ev.EventID == "":
			open[ev.Seq] = ev.Name
			order = append(order, ev.Seq)
		case ev.Kind == history.EventSubscribedCancelled, ev.Kind == history.EventRaised && ev.TaskSeq > 0:
			delete(open, ev.TaskSeq)
		}
	}
	var names []string
	for _, seq := range order {
		if name, ok := open[seq]; ok {
			names = append(names, name)
		}
	}
	return names
}

// checkFuzzEnd checks what only holds at the end: every event whose message
// was consumed has a final or buffered fate (check does that after every
// turn too), and the events the code received are exactly the delivered
// ones.
func checkFuzzEnd(t testing.TB, h *harness) {
	t.Helper()
	h.check()
	life := h.derive()
	received := map[string]int{}
	for e := 1; e <= h.exec(); e++ {
		for _, n := range h.execNotes[e] {
			if _, v, ok := strings.Cut(n, " got "); ok {
				var id string
				if err := json.Unmarshal([]byte(v), &id); err != nil {
					t.Fatalf("note %q: %v", n, err)
				}
				received[id]++
				if l := life[id]; l == nil || l.fate != history.FateDelivered || l.exec != e {
					t.Fatalf("the code of execution %d received %s, whose history is %+v", e, id, l)
				}
			}
		}
	}
	for id, l := range life {
		if l.fate == history.FateDelivered && received[id] != 1 {
			t.Fatalf("event %s delivered (execution %d, wait %d) but the code received it %d times", id, l.exec, l.waitNumber, received[id])
		}
	}
	for _, r := range h.raised {
		f := h.fates[r.id]
		if f.Fate == history.FatePending {
			found := false
			for _, m := range h.inbox {
				found = found || m.ID == r.msg
			}
			if !found {
				t.Fatalf("event %s is pending but its message is gone", r.id)
			}
		}
		if h.status.Terminal() && (f.Fate == history.FatePending || f.Fate == history.FateBuffered) {
			t.Fatalf("event %s is %s on a %s instance", r.id, f.Fate, h.status)
		}
	}
	if h.status == heraldtype.StatusFailed {
		t.Fatalf("workflow failed: %v", h.failure)
	}
}

func opNames(bs []byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = fuzzOpName(b)
	}
	return out
}

// Script builders for the seeds: w(op, name) is a workflow op, x(op, name)
// an external one.
func w(op, name int) byte { return byte(op) | byte(name)<<3 }
func x(op, name int) byte { return 0x80 | byte(op) | byte(name)<<3 }

var fuzzSeeds = [][]byte{
	// raise before wait, same turn and earlier turn
	{x(exRaise, 0), x(exTurn, 0), w(wfWait, 0), w(wfSleep, 0), x(exRaise, 0), x(exTurn, 0), w(wfWait, 0), x(exFire, 0), x(exTurn, 0)},
	// from seed 002's test plan, test 7b (docs/positional.md, rule 3): select(wait a, timer), timer wins, late a dropped, fresh a received
	{w(wfSelectTimer, 0), w(wfSleep, 0), w(wfWait, 0), x(exTurn, 0), x(exFire, 0), x(exTurn, 0), x(exRaise, 0), x(exTurn, 0),
		x(exFire, 0), x(exTurn, 0), x(exRaise, 0), x(exTurn, 0)},
	// several names, FIFO, limit 3
	{x(exRaise, 0), x(exRaise, 1), x(exRaise, 0), x(exRaise, 2), x(exRaise, 1), x(exTurn, 0),
		w(wfWait, 1), w(wfWait, 0), w(wfWait, 0), w(wfWait, 2), x(exRaise, 2), x(exTurn, 0)},
	// continue-as-new carry forward and its age limit (2)
	{w(wfSleep, 0), w(wfContinue, 0), w(wfSleep, 0), w(wfContinue, 0), w(wfSleep, 0), w(wfContinue, 0), w(wfWait, 1),
		x(exTurn, 0), x(exRaise, 1), x(exRaise, 0), x(exTurn, 0), x(exFire, 0), x(exTurn, 0), x(exTurn, 0),
		x(exRaise, 1), x(exFire, 0), x(exTurn, 0), x(exTurn, 0), x(exFire, 0), x(exRaise, 1), x(exTurn, 0)},
	// drop unconsumed, stale messages
	{w(wfActivity, 0), w(wfSleep, 0), w(wfContinueDrop, 0), w(wfTimeout, 0), w(wfWait, 0),
		x(exTurn, 0), x(exRaise, 0), x(exFinish, 1), x(exTurn, 0), x(exFire, 0), x(exRaise, 0), x(exTurn, 0),
		x(exStale, 0), x(exFire, 0), x(exRaise, 0), x(exTurn, 0)},
	// select against another name, an activity, the same name; two outstanding waits
	{w(wfSelectOther, 0), w(wfSelectOther, 1) | 0x20, w(wfWait, 1), w(wfSelectOther, 2) | 0x40, w(wfSelectOther, 0) | 0x60,
		x(exTurn, 0), x(exRaise, 0), x(exRaise, 1), x(exTurn, 0), x(exRaise, 1), x(exTurn, 0), x(exRaise, 2),
		x(exStale, 0), x(exTurn, 0)},
	// timeouts racing events in one turn
	{w(wfTimeout, 0), w(wfTimeout, 0), w(wfSelectTimer, 0), w(wfWait, 0),
		x(exTurn, 0), x(exFire, 0), x(exRaise, 0), x(exTurn, 0), x(exRaise, 0), x(exFire, 0), x(exRaise, 0), x(exTurn, 0),
		x(exFire, 0), x(exRaise, 0), x(exRaise, 0), x(exTurn, 0)},
	// Found by search (see reaches): a loser gives its event back, buffered
	// again; to a listening wait; a burst of limit drops, and its
	// continuation in a later turn.
	{0x7a, 0x25, 0xf, 0x56, 0xcf, 0x52, 0x13, 0x2, 0xd2},
	{0x6a, 0xbe, 0xf9, 0x27, 0xaf, 0x41, 0x76, 0xdf},
	{0xb7, 0x40, 0x39, 0x1e, 0xca, 0xa1, 0xfa, 0xf8},
	{0xd0, 0x9a, 0x41, 0x39, 0x7b, 0x13, 0x7b, 0x3a, 0x8a, 0x49},
}

func FuzzPositionalLane(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		runFuzzScript(t, script)
	})
}

// TestPositionalLaneSeeds checks that the seeds reach the give-backs and
// the bursts.
func TestPositionalLaneSeeds(t *testing.T) {
	t.Parallel()
	reached := map[string]bool{}
	for _, s := range fuzzSeeds {
		for k := range reaches(runFuzzScript(t, s)) {
			reached[k] = true
		}
	}
	for _, k := range []string{"positional//false", "positional//true", "burst/positional", "continued/positional"} {
		if !reached[k] {
			t.Errorf("no seed reaches %s", k)
		}
	}
}

// TestPositionalLaneRandomScripts runs the fuzz target over a fixed set of
// pseudo-random scripts, so plain `go test` covers more than the seeds.
func TestPositionalLaneRandomScripts(t *testing.T) {
	t.Parallel()
	n := 300
	if testing.Short() {
		n = 50
	}
	for seed := range uint64(n) {
		rng := rand.New(rand.NewPCG(seed, 2))
		script := make([]byte, 8+rng.IntN(56))
		for i := range script {
			script[i] = byte(rng.UintN(256))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runFuzzScript(t, script)
		})
	}
}
