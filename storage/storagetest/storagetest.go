// Package storagetest is the conformance suite every storage.Store backend
// runs: one call to Run from the backend's tests exercises the whole
// contract of the storage package (atomicity, lease fencing, event dedup,
// fates, tenant isolation, ...) through the public interface.
//
// The suite never sleeps: it drives time through the Now fields of the
// params, starting at a fixed instant, so a backend must take the time of
// every decision from those fields.
package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// RunCorrelated runs the correlated lane's part of the suite (the tests
// named Correlated...): a backend with a second way to keep that contract
// runs it with each.
func RunCorrelated(t *testing.T, newStore func(t *testing.T) storage.Store) {
	run(t, newStore, func(name string) bool { return strings.HasPrefix(name, "Correlated") })
}

// Run runs the conformance suite. newStore is called once per subtest and
// must return a ready store, empty or not (every subtest works in tenants
// of its own), and arrange for it to be closed with t.Cleanup. Subtests run
// in parallel.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	run(t, newStore, func(string) bool { return true })
}

func run(t *testing.T, newStore func(t *testing.T) storage.Store, only func(name string) bool) {
	tests := []struct {
		name string
		fn   func(b *bundle)
	}{
		{"InstanceCreateGet", testInstanceCreateGet},
		{"InstanceList", testInstanceList},
		{"Attributes", testAttributes},
		{"InstanceTerminate", testInstanceTerminate},
		{"HistoryPaging", testHistoryPaging},
		{"HistoryAcrossTurns", testHistoryAcrossTurns},
		{"TurnClaimOrderAndLimits", testTurnClaimOrderAndLimits},
		{"TurnCommitAtomic", testTurnCommitAtomic},
		{"TurnCommitTerminalDropsEvents", testTurnCommitTerminalDropsEvents},
		{"TurnCommitFates", testTurnCommitFates},
		{"TurnCommitScopedToInstance", testTurnCommitScopedToInstance},
		{"LeaseFencing", testLeaseFencing},
		{"LeaseExpiredNotTakenOver", testLeaseExpiredNotTakenOver},
		{"CommitWrongExecution", testCommitWrongExecution},
		{"TurnEndDeletesTasks", testTurnEndDeletesTasks},
		{"TurnAbandon", testTurnAbandon},
		{"Timers", testTimers},
		{"Activities", testActivities},
		{"ActivityCancel", testActivityCancel},
		{"ContinueAsNew", testContinueAsNew},
		{"CompletionAfterContinueAsNew", testCompletionAfterContinueAsNew},
		{"EventRaiseDedup", testEventRaiseDedup},
		{"EventRaiseTerminal", testEventRaiseTerminal},
		{"EventRaiseBeforeCreate", testEventRaiseBeforeCreate},
		{"ClaimSeesCommittedMessages", testClaimSeesCommittedMessages},
		{"EventRaiseStartIfAbsent", testEventRaiseStartIfAbsent},
		{"EventRaiseLatest", testEventRaiseLatest},
		{"EventRaiseHandOff", testEventRaiseHandOff},
		{"EventRaiseHandOffMessages", testEventRaiseHandOffMessages},
		{"EventRaiseDefinitionCheck", testEventRaiseDefinitionCheck},
		{"EventRaiseDefinitionCheckConcurrent", testEventRaiseDefinitionCheckConcurrent},
		{"EventExpire", testEventExpire},
		{"EventExpireLimitAndTenants", testEventExpireLimitAndTenants},
		{"EventDefinitions", testEventDefinitions},
		{"EventDefinitionTenants", testEventDefinitionTenants},
		{"TenantIsolation", testTenantIsolation},
		{"Subscribe", testSubscribe},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ConcurrentRaises", testConcurrentRaises},
		{"CorrelatedCRUD", testCorrelatedCRUD},
		{"CorrelatedSearch", testCorrelatedSearch},
		{"CorrelatedPutThenWait", testCorrelatedPutThenWait},
		{"CorrelatedWaitThenPut", testCorrelatedWaitThenPut},
		{"CorrelatedDeleteAfterFirst", testCorrelatedDeleteAfterFirst},
		{"CorrelatedCancel", testCorrelatedCancel},
		{"CorrelatedMarkersEnd", testCorrelatedMarkersEnd},
		{"CorrelatedExpire", testCorrelatedExpire},
		{"CorrelatedTenants", testCorrelatedTenants},
		{"CorrelatedConcurrentDeleteAfterFirst", testCorrelatedConcurrentDeleteAfterFirst},
		{"CorrelatedWithdrawnDelivery", testCorrelatedWithdrawnDelivery},
		{"CorrelatedReturned", testCorrelatedReturned},
		{"CorrelatedHandOnDeletedDefinition", testCorrelatedHandOnDeletedDefinition},
		{"LeaderElection", testLeaderElection},
		{"TextBoundaries", testTextBoundaries},
		{"InstanceTerminateFailure", testInstanceTerminateFailure},
		{"SearchBookmarkInvalid", testSearchBookmarkInvalid},
		{"TenantRegistry", testTenantRegistry},
		{"TenantsReady", testTenantsReady},
		{"NextWakeAllTenants", testNextWakeAllTenants},
		{"SubscribeAll", testSubscribeAll},
		{"InstanceListPaging", testInstanceListPaging},
		{"Blocked", testBlocked},
		{"TraceParent", testTraceParent},
		{"CorrelatedTraceParent", testCorrelatedTraceParent},
		{"BusTraceParent", testBusTraceParent},
		{"TurnSends", testTurnSends},
	}
	tests = append(tests, busTests...)
	tests = append(tests, keyTests...)
	tests = append(tests, childTests...)
	tests = append(tests, paramTests...)
	for _, tc := range tests {
		if !only(tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			tc.fn(&bundle{t: t, s: s, ctx: context.Background(), tenant: "t-" + tc.name})
		})
	}
}

