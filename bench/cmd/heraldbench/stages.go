package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald/storage"
)

// The isolated scenario's stage breakdown (Herald only): where one round
// trip's time goes, from the stamps the benchmark's store wrapper takes
// around the store calls of the round trip's instance.
//
//	client      Send called → the store's EventRaise begins (validation, the definition lookup)
//	raise       the EventRaise call (the event durable: fsync / WAL flush)
//	wake-up     EventRaise returned → the TurnClaim call that took the instance begins (notify, loop wake-up;
//	            zero when the claim began before the raise call had returned)
//	claim       that TurnClaim call (the lease, the inbox and the history read)
//	            With a direct hand-off (the raise leased the instance and loaded its turn, see
//	            storage.EventRaiseParams.Claim) there is no TurnClaim: the raise stage includes the
//	            claim's work, and wake-up and claim are zero. On SQLite the raise hands the turn over
//	            at its commit, before its fsync (storage.EventRaiseParams.OnClaimed): the raise stage
//	            then ends at the hand-over, and the one fsync that makes the raise and the turn
//	            durable together is in the commit stage.
//	replay      TurnClaim returned → TurnCommit begins (replay, the turn's decisions)
//	commit      the TurnCommit call (durable: fsync / WAL flush); the round trip ends when it returns
//
// The stages follow each other in that order for a round trip on an idle
// engine and add up to its latency.

// stageNames are the stages in order.
var stageNames = []string{"client", "raise", "wake-up", "claim", "replay", "commit"}

// stageStamps are the moments of one round trip, on the wall clock.
type stageStamps struct {
	raiseStart, raiseEnd, claimStart, claimEnd, commitStart, commitEnd time.Time
}

// stageRecorder collects stamps per instance while on (off under load:
// the map and its lock would be noise there).
type stageRecorder struct {
	on atomic.Bool
	mu sync.Mutex
	m  map[string]*stageStamps
}

func (r *stageRecorder) start() {
	r.mu.Lock()
	r.m = map[string]*stageStamps{}
	r.mu.Unlock()
	r.on.Store(true)
}

func (r *stageRecorder) stop() { r.on.Store(false) }

// note records what set does to the instance's stamps, if on.
func (r *stageRecorder) note(id string, set func(s *stageStamps)) {
	if r == nil || !r.on.Load() {
		return
	}
	r.mu.Lock()
	s := r.m[id]
	if s == nil {
		s = &stageStamps{}
		r.m[id] = s
	}
	set(s)
	r.mu.Unlock()
}

// take returns (and forgets) the instance's stamps.
func (r *stageRecorder) take(id string) (stageStamps, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[id]
	delete(r.m, id)
	if !ok {
		return stageStamps{}, false
	}
	return *s, true
}

// durations splits one round trip that began (Send called) at sent into
// its stages; ok is false when a stamp is missing or out of order. The
// claim may begin before the EventRaise call has returned to its caller
// (the wake-up is sent once the event is durable, and the two goroutines
// race): then the raise stage ends at the claim's start and the wake-up is
// zero. The stages always add up to sent → commit returned.
func (s stageStamps) durations(sent time.Time) ([]time.Duration, bool) {
	for _, t := range []time.Time{s.raiseStart, s.raiseEnd, s.claimStart, s.claimEnd, s.commitStart, s.commitEnd} {
		if t.IsZero() {
			return nil, false
		}
	}
	raiseEnd := s.raiseEnd
	if s.claimStart.Before(raiseEnd) {
		raiseEnd = s.claimStart
	}
	at := []time.Time{sent, s.raiseStart, raiseEnd, s.claimStart, s.claimEnd, s.commitStart, s.commitEnd}
	out := make([]time.Duration, len(at)-1)
	for i := range out {
		if at[i+1].Before(at[i]) {
			return nil, false
		}
		out[i] = at[i+1].Sub(at[i])
	}
	return out, true
}

// EventRaise, TurnClaim and TurnCommit of the benchmark's store wrapper
// stamp the stages.

func (s *stampStore) EventRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	start := time.Now()
	if p.OnClaimed != nil && s.stages != nil && s.stages.on.Load() {
		q := *p
		on, id := p.OnClaimed, p.InstanceID
		q.OnClaimed = func(t *storage.Turn) {
			at := time.Now()
			s.stages.note(id, func(st *stageStamps) { st.claimStart, st.claimEnd = at, at })
			on(t)
		}
		p = &q
	}
	res, err := s.Store.EventRaise(ctx, p)
	if err == nil {
		end := time.Now()
		handedOff := res.Turn != nil
		s.stages.note(p.InstanceID, func(st *stageStamps) {
			st.raiseStart, st.raiseEnd = start, end
			if handedOff {
				st.claimStart, st.claimEnd = end, end
			}
		})
	}
	return res, err
}

func (s *stampStore) TurnClaim(ctx context.Context, p *storage.TurnClaimParams) ([]*storage.Turn, error) {
	start := time.Now()
	turns, err := s.Store.TurnClaim(ctx, p)
	if err == nil && s.stages != nil && s.stages.on.Load() {
		end := time.Now()
		for _, t := range turns {
			s.stages.note(t.Instance.ID, func(st *stageStamps) { st.claimStart, st.claimEnd = start, end })
		}
	}
	return turns, err
}

// stagesOf returns the system's stage recorder, if it has one (Herald).
func stagesOf(s System) *stageRecorder {
	if h, ok := s.(*heraldSystem); ok {
		return h.stages
	}
	return nil
}

// stageResults turns the stage durations of the isolated round trips into
// one row per stage.
func stageResults(base Result, per [][]time.Duration) []Result {
	out := make([]Result, len(stageNames))
	for i, name := range stageNames {
		d := make(dist, 0, len(per))
		for _, p := range per {
			d = append(d, p[i])
		}
		r := Result{Scenario: base.Scenario + " · " + name, System: base.System, Durability: base.Durability, N: len(d),
			Note: "stage " + name + " of the round trips above (see bench/README.md: stages)"}
		d.fill(&r)
		out[i] = r
	}
	return out
}

// loadStages splits the paced sends of the load scenario into stages
// (-load-stages): "pacing" is the send's scheduled time → Send called (the
// benchmark's own lag), then the stages of stageNames. It returns a table
// of each stage's p50, p99 and max over the sends it could split, and the
// mean of each stage over the slowest 1 % of them: which stage the tail
// comes from.
func loadStages(rec *stageRecorder, list []string, sched, sent []time.Time, lat dist) string {
	names := append([]string{"pacing"}, stageNames...)
	var per [][]time.Duration
	var total []time.Duration
	for i, id := range list {
		st, ok := rec.take(id)
		if !ok || sent[i].IsZero() {
			continue
		}
		d, ok := st.durations(sent[i])
		if !ok {
			continue
		}
		per = append(per, append([]time.Duration{sent[i].Sub(sched[i])}, d...))
		total = append(total, lat[i])
	}
	if len(per) == 0 {
		return "    no send could be split into stages"
	}
	order := make([]int, len(per))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(total[b], total[a]) })
	tail := order[:max(len(order)/100, 1)]
	var b strings.Builder
	fmt.Fprintf(&b, "    %d of %d sends split; the slowest 1 %% (%d) are from %.2f ms on\n", len(per), len(list), len(tail), ms(total[tail[len(tail)-1]]))
	fmt.Fprintf(&b, "    %-8s %8s %8s %8s %12s\n", "stage", "p50", "p99", "max", "tail mean")
	for k, name := range names {
		d := make(dist, len(per))
		for i, p := range per {
			d[i] = p[k]
		}
		var r Result
		d.fill(&r)
		var sum time.Duration
		for _, i := range tail {
			sum += per[i][k]
		}
		fmt.Fprintf(&b, "    %-8s %8.2f %8.2f %8.2f %12.2f\n", name, r.P50, r.P99, r.Max, ms(sum/time.Duration(len(tail))))
	}
	return strings.TrimRight(b.String(), "\n")
}