// t0 is the suite's start of time.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// lease is the lease every claim of the suite takes.
const lease = time.Minute

// at returns t0+d.
func at(d time.Duration) time.Time { return t0.Add(d) }

type bundle struct {
	t      *testing.T
	s      storage.Store
	ctx    context.Context
	tenant string
}

// in returns a bundle for another tenant on the same store.
func (b *bundle) in(tenant string) *bundle {
	c := *b
	c.tenant = tenant
	return &c
}

func (b *bundle) create(id string, now time.Time) *storage.Instance {
	b.t.Helper()
	inst, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{
		Tenant: b.tenant, ID: id, Workflow: "wf", Input: json.RawMessage(`{"id":"` + id + `"}`), Now: now,
	})
	if err != nil {
		b.t.Fatalf("InstanceCreate(%s): %v", id, err)
	}
	return inst
}

// createCompleted creates instance id and commits its first turn as
// completed, at now.
func (b *bundle) createCompleted(id string, now time.Time) {
	b.t.Helper()
	b.create(id, now)
	p := b.commitParams(b.claimOne(id, now), now)
	p.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, now)}
	p.Status = heraldtype.StatusCompleted
	b.commit(p)
}

func (b *bundle) get(id string) *storage.Instance {
	b.t.Helper()
	inst, err := b.s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant, ID: id})
	if err != nil {
		b.t.Fatalf("InstanceGet(%s): %v", id, err)
	}
	return inst
}

func (b *bundle) claimN(now time.Time, max int) []*storage.Turn {
	b.t.Helper()
	turns, err := b.s.TurnClaim(b.ctx, &storage.TurnClaimParams{Tenant: b.tenant, Now: now, Lease: lease, Max: max})
	if err != nil {
		b.t.Fatalf("TurnClaim: %v", err)
	}
	return turns
}

// claimOne claims and requires exactly one turn, for instance id.
func (b *bundle) claimOne(id string, now time.Time) *storage.Turn {
	b.t.Helper()
	turns := b.claimN(now, 10)
	if len(turns) != 1 || turns[0].Instance.ID != id {
		b.t.Fatalf("TurnClaim at %v: got %s, want one turn of %s", now.Sub(t0), turnIDs(turns), id)
	}
	turn := turns[0]
	if turn.LockToken == "" {
		b.t.Fatalf("TurnClaim: empty lock token")
	}
	if !turn.LeaseUntil.Equal(now.Add(lease)) {
		b.t.Fatalf("TurnClaim: LeaseUntil %v, want %v", turn.LeaseUntil, now.Add(lease))
	}
	return turn
}

func (b *bundle) claimNone(now time.Time) {
	b.t.Helper()
	if turns := b.claimN(now, 10); len(turns) != 0 {
		b.t.Fatalf("TurnClaim at %v: got %s, want none", now.Sub(t0), turnIDs(turns))
	}
}

// commitParams returns the params of a commit of turn that consumes all its
// messages and changes nothing else.
func (b *bundle) commitParams(turn *storage.Turn, now time.Time) *storage.TurnCommitParams {
	ids := make([]int64, len(turn.Messages))
	for i, m := range turn.Messages {
		ids[i] = m.ID
	}
	return &storage.TurnCommitParams{
		Tenant:           b.tenant,
		InstanceID:       turn.Instance.ID,
		LockToken:        turn.LockToken,
		Execution:        turn.Instance.Execution,
		Now:              now,
		ConsumedMessages: ids,
		Status:           heraldtype.StatusRunning,
	}
}

func (b *bundle) commit(p *storage.TurnCommitParams) {
	b.t.Helper()
	if _, err := b.s.TurnCommit(b.ctx, p); err != nil {
		b.t.Fatalf("TurnCommit(%s): %v", p.InstanceID, err)
	}
}

func (b *bundle) raise(id, eventID, name string, now time.Time) *storage.EventRaiseResult {
	b.t.Helper()
	res, err := b.s.EventRaise(b.ctx, b.raiseParams(id, eventID, name, now))
	if err != nil {
		b.t.Fatalf("EventRaise(%s, %s): %v", id, eventID, err)
	}
	return res
}

func (b *bundle) raiseParams(id, eventID, name string, now time.Time) *storage.EventRaiseParams {
	return &storage.EventRaiseParams{
		Tenant: b.tenant, InstanceID: id, EventID: eventID, Lane: history.LanePositional, Name: name,
		Payload: json.RawMessage(`{"event":"` + eventID + `"}`), Now: now,
	}
}

func (b *bundle) history(id string, execution int) []history.Event {
	b.t.Helper()
	evs, err := b.s.HistoryList(b.ctx, &storage.HistoryListParams{Tenant: b.tenant, InstanceID: id, Execution: execution})
	if err != nil {
		b.t.Fatalf("HistoryList(%s, %d): %v", id, execution, err)
	}
	return evs
}

func (b *bundle) event(eventID string) *heraldtype.EventRecord {
	b.t.Helper()
	e, err := b.s.EventGet(b.ctx, &storage.EventGetParams{Tenant: b.tenant, EventID: eventID})
	if err != nil {
		b.t.Fatalf("EventGet(%s): %v", eventID, err)
	}
	return e
}

func (b *bundle) events(id string) []*heraldtype.EventRecord {
	b.t.Helper()
	evs, err := b.s.EventList(b.ctx, &storage.EventListParams{Tenant: b.tenant, InstanceID: id})
	if err != nil {
		b.t.Fatalf("EventList(%s): %v", id, err)
	}
	return evs
}

func (b *bundle) claimActivities(now time.Time, max int) []*storage.ActivityTask {
	b.t.Helper()
	tasks, err := b.s.ActivityClaim(b.ctx, &storage.ActivityClaimParams{Tenant: b.tenant, Now: now, Lease: lease, Max: max})
	if err != nil {
		b.t.Fatalf("ActivityClaim: %v", err)
	}
	return tasks
}

func (b *bundle) nextWake(now time.Time) (time.Time, bool) {
	b.t.Helper()
	at, ok, err := b.s.NextWake(b.ctx, &storage.NextWakeParams{Tenant: b.tenant, Now: now})
	if err != nil {
		b.t.Fatalf("NextWake: %v", err)
	}
	return at, ok
}

func (b *bundle) wantNextWake(now, want time.Time) {
	b.t.Helper()
	got, ok := b.nextWake(now)
	if !ok || !got.Equal(want) {
		b.t.Fatalf("NextWake(%v) = %v, %v; want %v", now.Sub(t0), got.Sub(t0), ok, want.Sub(t0))
	}
}

func (b *bundle) wantNoWake(now time.Time) {
	b.t.Helper()
	if got, ok := b.nextWake(now); ok {
		b.t.Fatalf("NextWake(%v) = %v; want none", now.Sub(t0), got.Sub(t0))
	}
}

// ---- assertions ----

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func wantEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func wantJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	if string(got) != want {
		t.Fatalf("%s = %s, want %s", what, got, want)
	}
}

func wantKinds(t *testing.T, what string, evs []history.Event, want ...history.Kind) {
	t.Helper()
	got := make([]history.Kind, len(evs))
	for i, ev := range evs {
		got[i] = ev.Kind
		if i > 0 && ev.Seq != evs[i-1].Seq+1 {
			t.Fatalf("%s: event %d has seq %d after seq %d", what, i, ev.Seq, evs[i-1].Seq)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: kinds %v, want %v", what, got, want)
	}
}

// msgKinds describes messages as kind[:event id or task seq].
func msgKinds(ms []storage.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		switch {
		case m.EventID != "":
			out[i] = fmt.Sprintf("%s:%s", m.Kind, m.EventID)
		case m.TaskSeq != 0:
			out[i] = fmt.Sprintf("%s:%d", m.Kind, m.TaskSeq)
		default:
			out[i] = string(m.Kind)
		}
	}
	return out
}

func wantMessages(t *testing.T, what string, ms []storage.Message, want ...string) {
	t.Helper()
	got := msgKinds(ms)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: messages %v, want %v", what, got, want)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].ID <= ms[i-1].ID {
			t.Fatalf("%s: message ids not increasing: %d then %d", what, ms[i-1].ID, ms[i].ID)
		}
	}
}

func turnIDs(turns []*storage.Turn) []string {
	ids := make([]string, len(turns))
	for i, turn := range turns {
		ids[i] = turn.Instance.ID
	}
	return ids
}

func taskSeqs(tasks []*storage.ActivityTask) []int {
	seqs := make([]int, len(tasks))
	for i, task := range tasks {
		seqs[i] = task.TaskSeq
	}
	return seqs
}

// ev builds a history event.
func ev(seq int, kind history.Kind, now time.Time) history.Event {
	return history.Event{Seq: seq, Kind: kind, Time: now}
}

// errOf returns the error of a call that also returns a value.
func errOf[T any](_ T, err error) error { return err }
