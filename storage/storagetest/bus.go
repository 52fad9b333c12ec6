package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The event bus's part of the suite (storage.BusStore, WorkBus,
// TurnCommitParams.Publish): one subtest per rule of the methods' doc
// comments. Every test is named Bus...; RunBus runs them alone.

// RunBus runs the event bus's part of the suite (the tests named Bus...).
func RunBus(t *testing.T, newStore func(t *testing.T) storage.Store) {
	run(t, newStore, func(name string) bool { return strings.HasPrefix(name, "Bus") })
}

// busTests are the bus's subtests, run by Run and RunBus.
var busTests = []struct {
	name string
	fn   func(b *bundle)
}{
	{"BusPublishDedup", testBusPublishDedup},
	{"BusRoute", testBusRoute},
	{"BusRouteRefusals", testBusRouteRefusals},
	{"BusRouteConcurrent", testBusRouteConcurrent},
	{"BusFairQueueing", testBusFairQueueing},
	{"BusFairQueueingNumbers", testBusFairQueueingNumbers},
	{"BusClaim", testBusClaim},
	{"BusClaimTakeover", testBusClaimTakeover},
	{"BusClaimNotStarted", testBusClaimNotStarted},
	{"BusTakeoverDeadLetter", testBusTakeoverDeadLetter},
	{"BusClaimConcurrent", testBusClaimConcurrent},
	{"BusFinish", testBusFinish},
	{"BusFinishLeaseLost", testBusFinishLeaseLost},
	{"BusFinishReleased", testBusFinishReleased},
	{"BusFinishReleasedStarted", testBusFinishReleasedStarted},
	{"BusFinishRefusals", testBusFinishRefusals},
	{"BusHeartbeat", testBusHeartbeat},
	{"BusSubscriptions", testBusSubscriptions},
	{"BusSubscriptionDeleteKeepsExecutions", testBusSubscriptionDeleteKeepsExecutions},
	{"BusSubscriptionVersions", testBusSubscriptionVersions},
	{"BusScripts", testBusScripts},
	{"BusDeadLetterList", testBusDeadLetterList},
	{"BusDeadLetterReprocess", testBusDeadLetterReprocess},
	{"BusDeadLetterReprocessConcurrent", testBusDeadLetterReprocessConcurrent},
	{"BusDeadLetterDelete", testBusDeadLetterDelete},
	{"BusEventGet", testBusEventGet},
	{"BusAttemptList", testBusAttemptList},
	{"BusPrune", testBusPrune},
	{"BusBacklog", testBusBacklog},
	{"BusTenantsReady", testBusTenantsReady},
	{"BusNextWake", testBusNextWake},
	{"BusNextWakeAllTenants", testBusNextWakeAllTenants},
	{"BusTurnCommitPublish", testBusTurnCommitPublish},
	{"BusWakeups", testBusWakeups},
	{"BusTenantIsolation", testBusTenantIsolation},
	{"BusBadInput", testBusBadInput},
	{"BusTextBoundaries", testBusTextBoundaries},
}

// ---- helpers ----

// busData is the data of the bus events the tests publish, made from id.
func busData(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"id": id})
	return b
}

func (b *bundle) busPublishParams(id, typ string, now time.Time) *storage.BusPublishParams {
	return &storage.BusPublishParams{Tenant: b.tenant, Now: now,
		Event: storage.BusPublishEvent{ID: id, Type: typ, Data: busData(id), Source: "client"}}
}

func (b *bundle) busPublish(id, typ string, now time.Time) *storage.BusPublished {
	b.t.Helper()
	res, err := b.s.BusPublish(b.ctx, b.busPublishParams(id, typ, now))
	if err != nil {
		b.t.Fatalf("BusPublish(%s, %s): %v", id, typ, err)
	}
	return res
}

// router is a Route callback.
type router = func(ev *storage.BusEvent) []storage.BusRouteDecision

// matchAll routes every event to subs (all matched).
func matchAll(subs ...string) router {
	return func(*storage.BusEvent) []storage.BusRouteDecision {
		var ds []storage.BusRouteDecision
		for _, s := range subs {
			ds = append(ds, storage.BusRouteDecision{Subscription: s, Matched: true})
		}
		return ds
	}
}

// byType routes an event to the subscriptions listed for its type (all
// matched).
func byType(m map[string][]string) router {
	return func(ev *storage.BusEvent) []storage.BusRouteDecision {
		return matchAll(m[ev.Type]...)(ev)
	}
}

func (b *bundle) busRoute(now time.Time, max int, fn router) int {
	b.t.Helper()
	n, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Max: max, Now: now, Route: fn})
	if err != nil {
		b.t.Fatalf("BusRoute: %v", err)
	}
	return n
}

// busPublishRouted publishes events id (type typ) at now and routes them to
// subs at now.
func (b *bundle) busPublishRouted(now time.Time, typ string, subs []string, ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		b.busPublish(id, typ, now)
	}
	if n := b.busRoute(now, len(ids), matchAll(subs...)); n != len(ids) {
		b.t.Fatalf("BusRoute routed %d events, want %d", n, len(ids))
	}
}

func (b *bundle) busClaimP(now time.Time, max int, lease time.Duration) []*storage.BusClaimed {
	b.t.Helper()
	cs, err := b.s.BusClaim(b.ctx, &storage.BusClaimParams{Tenant: b.tenant, Max: max, Now: now, Lease: lease})
	if err != nil {
		b.t.Fatalf("BusClaim: %v", err)
	}
	return cs
}

func (b *bundle) busClaim(now time.Time, max int) []*storage.BusClaimed {
	b.t.Helper()
	return b.busClaimP(now, max, lease)
}

// busClaimOne claims exactly one execution, that of (eventID, sub).
func (b *bundle) busClaimOne(now time.Time, eventID, sub string) *storage.BusClaimed {
	b.t.Helper()
	cs := b.busClaim(now, 1)
	if len(cs) != 1 || cs[0].Event.ID != eventID || cs[0].Execution.Subscription != sub {
		b.t.Fatalf("BusClaim at %v: %v, want %s/%s", now.Sub(t0), claimedIDs(cs), eventID, sub)
	}
	return cs[0]
}

// busStart starts the claimed attempt of c, its lease moved to until.
func (b *bundle) busStart(c *storage.BusClaimed, until time.Time) {
	b.t.Helper()
	if err := b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: c.Execution.ID,
		LockToken: c.LockToken, LeaseUntil: until, Start: true}); err != nil {
		b.t.Fatalf("BusHeartbeat (Start) of %s/%s: %v", c.Event.ID, c.Execution.Subscription, err)
	}
}

func (b *bundle) busClaimNone(now time.Time) {
	b.t.Helper()
	if cs := b.busClaim(now, 100); len(cs) != 0 {
		b.t.Fatalf("BusClaim at %v: %v, want none", now.Sub(t0), claimedIDs(cs))
	}
}

// claimOrder claims one execution at a time at now until none is left and
// returns them as event/subscription.
func (b *bundle) claimOrder(now time.Time) []string {
	b.t.Helper()
	var out []string
	for {
		cs := b.busClaim(now, 1)
		if len(cs) == 0 {
			return out
		}
		if len(cs) > 1 {
			b.t.Fatalf("BusClaim with Max 1 returned %d executions", len(cs))
		}
		out = append(out, claimedIDs(cs)...)
	}
}

func claimedIDs(cs []*storage.BusClaimed) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Event.ID+"/"+c.Execution.Subscription)
	}
	return out
}

// outcome is a BusResult for a claimed execution.
func outcome(c *storage.BusClaimed, o storage.BusOutcome, now time.Time) storage.BusResult {
	r := storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: o,
		Attempt: heraldtype.Attempt{Number: c.Execution.Attempts, StartedAt: now, Duration: heraldtype.Duration(time.Second)}}
	switch o {
	case storage.BusSucceeded:
		r.Attempt.Succeeded = true
		r.Attempt.Result = json.RawMessage(`"ok"`)
	case storage.BusRetry:
		r.Attempt.ErrorKind, r.Attempt.Error = heraldtype.ErrorRuntime, "try again"
		r.RetryAt = now
	case storage.BusDeadLetter:
		r.Attempt.ErrorKind, r.Attempt.Error = heraldtype.ErrorPermanent, "gave up"
		r.DeadLetter = &heraldtype.DeadLetter{Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"},
			ErrorKind: heraldtype.ErrorPermanent, Error: "gave up", FailedAt: now}
	}
	return r
}

func (b *bundle) busFinish(now time.Time, rs ...storage.BusResult) []error {
	b.t.Helper()
	errs, err := b.s.BusFinish(b.ctx, &storage.BusFinishParams{Tenant: b.tenant, Results: rs, Now: now})
	if err != nil {
		b.t.Fatalf("BusFinish: %v", err)
	}
	if len(errs) != len(rs) {
		b.t.Fatalf("BusFinish returned %d errors for %d results", len(errs), len(rs))
	}
	return errs
}

// busFinishOK finishes every result and requires each to succeed.
func (b *bundle) busFinishOK(now time.Time, rs ...storage.BusResult) {
	b.t.Helper()
	for i, err := range b.busFinish(now, rs...) {
		if err != nil {
			b.t.Fatalf("BusFinish result %d (execution %d): %v", i, rs[i].Execution, err)
		}
	}
}

func (b *bundle) busEvent(id string) *heraldtype.PublishedEvent {
	b.t.Helper()
	ev, err := b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant, ID: id})
	if err != nil {
		b.t.Fatalf("BusEventGet(%s): %v", id, err)
	}
	return ev
}

// busRoutes returns an event's routes by subscription.
func (b *bundle) busRoutes(id string) map[string]*heraldtype.Route {
	b.t.Helper()
	m := map[string]*heraldtype.Route{}
	for _, r := range b.busEvent(id).Routes {
		if _, dup := m[r.Subscription]; dup {
			b.t.Fatalf("event %s: two routes to %s", id, r.Subscription)
		}
		m[r.Subscription] = r
	}
	return m
}

// busExec returns the execution of (eventID, sub), read with BusEventGet.
func (b *bundle) busExec(eventID, sub string) *heraldtype.Execution {
	b.t.Helper()
	r := b.busRoutes(eventID)[sub]
	if r == nil || r.Execution == nil {
		b.t.Fatalf("event %s has no execution for %s (route %+v)", eventID, sub, r)
	}
	return r.Execution
}

func (b *bundle) busBacklog(limit int) int {
	b.t.Helper()
	n, err := b.s.BusBacklog(b.ctx, &storage.BusBacklogParams{Tenant: b.tenant, Limit: limit})
	if err != nil {
		b.t.Fatalf("BusBacklog: %v", err)
	}
	return n
}

func (b *bundle) attempts(p storage.BusAttemptListParams) ([]*heraldtype.Attempt, int64) {
	b.t.Helper()
	p.Tenant = b.tenant
	as, next, err := b.s.BusAttemptList(b.ctx, &p)
	if err != nil {
		b.t.Fatalf("BusAttemptList(%+v): %v", p, err)
	}
	return as, next
}

func (b *bundle) deadLetter(id int64) *heraldtype.DeadLetter {
	b.t.Helper()
	dl, err := b.s.BusDeadLetterGet(b.ctx, &storage.BusDeadLetterGetParams{Tenant: b.tenant, ID: id})
	if err != nil {
		b.t.Fatalf("BusDeadLetterGet(%d): %v", id, err)
	}
	return dl
}

func (b *bundle) deadLetters(f storage.BusDeadLetterFilter, limit int, before int64) ([]*heraldtype.DeadLetter, int64) {
	b.t.Helper()
	dls, next, err := b.s.BusDeadLetterList(b.ctx, &storage.BusDeadLetterListParams{Tenant: b.tenant, Filter: f,
		Limit: limit, Before: before})
	if err != nil {
		b.t.Fatalf("BusDeadLetterList: %v", err)
	}
	return dls, next
}

func (b *bundle) reprocess(f storage.BusDeadLetterFilter, limit int, now time.Time) int {
	b.t.Helper()
	n, err := b.s.BusDeadLetterReprocess(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant, Filter: f, Limit: limit, Now: now})
	if err != nil {
		b.t.Fatalf("BusDeadLetterReprocess: %v", err)
	}
	return n
}

func (b *bundle) putSub(sub heraldtype.Subscription, now time.Time) *heraldtype.Subscription {
	b.t.Helper()
	got, err := b.s.BusSubscriptionPut(b.ctx, &storage.BusSubscriptionPutParams{Tenant: b.tenant, Subscription: sub, Now: now})
	if err != nil {
		b.t.Fatalf("BusSubscriptionPut(%s): %v", sub.ID, err)
	}
	return got
}

func (b *bundle) subGeneration() int64 {
	b.t.Helper()
	g, err := b.s.BusSubscriptionGeneration(b.ctx, &storage.BusTenantParams{Tenant: b.tenant})
	if err != nil {
		b.t.Fatalf("BusSubscriptionGeneration: %v", err)
	}
	return g
}

func (b *bundle) subIDs() ([]string, int64) {
	b.t.Helper()
	subs, gen, err := b.s.BusSubscriptionList(b.ctx, &storage.BusTenantParams{Tenant: b.tenant})
	if err != nil {
		b.t.Fatalf("BusSubscriptionList: %v", err)
	}
	ids := []string{}
	for _, s := range subs {
		ids = append(ids, s.ID)
	}
	return ids, gen
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

func attemptIDs(as []*heraldtype.Attempt) []int64 {
	out := []int64{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func letterIDs(dls []*heraldtype.DeadLetter) []int64 {
	out := []int64{}
	for _, d := range dls {
		out = append(out, d.ID)
	}
	return out
}

func wantIDs(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if want == nil {
		want = []int64{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// ---- publish and route ----

// testBusPublishDedup: an event is stored once per (tenant, id); the same
// id with the same type is a duplicate (the first receipt), with another
// type a conflict; neither writes anything.
func testBusPublishDedup(b *bundle) {
	t := b.t
	res := b.busPublish("e1", "user.created", t0)
	wantEqual(t, "Duplicate", res.Duplicate, false)
	wantTime(t, "PublishedAt", res.PublishedAt, t0)

	// Same id and type, other data and source: a duplicate, nothing changes.
	p := b.busPublishParams("e1", "user.created", at(time.Second))
	p.Event.Data, p.Event.Source = json.RawMessage(`{"other":true}`), "workflow:w"
	res, err := b.s.BusPublish(b.ctx, p)
	if err != nil {
		t.Fatalf("BusPublish again: %v", err)
	}
	wantEqual(t, "Duplicate of a republish", res.Duplicate, true)
	wantTime(t, "PublishedAt of a republish", res.PublishedAt, t0)

	_, err = b.s.BusPublish(b.ctx, b.busPublishParams("e1", "user.deleted", at(2*time.Second)))
	wantErr(t, "BusPublish with the id of another type", err, heraldtype.ErrEventIDConflict)

	ev := b.busEvent("e1")
	wantEqual(t, "ID", ev.ID, "e1")
	wantEqual(t, "Type", ev.Type, "user.created")
	wantJSON(t, "Data", ev.Data, string(busData("e1")))
	wantEqual(t, "Source", ev.Source, "client")
	wantTime(t, "PublishedAt", ev.PublishedAt, t0)
	wantTime(t, "RoutedAt of an unrouted event", ev.RoutedAt, time.Time{})
	wantEqual(t, "Fate (the engine derives it)", ev.Fate, heraldtype.BusFate(""))
	wantEqual(t, "Routes of an unrouted event", len(ev.Routes), 0)
	wantEqual(t, "backlog", b.busBacklog(0), 1)

	// The same id in another tenant is another event, whatever its type.
	other := b.in(b.tenant + "-other")
	if res := other.busPublish("e1", "user.deleted", at(3*time.Second)); res.Duplicate {
		t.Fatal("another tenant's event id made a duplicate")
	}
	wantEqual(t, "type in the other tenant", other.busEvent("e1").Type, "user.deleted")
	wantEqual(t, "type here", b.busEvent("e1").Type, "user.created")

	_, err = b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant, ID: "nope"})
	wantErr(t, "BusEventGet of an unknown id", err, heraldtype.ErrNotFound)

	// Seq follows publish order; the route callback sees every field.
	b.busPublish("e2", "user.created", at(4*time.Second))
	var seen []*storage.BusEvent
	b.busRoute(at(5*time.Second), 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		seen = append(seen, ev)
		return nil
	})
	if len(seen) != 2 || seen[0].ID != "e1" || seen[1].ID != "e2" {
		t.Fatalf("Route saw %d events, want e1 then e2", len(seen))
	}
	if seen[0].Seq >= seen[1].Seq {
		t.Fatalf("Seq %d then %d: not increasing in publish order", seen[0].Seq, seen[1].Seq)
	}
	wantTime(t, "routed event's PublishedAt", seen[0].PublishedAt, t0)
	wantEqual(t, "routed event's Source", seen[0].Source, "client")
	wantJSON(t, "routed event's Data", seen[0].Data, string(busData("e1")))
	// A routed event is still deduplicated.
	res = b.busPublish("e1", "user.created", at(6*time.Second))
	wantEqual(t, "Duplicate after routing", res.Duplicate, true)
	_, err = b.s.BusPublish(b.ctx, b.busPublishParams("e1", "x", at(6*time.Second)))
	wantErr(t, "conflict after routing", err, heraldtype.ErrEventIDConflict)
	wantEqual(t, "backlog after routing", b.busBacklog(0), 0)
}

// testBusRoute: BusRoute takes the oldest unrouted events, up to Max, asks
// Route once per event in publish order, and stores every decision: a
// matched one queues an execution due at Now, a filtered one says which
// condition, no decision at all is no_match.
func testBusRoute(b *bundle) {
	t := b.t
	for i, id := range []string{"e1", "e2", "e3", "e4", "e5"} {
		b.busPublish(id, "order.placed", at(time.Duration(i)*time.Second))
	}
	decide := map[string][]storage.BusRouteDecision{
		"e1": {{Subscription: "s1", Matched: true}, {Subscription: "s2", FilteredBy: "data.total > 100"}},
		"e2": nil,
		"e3": {{Subscription: "s1", FilteredBy: "data.a"}, {Subscription: "s2", FilteredBy: "data.b"}},
		"e4": {{Subscription: "s2", Matched: true}, {Subscription: "s1", Matched: true}},
		"e5": {{Subscription: "s1", Matched: true}},
	}
	var order []string
	route := func(ev *storage.BusEvent) []storage.BusRouteDecision {
		order = append(order, ev.ID)
		return decide[ev.ID]
	}
	now := at(10 * time.Second)
	n, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Max: 2, Now: now, Route: route})
	if err != nil {
		t.Fatalf("BusRoute: %v", err)
	}
	wantEqual(t, "routed", n, 2)
	wantStrings(t, "Route calls with Max 2", order, "e1", "e2")

	e1 := b.busEvent("e1")
	wantTime(t, "e1 RoutedAt", e1.RoutedAt, now)
	rs := b.busRoutes("e1")
	if len(rs) != 2 || rs["s1"] == nil || rs["s2"] == nil {
		t.Fatalf("e1 routes: %+v, want s1 and s2", e1.Routes)
	}
	wantEqual(t, "s1 Matched", rs["s1"].Matched, true)
	x := rs["s1"].Execution
	if x == nil {
		t.Fatal("matched route without execution")
	}
	if x.ID == 0 {
		t.Fatal("execution without id")
	}
	wantEqual(t, "execution EventID", x.EventID, "e1")
	wantEqual(t, "execution Subscription", x.Subscription, "s1")
	wantEqual(t, "execution Status", x.Status, heraldtype.ExecQueued)
	wantEqual(t, "execution Attempts", x.Attempts, 0)
	wantTime(t, "execution NextAttemptAt", x.NextAttemptAt, now)
	wantTime(t, "execution CreatedAt", x.CreatedAt, now)
	wantTime(t, "execution UpdatedAt", x.UpdatedAt, now)
	wantEqual(t, "s2 Matched", rs["s2"].Matched, false)
	wantEqual(t, "s2 FilteredBy", rs["s2"].FilteredBy, "data.total > 100")
	if rs["s2"].Execution != nil {
		t.Fatalf("filtered route with an execution: %+v", rs["s2"].Execution)
	}
	e2 := b.busEvent("e2")
	wantTime(t, "e2 (no match) RoutedAt", e2.RoutedAt, now)
	wantEqual(t, "e2 routes", len(e2.Routes), 0)
	wantTime(t, "e3 RoutedAt before its route", b.busEvent("e3").RoutedAt, time.Time{})
	wantEqual(t, "backlog: 3 unrouted + 1 execution", b.busBacklog(0), 4)

	// The rest (Max 0: the default).
	order = nil
	later := at(20 * time.Second)
	wantEqual(t, "routed", b.busRoute(later, 0, route), 3)
	wantStrings(t, "Route calls", order, "e3", "e4", "e5")
	rs = b.busRoutes("e3")
	if len(rs) != 2 || rs["s1"].Matched || rs["s2"].Matched || rs["s1"].Execution != nil || rs["s2"].Execution != nil {
		t.Fatalf("e3 routes: %+v, want both filtered", b.busEvent("e3").Routes)
	}
	wantEqual(t, "e3 s1 FilteredBy", rs["s1"].FilteredBy, "data.a")
	e4s1, e4s2 := b.busExec("e4", "s1"), b.busExec("e4", "s2")
	if e4s1.ID == e4s2.ID || e4s1.ID == x.ID {
		t.Fatalf("execution ids not distinct: %d, %d, %d", x.ID, e4s1.ID, e4s2.ID)
	}
	wantTime(t, "e4 s2 NextAttemptAt", e4s2.NextAttemptAt, later)
	wantEqual(t, "backlog: 4 executions", b.busBacklog(0), 4)

	// Nothing left: Route is not called.
	order = nil
	wantEqual(t, "routed with nothing waiting", b.busRoute(at(30*time.Second), 0, route), 0)
	wantStrings(t, "Route calls with nothing waiting", order)

	// The queued executions are claimable.
	cs := b.busClaim(at(30*time.Second), 10)
	wantEqual(t, "claimed", len(cs), 4)
}

// testBusRouteRefusals: a decision naming a subscription twice, or one
// whose id breaks the text rules, fails the call, which writes nothing; so
// do a nil Route and a negative Max.
func testBusRouteRefusals(b *bundle) {
	t := b.t
	b.busPublish("e1", "a", t0)
	b.busPublish("e2", "a", t0)
	calls := 0
	for _, bad := range [][]storage.BusRouteDecision{
		{{Subscription: "s1", Matched: true}, {Subscription: "s1", Matched: true}},
		{{Subscription: "s1", Matched: true}, {Subscription: "s1", FilteredBy: "x"}},
		{{Subscription: "", Matched: true}},
		{{Subscription: "s\x00", Matched: true}},
		{{Subscription: "\xff", Matched: true}},
		{{Subscription: strings.Repeat("s", storage.MaxIDBytes+1), Matched: true}},
	} {
		_, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Now: at(time.Second),
			Route: func(ev *storage.BusEvent) []storage.BusRouteDecision {
				calls++
				if ev.ID == "e2" {
					return bad
				}
				return matchAll("ok")(ev)
			}})
		wantErr(t, fmt.Sprintf("BusRoute with decisions %+v", bad), err, heraldtype.ErrInvalidArgument)
		// e1's good decisions were not written either.
		if ev := b.busEvent("e1"); !ev.RoutedAt.IsZero() || len(ev.Routes) != 0 {
			t.Fatalf("a refused route wrote e1: %+v", ev)
		}
		wantEqual(t, "backlog after a refused route", b.busBacklog(0), 2)
		b.busClaimNone(at(time.Hour))
	}
	if calls == 0 {
		t.Fatal("Route was never called")
	}
	_, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Now: at(time.Second)})
	wantErr(t, "BusRoute with a nil Route", err, heraldtype.ErrInvalidArgument)
	_, err = b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Max: -1, Now: at(time.Second), Route: matchAll("s")})
	wantErr(t, "BusRoute with a negative Max", err, heraldtype.ErrInvalidArgument)
	// After the refusals both events route normally.
	wantEqual(t, "routed", b.busRoute(at(2*time.Second), 0, matchAll("s1")), 2)
	wantEqual(t, "claimed", len(b.busClaim(at(2*time.Second), 10)), 2)
}

// testBusRouteConcurrent: concurrent BusRoute calls route every event once:
// Route is called once per event across all of them.
func testBusRouteConcurrent(b *bundle) {
	t := b.t
	const n = 60
	for i := range n {
		b.busPublish(fmt.Sprintf("e%02d", i), "a", t0)
	}
	var (
		mu    sync.Mutex
		calls = map[string]int{}
		total int
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				routed, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Max: 7, Now: at(time.Second),
					Route: func(ev *storage.BusEvent) []storage.BusRouteDecision {
						mu.Lock()
						calls[ev.ID]++
						mu.Unlock()
						return matchAll("s")(ev)
					}})
				if err != nil {
					t.Errorf("BusRoute: %v", err)
					return
				}
				mu.Lock()
				total += routed
				mu.Unlock()
				if routed == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	// A store may skip events another call holds: route what is left.
	for b.busRoute(at(time.Second), 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		calls[ev.ID]++
		total++
		return matchAll("s")(ev)
	}) > 0 {
	}
	wantEqual(t, "events routed", total, n)
	wantEqual(t, "events seen by Route", len(calls), n)
	for id, c := range calls {
		if c != 1 {
			t.Fatalf("Route called %d times for %s", c, id)
		}
	}
	wantEqual(t, "executions claimed", len(b.busClaim(at(time.Minute), 1000)), n)
}

// testBusFairQueueing: a subscription with many queued executions does not
// hold back another's single one.
func testBusFairQueueing(b *bundle) {
	t := b.t
	var bulk []string
	for i := range 50 {
		bulk = append(bulk, fmt.Sprintf("bulk%02d", i))
	}
	b.busPublishRouted(at(1*time.Second), "bulk", []string{"big"}, bulk...)
	b.busPublishRouted(at(2*time.Second), "solo", []string{"small"}, "solo")
	order := b.claimOrder(at(time.Minute))
	wantEqual(t, "claimed", len(order), 51)
	if i := slices.Index(order, "solo/small"); i < 0 || i > 1 {
		t.Fatalf("the single execution of small was claim %d of %v, want one of the first two", i+1, order[:5])
	}
	// big's own executions come in publish order.
	var bigs []string
	for _, o := range order {
		if o != "solo/small" {
			bigs = append(bigs, strings.TrimSuffix(o, "/big"))
		}
	}
	wantStrings(t, "big's executions", bigs, bulk...)

	// The same with three: small's executions interleave with big's.
	c := b.in(b.tenant + "-3")
	bulk = bulk[:20]
	c.busPublishRouted(at(1*time.Second), "bulk", []string{"big"}, bulk...)
	c.busPublishRouted(at(2*time.Second), "solo", []string{"small"}, "s1", "s2", "s3")
	order = c.claimOrder(at(time.Minute))
	for _, id := range []string{"s1", "s2", "s3"} {
		if i := slices.Index(order, id+"/small"); i < 0 || i > 5 {
			t.Fatalf("%s/small was claim %d of %v, want one of the first six", id, i+1, order)
		}
	}
}

// testBusFairQueueingNumbers checks the claim order the fair-queueing
// number gives: max(the subscription's last number + 1, the lowest number
// of the tenant's queued or retrying executions); claims by number, then
// DueAt; a retry and a reprocess get a new number.
func testBusFairQueueingNumbers(b *bundle) {
	t := b.t
	// A: a0..a3 get 0..3; B's first gets max(0, 0) = 0.
	b.busPublishRouted(at(1*time.Second), "a", []string{"A"}, "a0", "a1", "a2", "a3")
	b.busPublishRouted(at(2*time.Second), "b", []string{"B"}, "b0")
	c1 := b.busClaimOne(at(10*time.Second), "a0", "A")
	c2 := b.busClaimOne(at(10*time.Second), "b0", "B")
	b.busFinishOK(at(10*time.Second), outcome(c1, storage.BusSucceeded, at(10*time.Second)),
		outcome(c2, storage.BusSucceeded, at(10*time.Second)))
	// Queued now: a1..a3 (1..3), lowest 1. B's last is 0: b1 gets
	// max(1, 1) = 1, b2 max(2, 1) = 2. C is new: c0 gets max(0, 1) = 1.
	b.busPublishRouted(at(3*time.Second), "b", []string{"B"}, "b1", "b2")
	b.busPublishRouted(at(4*time.Second), "c", []string{"C"}, "c0")
	wantStrings(t, "claim order", b.claimOrder(at(20*time.Second)), "a1/A", "b1/B", "c0/C", "a2/A", "b2/B", "a3/A")

	// Retries and reprocessed dead letters get a new number.
	r := b.in(b.tenant + "-r")
	r.busPublishRouted(at(1*time.Second), "r", []string{"R"}, "r0", "r1", "r2") // 0, 1, 2
	now := at(10 * time.Second)
	x0 := r.busClaimOne(now, "r0", "R")
	r.busFinishOK(now, outcome(x0, storage.BusDeadLetter, now))
	x1 := r.busClaimOne(now, "r1", "R")
	r.busFinishOK(now, outcome(x1, storage.BusRetry, now)) // r1: max(3, 2) = 3
	if n := r.reprocess(storage.BusDeadLetterFilter{}, 0, at(11*time.Second)); n != 1 {
		t.Fatalf("reprocessed %d letters, want 1", n)
	} // r0: max(4, 2) = 4
	wantStrings(t, "claim order after a retry and a reprocess", r.claimOrder(at(20*time.Second)), "r2/R", "r1/R", "r0/R")

	// The number comes before the due time, across queued and retrying
	// executions: A's a0..a2 get 0..2, B's b0 0; b0's retry gets max(1, 1)
	// = 1, due after a2.
	d := b.in(b.tenant + "-d")
	d.busPublishRouted(at(1*time.Second), "a", []string{"A"}, "a0", "a1", "a2")
	d.busPublishRouted(at(1*time.Second), "b", []string{"B"}, "b0")
	cs := d.busClaim(at(2*time.Second), 2)
	if got := claimedIDs(cs); len(got) != 2 || !slices.Contains(got, "a0/A") || !slices.Contains(got, "b0/B") {
		t.Fatalf("claimed %v, want a0/A and b0/B", got)
	}
	for _, c := range cs {
		o := outcome(c, storage.BusSucceeded, at(2*time.Second))
		if c.Event.ID == "b0" {
			o = outcome(c, storage.BusRetry, at(5*time.Second))
		}
		d.busFinishOK(at(2*time.Second), o)
	}
	wantStrings(t, "claim order across queued and retrying", d.claimOrder(at(10*time.Second)), "a1/A", "b0/B", "a2/A")

	// With nothing queued, the current number is the highest given: a
	// subscription whose backlog drained is not held back by another's
	// backlog afterwards. A's a00..a29 get 0..29 and run; then B's ten get
	// 29..38 and A's next 30: it runs third, not after B's ten.
	e := b.in(b.tenant + "-e")
	var as []string
	for i := range 30 {
		as = append(as, fmt.Sprintf("a%02d", i))
	}
	e.busPublishRouted(at(1*time.Second), "a", []string{"A"}, as...)
	for _, c := range e.busClaim(at(2*time.Second), 100) {
		e.busFinishOK(at(2*time.Second), outcome(c, storage.BusSucceeded, at(2*time.Second)))
	}
	var bs []string
	for i := range 10 {
		bs = append(bs, fmt.Sprintf("b%d", i))
	}
	e.busPublishRouted(at(3*time.Second), "b", []string{"B"}, bs...)
	e.busPublishRouted(at(4*time.Second), "a", []string{"A"}, "late")
	order := e.claimOrder(at(10 * time.Second))
	if i := slices.Index(order, "late/A"); i != 2 {
		t.Fatalf("A's execution after its backlog drained was claim %d of %v, want the third", i+1, order)
	}
	// Within one route, with nothing queued (the claims above hold the
	// rest): the first execution queued is the lowest for the next ones.
	// B's last is 38, the highest given: its next gets 39; C is new and
	// gets max(0, 39) = 39 (not the highest given, 38); A gets max(31, 39).
	e.busPublishRouted(at(5*time.Second), "x", []string{"B", "C", "A"}, "x")
	wantStrings(t, "claim order within one route", e.claimOrder(at(10*time.Second)), "x/B", "x/C", "x/A")
}

// ---- claim, finish, heartbeat ----

// testBusClaim: only due executions are claimed, at most Max (default 1);
// a claim leases them with a new token and counts an attempt.
func testBusClaim(b *bundle) {
	t := b.t
	routedAt := at(10 * time.Second)
	p := b.busPublishParams("e1", "order.placed", t0)
	p.Event.Source = "workflow:wf-1"
	if _, err := b.s.BusPublish(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	b.busPublish("e2", "order.placed", t0)
	wantEqual(t, "routed", b.busRoute(routedAt, 0, matchAll("s1", "s2")), 2)

	// Due at the route's Now: not before.
	b.busClaimNone(routedAt.Add(-time.Nanosecond))
	cs := b.busClaim(routedAt, 0) // Max 0: one
	wantEqual(t, "claimed with Max 0", len(cs), 1)
	c := cs[0]
	wantEqual(t, "Status", c.Execution.Status, heraldtype.ExecRunning)
	wantEqual(t, "Attempts", c.Execution.Attempts, 1)
	wantEqual(t, "TakenOver", c.TakenOver, false)
	wantTime(t, "NextAttemptAt of a running execution", c.Execution.NextAttemptAt, time.Time{})
	wantTime(t, "UpdatedAt of a claimed execution", c.Execution.UpdatedAt, routedAt)
	if c.LockToken == "" || c.Execution.ID == 0 {
		t.Fatalf("claimed %+v: no token or id", c)
	}
	wantEqual(t, "Event.ID", c.Event.ID, "e1")
	wantEqual(t, "Execution.EventID", c.Execution.EventID, "e1")
	wantEqual(t, "Event.Type", c.Event.Type, "order.placed")
	wantEqual(t, "Event.Source", c.Event.Source, "workflow:wf-1")
	wantJSON(t, "Event.Data", c.Event.Data, string(busData("e1")))
	wantTime(t, "Event.PublishedAt", c.Event.PublishedAt, t0)
	if c.Event.Seq == 0 {
		t.Fatal("claimed event without Seq")
	}
	wantEqual(t, "the execution read back", b.busExec("e1", c.Execution.Subscription).Status, heraldtype.ExecRunning)
	// Not counted until the attempt starts.
	wantEqual(t, "its attempts read back", b.busExec("e1", c.Execution.Subscription).Attempts, 0)
	b.busStart(c, routedAt.Add(lease))
	wantEqual(t, "its attempts read back once started", b.busExec("e1", c.Execution.Subscription).Attempts, 1)

	cs = b.busClaim(routedAt, 2)
	wantEqual(t, "claimed with Max 2", len(cs), 2)
	tokens := map[string]bool{c.LockToken: true}
	ids := map[int64]bool{c.Execution.ID: true}
	for _, x := range append(cs, b.busClaim(routedAt, 10)...) {
		if tokens[x.LockToken] || ids[x.Execution.ID] {
			t.Fatalf("claimed twice or a shared token: %+v", x)
		}
		tokens[x.LockToken], ids[x.Execution.ID] = true, true
	}
	wantEqual(t, "executions claimed in all", len(ids), 4)
	// Leased (one minute): nothing is due before the leases run out.
	b.busClaimNone(routedAt.Add(lease))

	_, err := b.s.BusClaim(b.ctx, &storage.BusClaimParams{Tenant: b.tenant, Max: -1, Now: routedAt})
	wantErr(t, "BusClaim with a negative Max", err, heraldtype.ErrInvalidArgument)
	_, err = b.s.BusClaim(b.ctx, &storage.BusClaimParams{Tenant: b.tenant, Lease: -time.Second, Now: routedAt})
	wantErr(t, "BusClaim with a negative Lease", err, heraldtype.ErrInvalidArgument)
}

// testBusClaimTakeover: a running execution whose attempt started and
// whose lease ended before Now is claimed again (TakenOver, a new token,
// Attempts+1); the lost attempt's token no longer finishes or heartbeats.
// The default lease is a minute.
func testBusClaimTakeover(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1")
	c1 := b.busClaimP(t0, 1, 0)[0] // Lease 0: the default, one minute
	b.busStart(c1, at(time.Minute))
	b.busClaimNone(at(time.Minute)) // a lease ending at Now is still live
	b.wantNextWake(t0, at(time.Minute))
	cs := b.busClaimP(at(time.Minute+time.Nanosecond), 1, 10*time.Second)
	if len(cs) != 1 {
		t.Fatalf("takeover: %v", claimedIDs(cs))
	}
	c2 := cs[0]
	wantEqual(t, "TakenOver", c2.TakenOver, true)
	wantEqual(t, "Execution", c2.Execution.ID, c1.Execution.ID)
	wantEqual(t, "Attempts after a takeover", c2.Execution.Attempts, 2)
	if c2.LockToken == c1.LockToken {
		t.Fatal("a takeover kept the lock token")
	}
	wantJSON(t, "Event.Data after a takeover", c2.Event.Data, string(busData("e1")))
	b.busStart(c2, at(time.Minute+10*time.Second))
	err := b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: c1.Execution.ID,
		LockToken: c1.LockToken, LeaseUntil: at(time.Hour)})
	wantErr(t, "heartbeat with the lost token", err, heraldtype.ErrLeaseLost)
	errs := b.busFinish(at(2*time.Minute), outcome(c1, storage.BusSucceeded, at(2*time.Minute)))
	wantErr(t, "finish with the lost token", errs[0], heraldtype.ErrLeaseLost)
	wantEqual(t, "status after the lost finish", b.busExec("e1", "s").Status, heraldtype.ExecRunning)
	// Taken over again (the second lease was 10 s).
	c3 := b.busClaimOne(at(time.Minute+11*time.Second), "e1", "s")
	wantEqual(t, "TakenOver", c3.TakenOver, true)
	wantEqual(t, "Attempts", c3.Execution.Attempts, 3)
	b.busFinishOK(at(2*time.Minute), outcome(c3, storage.BusSucceeded, at(2*time.Minute)))
	wantEqual(t, "status", b.busExec("e1", "s").Status, heraldtype.ExecSucceeded)
	as, _ := b.attempts(storage.BusAttemptListParams{Execution: c1.Execution.ID})
	wantEqual(t, "attempts recorded (the lost ones wrote nothing)", len(as), 1)
	b.busClaimNone(at(time.Hour))
}

// testBusClaimConcurrent: concurrent claims never hand out the same
// execution.
func testBusClaimConcurrent(b *bundle) {
	t := b.t
	const n = 40
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("e%02d", i))
	}
	b.busPublishRouted(t0, "a", []string{"s"}, ids...)
	var (
		mu      sync.Mutex
		claimed = map[int64]int{}
		wg      sync.WaitGroup
	)
	now := at(time.Second)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := b.s.BusClaim(b.ctx, &storage.BusClaimParams{Tenant: b.tenant, Max: 3, Now: now, Lease: lease})
				if err != nil {
					t.Errorf("BusClaim: %v", err)
					return
				}
				if len(cs) == 0 {
					return
				}
				var rs []storage.BusResult
				for _, c := range cs {
					mu.Lock()
					claimed[c.Execution.ID]++
					mu.Unlock()
					rs = append(rs, outcome(c, storage.BusSucceeded, now))
				}
				errs, err := b.s.BusFinish(b.ctx, &storage.BusFinishParams{Tenant: b.tenant, Results: rs, Now: now})
				if err != nil {
					t.Errorf("BusFinish: %v", err)
					return
				}
				for _, err := range errs {
					if err != nil {
						t.Errorf("BusFinish: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	// A store may skip executions another claim holds: claim what is left.
	for _, c := range b.busClaim(now, 1000) {
		claimed[c.Execution.ID]++
	}
	wantEqual(t, "executions claimed", len(claimed), n)
	for id, c := range claimed {
		if c != 1 {
			t.Fatalf("execution %d claimed %d times", id, c)
		}
	}
}

// testBusFinish: one call ends several attempts: success, retry (due at
// RetryAt), dead letter (stored with the fields the store sets); each
// attempt's record is stored as given, with the ids the store sets.
func testBusFinish(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "order.placed", []string{"ok", "retry", "dead"}, "e1")
	now := at(time.Second)
	cs := b.busClaim(now, 10)
	if len(cs) != 3 {
		t.Fatalf("claimed %v", claimedIDs(cs))
	}
	bySub := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		bySub[c.Execution.Subscription] = c
	}
	ok, retry, dead := bySub["ok"], bySub["retry"], bySub["dead"]
	end := at(3 * time.Second)
	forged := heraldtype.Attempt{ID: 999999, Execution: 999999, EventID: "forged", Subscription: "forged"}
	okR := outcome(ok, storage.BusSucceeded, now)
	okR.Attempt.ID, okR.Attempt.Execution, okR.Attempt.EventID, okR.Attempt.Subscription =
		forged.ID, forged.Execution, forged.EventID, forged.Subscription
	okR.Attempt.Result = json.RawMessage(`{"total":42,"s":"\u0000é"}`)
	okR.Attempt.Logs = []string{"line 1", "ünïcode \"quoted\"", ""}
	okR.Attempt.Duration = heraldtype.Duration(1500 * time.Millisecond)
	retryAt := at(time.Hour)
	retryR := outcome(retry, storage.BusRetry, now)
	retryR.RetryAt = retryAt
	retryR.Attempt.Error = "connection refused \x00 (nul)"
	retryR.Attempt.Stack = "at handler (x.js:1:2)\nat main"
	deadR := outcome(dead, storage.BusDeadLetter, now)
	deadR.Attempt.ErrorKind, deadR.Attempt.Error = heraldtype.ErrorValidation, "bad input"
	deadR.DeadLetter = &heraldtype.DeadLetter{
		// Set by the store, whatever the caller says.
		ID: 999999, Execution: 999999, EventID: "forged", Subscription: "forged", EventType: "forged",
		EventData: json.RawMessage(`"forged"`), Attempts: 99, CreatedAt: at(99 * time.Hour), ReprocessedAt: at(99 * time.Hour),
		// Stored as given.
		Target:    heraldtype.Target{Kind: heraldtype.TargetWorkflow, Workflow: "wf", InstanceID: "{data.id}"},
		ErrorKind: heraldtype.ErrorValidation, Error: "bad input", Stack: "stack\ttrace", FailedAt: at(2 * time.Second),
	}
	b.busFinishOK(end, okR, retryR, deadR)

	// Success.
	x := b.busExec("e1", "ok")
	wantEqual(t, "ok Status", x.Status, heraldtype.ExecSucceeded)
	wantJSON(t, "ok Result", x.Result, `{"total":42,"s":"\u0000é"}`)
	wantTime(t, "ok UpdatedAt", x.UpdatedAt, end)
	wantEqual(t, "ok Attempts", x.Attempts, 1)
	wantTime(t, "ok NextAttemptAt (ended)", x.NextAttemptAt, time.Time{})
	as, _ := b.attempts(storage.BusAttemptListParams{Execution: ok.Execution.ID})
	if len(as) != 1 {
		t.Fatalf("ok's attempts: %d, want 1", len(as))
	}
	a := as[0]
	if a.ID == 0 || a.ID == forged.ID {
		t.Fatalf("attempt ID %d: not set by the store", a.ID)
	}
	wantEqual(t, "attempt Execution", a.Execution, ok.Execution.ID)
	wantEqual(t, "attempt EventID", a.EventID, "e1")
	wantEqual(t, "attempt Subscription", a.Subscription, "ok")
	wantEqual(t, "attempt Number", a.Number, 1)
	wantEqual(t, "attempt Succeeded", a.Succeeded, true)
	wantTime(t, "attempt StartedAt", a.StartedAt, now)
	wantEqual(t, "attempt Duration", a.Duration, heraldtype.Duration(1500*time.Millisecond))
	wantJSON(t, "attempt Result", a.Result, `{"total":42,"s":"\u0000é"}`)
	if !slices.Equal(a.Logs, okR.Attempt.Logs) {
		t.Fatalf("attempt Logs %q, want %q", a.Logs, okR.Attempt.Logs)
	}

	// Retry.
	x = b.busExec("e1", "retry")
	wantEqual(t, "retry Status", x.Status, heraldtype.ExecRetrying)
	wantTime(t, "retry NextAttemptAt", x.NextAttemptAt, retryAt)
	wantEqual(t, "retry LastError", x.LastError, retryR.Attempt.Error)
	as, _ = b.attempts(storage.BusAttemptListParams{Execution: retry.Execution.ID})
	if len(as) != 1 || as[0].Succeeded || as[0].ErrorKind != heraldtype.ErrorRuntime ||
		as[0].Error != retryR.Attempt.Error || as[0].Stack != retryR.Attempt.Stack {
		t.Fatalf("retry's attempts: %+v", as)
	}
	b.busClaimNone(retryAt.Add(-time.Nanosecond))
	b.wantNextWake(end, retryAt)
	c := b.busClaimOne(retryAt, "e1", "retry")
	wantEqual(t, "Attempts of the retry", c.Execution.Attempts, 2)
	wantEqual(t, "TakenOver of a retry", c.TakenOver, false)

	// Dead letter.
	x = b.busExec("e1", "dead")
	wantEqual(t, "dead Status", x.Status, heraldtype.ExecDeadLettered)
	if x.DeadLetter == 0 {
		t.Fatal("dead-lettered execution without its letter's id")
	}
	dl := b.deadLetter(x.DeadLetter)
	wantEqual(t, "letter ID", dl.ID, x.DeadLetter)
	wantEqual(t, "letter Execution", dl.Execution, dead.Execution.ID)
	wantEqual(t, "letter EventID", dl.EventID, "e1")
	wantEqual(t, "letter Subscription", dl.Subscription, "dead")
	wantEqual(t, "letter EventType", dl.EventType, "order.placed")
	wantJSON(t, "letter EventData", dl.EventData, string(busData("e1")))
	wantEqual(t, "letter Attempts", dl.Attempts, 1)
	wantTime(t, "letter CreatedAt", dl.CreatedAt, end)
	wantTime(t, "letter ReprocessedAt", dl.ReprocessedAt, time.Time{})
	wantEqual(t, "letter Target", dl.Target, deadR.DeadLetter.Target)
	wantEqual(t, "letter ErrorKind", dl.ErrorKind, heraldtype.ErrorValidation)
	wantEqual(t, "letter Error", dl.Error, "bad input")
	wantEqual(t, "letter Stack", dl.Stack, "stack\ttrace")
	wantTime(t, "letter FailedAt", dl.FailedAt, at(2*time.Second))
	as, _ = b.attempts(storage.BusAttemptListParams{Execution: dead.Execution.ID})
	if len(as) != 1 || as[0].ErrorKind != heraldtype.ErrorValidation {
		t.Fatalf("dead's attempts: %+v", as)
	}

	// Ended executions are no longer claimed.
	b.busFinishOK(retryAt, outcome(c, storage.BusSucceeded, retryAt))
	b.busClaimNone(at(100 * time.Hour))
	b.wantNoWake(retryAt)
	wantEqual(t, "backlog", b.busBacklog(0), 0)

	// An empty call ends nothing.
	wantEqual(t, "errors of an empty finish", len(b.busFinish(end)), 0)
}

// testBusFinishLeaseLost: a result whose token no longer owns its
// execution gets ErrLeaseLost and writes nothing, while the other results of
// the call commit; a lease that ran out but was not taken over still owns.
func testBusFinishLeaseLost(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1", "e2", "e3", "e4")
	cs := b.busClaim(t0, 4)
	if len(cs) != 4 {
		t.Fatalf("claimed %v", claimedIDs(cs))
	}
	byEvent := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		byEvent[c.Event.ID] = c
	}
	now := at(10 * lease) // every lease ran out; none was taken over
	wrongToken := outcome(byEvent["e2"], storage.BusDeadLetter, now)
	wrongToken.LockToken = "not-the-token"
	unknown := outcome(byEvent["e3"], storage.BusSucceeded, now)
	unknown.Execution = 987654321
	errs := b.busFinish(now,
		outcome(byEvent["e1"], storage.BusSucceeded, now),
		wrongToken,
		unknown,
		outcome(byEvent["e4"], storage.BusRetry, now),
	)
	wantErr(t, "wrong token", errs[1], heraldtype.ErrLeaseLost)
	wantErr(t, "unknown execution", errs[2], heraldtype.ErrLeaseLost)
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("the owned results failed: %v", errs)
	}
	wantEqual(t, "e1", b.busExec("e1", "s").Status, heraldtype.ExecSucceeded)
	wantEqual(t, "e4", b.busExec("e4", "s").Status, heraldtype.ExecRetrying)
	x := b.busExec("e2", "s")
	wantEqual(t, "e2 after a lost result", x.Status, heraldtype.ExecRunning)
	wantEqual(t, "e2 has no letter", x.DeadLetter, int64(0))
	dls, _ := b.deadLetters(storage.BusDeadLetterFilter{}, 0, 0)
	wantEqual(t, "dead letters", len(dls), 0)
	as, _ := b.attempts(storage.BusAttemptListParams{Subscription: "s"})
	wantEqual(t, "attempts recorded", len(as), 2)

	// Finishing an execution twice: the second finds it no longer running.
	errs = b.busFinish(now, outcome(byEvent["e1"], storage.BusSucceeded, now))
	wantErr(t, "second finish", errs[0], heraldtype.ErrLeaseLost)
	// The same execution twice in one call: the first result ends it.
	errs = b.busFinish(now, outcome(byEvent["e3"], storage.BusSucceeded, now), outcome(byEvent["e3"], storage.BusDeadLetter, now))
	if errs[0] != nil {
		t.Fatalf("first of two results: %v", errs[0])
	}
	wantErr(t, "second of two results", errs[1], heraldtype.ErrLeaseLost)
	wantEqual(t, "e3", b.busExec("e3", "s").Status, heraldtype.ExecSucceeded)
	as, _ = b.attempts(storage.BusAttemptListParams{Subscription: "s"})
	wantEqual(t, "attempts recorded", len(as), 3)
	dls, _ = b.deadLetters(storage.BusDeadLetterFilter{}, 0, 0)
	wantEqual(t, "dead letters", len(dls), 0)
}

// testBusFinishRefusals: a result with an unknown outcome, or a dead letter
// without its letter, fails the whole call, which writes nothing.
func testBusFinishRefusals(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1", "e2")
	cs := b.busClaim(t0, 2)
	good := outcome(cs[0], storage.BusSucceeded, t0)
	noLetter := outcome(cs[1], storage.BusDeadLetter, t0)
	noLetter.DeadLetter = nil
	badOutcome := outcome(cs[1], storage.BusSucceeded, t0)
	for what, bad := range map[string]storage.BusResult{
		"outcome 0": func() storage.BusResult { r := badOutcome; r.Outcome = 0; return r }(),
		"outcome 9": func() storage.BusResult { r := badOutcome; r.Outcome = 9; return r }(),
		"no letter": noLetter,
	} {
		_, err := b.s.BusFinish(b.ctx, &storage.BusFinishParams{Tenant: b.tenant, Now: t0,
			Results: []storage.BusResult{good, bad}})
		wantErr(t, "BusFinish with "+what, err, heraldtype.ErrInvalidArgument)
		wantEqual(t, "e1 after a refused finish", b.busExec("e1", "s").Status, heraldtype.ExecRunning)
		as, _ := b.attempts(storage.BusAttemptListParams{Subscription: "s"})
		wantEqual(t, "attempts after a refused finish", len(as), 0)
	}
	b.busFinishOK(t0, good, outcome(cs[1], storage.BusSucceeded, t0))
}

// testBusHeartbeat: a heartbeat moves the lease's end; a lost token gets
// ErrLeaseLost.
func testBusHeartbeat(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1")
	c := b.busClaim(t0, 1)[0]
	hb := func(token string, until time.Time) error {
		return b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: c.Execution.ID,
			LockToken: token, LeaseUntil: until})
	}
	b.busStart(c, at(10*time.Minute))
	b.busClaimNone(at(5 * time.Minute)) // the first lease (1 min) would have run out
	b.wantNextWake(at(5*time.Minute), at(10*time.Minute))
	wantErr(t, "heartbeat with a wrong token", hb("not-the-token", at(time.Hour)), heraldtype.ErrLeaseLost)
	// A lease that ran out but was not taken over is still the token's.
	if err := hb(c.LockToken, at(30*time.Minute)); err != nil {
		t.Fatalf("BusHeartbeat after the lease ran out: %v", err)
	}
	b.busClaimNone(at(20 * time.Minute))
	c2 := b.busClaimOne(at(30*time.Minute+time.Second), "e1", "s")
	wantEqual(t, "TakenOver", c2.TakenOver, true)
	wantErr(t, "heartbeat after the takeover", hb(c.LockToken, at(time.Hour)), heraldtype.ErrLeaseLost)
	b.busFinishOK(at(31*time.Minute), outcome(c2, storage.BusSucceeded, at(31*time.Minute)))
	err := b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: c2.Execution.ID,
		LockToken: c2.LockToken, LeaseUntil: at(time.Hour)})
	wantErr(t, "heartbeat of an ended execution", err, heraldtype.ErrLeaseLost)
	err = b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: 987654321,
		LockToken: c2.LockToken, LeaseUntil: at(time.Hour)})
	wantErr(t, "heartbeat of an unknown execution", err, heraldtype.ErrLeaseLost)
	wantEqual(t, "status", b.busExec("e1", "s").Status, heraldtype.ExecSucceeded)
}

// testBusFinishReleased: a claimed execution whose attempt never started
// goes back to queued (or retrying) with its Attempts as before the claim,
// due at RetryAt, with no attempt record; its next claim counts the same
// attempt again.
func testBusFinishReleased(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "order.placed", []string{"fresh", "again"}, "e1")
	now := at(time.Second)
	cs := b.busClaim(now, 10)
	if len(cs) != 2 {
		t.Fatalf("claimed %v", claimedIDs(cs))
	}
	bySub := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		bySub[c.Execution.Subscription] = c
	}
	// "again" fails once, then its retry is claimed and released.
	retry := outcome(bySub["again"], storage.BusRetry, now)
	retry.RetryAt = at(2 * time.Second)
	b.busFinishOK(now, retry)
	again := b.busClaimOne(at(2*time.Second), "e1", "again")
	wantEqual(t, "Attempts of the retry's claim", again.Execution.Attempts, 2)

	releaseAt := at(5 * time.Second)
	rel := func(c *storage.BusClaimed) storage.BusResult {
		return storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: storage.BusReleased,
			RetryAt: releaseAt, Attempt: heraldtype.Attempt{Number: 99, Error: "ignored"}}
	}
	b.busFinishOK(at(3*time.Second), rel(bySub["fresh"]), rel(again))

	x := b.busExec("e1", "fresh")
	wantEqual(t, "released fresh Status", x.Status, heraldtype.ExecQueued)
	wantEqual(t, "released fresh Attempts", x.Attempts, 0)
	wantTime(t, "released fresh NextAttemptAt", x.NextAttemptAt, releaseAt)
	x = b.busExec("e1", "again")
	wantEqual(t, "released retry Status", x.Status, heraldtype.ExecRetrying)
	wantEqual(t, "released retry Attempts", x.Attempts, 1)
	as, _ := b.attempts(storage.BusAttemptListParams{EventID: "e1"})
	if len(as) != 1 {
		t.Fatalf("%d attempt records after releases, want only the one failed attempt", len(as))
	}
	// The old tokens own nothing now.
	if errs := b.busFinish(at(3*time.Second), outcome(bySub["fresh"], storage.BusSucceeded, now)); !errors.Is(errs[0], heraldtype.ErrLeaseLost) {
		t.Fatalf("finish with a released token: %v, want ErrLeaseLost", errs[0])
	}
	b.busClaimNone(releaseAt.Add(-time.Nanosecond))
	got := b.busClaim(releaseAt, 10)
	if len(got) != 2 {
		t.Fatalf("after the release: claimed %v", claimedIDs(got))
	}
	for _, c := range got {
		want := map[string]int{"fresh": 1, "again": 2}[c.Execution.Subscription]
		wantEqual(t, "Attempts of the claim after a release of "+c.Execution.Subscription, c.Execution.Attempts, want)
		if c.TakenOver {
			t.Fatalf("a released execution's claim is not a takeover")
		}
	}
}

// testBusClaimNotStarted: an attempt is counted when it starts. A claim
// whose lease runs out before it started is claimed again as if it never
// had been (not TakenOver, the same attempt number, nothing counted); a
// start written twice counts once; a takeover of a started attempt counts
// the next.
func testBusClaimNotStarted(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1")
	c1 := b.busClaimP(t0, 1, 10*time.Second)[0]
	wantEqual(t, "Attempts of the claim", c1.Execution.Attempts, 1)
	// Its lease runs out in the claimer's queue, twice over.
	c2 := b.busClaimOne(at(11*time.Second), "e1", "s")
	wantEqual(t, "TakenOver of a claim never started", c2.TakenOver, false)
	wantEqual(t, "Attempts of a takeover of an item never started", c2.Execution.Attempts, 1)
	wantEqual(t, "stored Attempts, never started", b.busExec("e1", "s").Attempts, 0)
	c3 := b.busClaimOne(at(2*time.Minute), "e1", "s")
	wantEqual(t, "TakenOver of a claim never started, again", c3.TakenOver, false)
	wantEqual(t, "Attempts, again", c3.Execution.Attempts, 1)
	err := b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: b.tenant, Execution: c2.Execution.ID,
		LockToken: c2.LockToken, LeaseUntil: at(time.Hour), Start: true})
	wantErr(t, "start with a lost token", err, heraldtype.ErrLeaseLost)
	wantEqual(t, "stored Attempts after a lost start", b.busExec("e1", "s").Attempts, 0)
	// Started (written twice: counted once), then its node dies.
	b.busStart(c3, at(3*time.Minute))
	b.busStart(c3, at(3*time.Minute))
	wantEqual(t, "stored Attempts once started", b.busExec("e1", "s").Attempts, 1)
	c4 := b.busClaimOne(at(3*time.Minute+time.Second), "e1", "s")
	wantEqual(t, "TakenOver of a started attempt", c4.TakenOver, true)
	wantEqual(t, "Attempts of the takeover", c4.Execution.Attempts, 2)
	wantEqual(t, "stored Attempts of the takeover, not started", b.busExec("e1", "s").Attempts, 1)
	b.busStart(c4, at(4*time.Minute))
	b.busFinishOK(at(4*time.Minute), outcome(c4, storage.BusSucceeded, at(4*time.Minute)))
	x := b.busExec("e1", "s")
	wantEqual(t, "Status", x.Status, heraldtype.ExecSucceeded)
	wantEqual(t, "Attempts in all", x.Attempts, 2)
}

// testBusTakeoverDeadLetter: a takeover that runs nothing, dead-lettering
// the execution whose final attempt (number Attempts-1) was lost, records
// that attempt: no attempt is counted for the takeover, and the letter's
// Attempts is the attempts that ran. A finish of a claim that was never
// started counts its record's attempt.
func testBusTakeoverDeadLetter(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"lost", "direct"}, "e1")
	cs := b.busClaim(t0, 2)
	bySub := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		bySub[c.Execution.Subscription] = c
	}
	b.busStart(bySub["lost"], at(time.Minute))
	// "direct" ends without a start written: its record counts it.
	b.busFinishOK(t0, outcome(bySub["direct"], storage.BusRetry, t0))
	wantEqual(t, "Attempts of a finish without a start", b.busExec("e1", "direct").Attempts, 1)
	c := b.busClaimOne(at(2*time.Minute), "e1", "lost")
	wantEqual(t, "TakenOver", c.TakenOver, true)
	wantEqual(t, "Attempts of the takeover", c.Execution.Attempts, 2)
	r := outcome(c, storage.BusDeadLetter, at(2*time.Minute))
	r.Attempt.Number = c.Execution.Attempts - 1 // the lost attempt
	b.busFinishOK(at(2*time.Minute), r)
	x := b.busExec("e1", "lost")
	wantEqual(t, "Status", x.Status, heraldtype.ExecDeadLettered)
	wantEqual(t, "Attempts (the takeover counted none)", x.Attempts, 1)
	wantEqual(t, "letter Attempts", b.deadLetter(x.DeadLetter).Attempts, 1)
	as, _ := b.attempts(storage.BusAttemptListParams{Execution: c.Execution.ID})
	if len(as) != 1 || as[0].Number != 1 {
		t.Fatalf("attempt records %+v, want the lost attempt 1 only", as)
	}
}

// testBusFinishReleasedStarted: a started attempt that is released (the
// runtime cancelled it at a stop) spends no attempt: the execution goes
// back as before its claim, and its next claim is not a takeover.
func testBusFinishReleasedStarted(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"s"}, "e1")
	c1 := b.busClaimOne(t0, "e1", "s")
	b.busStart(c1, at(time.Minute))
	retry := outcome(c1, storage.BusRetry, t0)
	retry.RetryAt = at(time.Second)
	b.busFinishOK(t0, retry)
	c2 := b.busClaimOne(at(time.Second), "e1", "s")
	wantEqual(t, "Attempts of the second claim", c2.Execution.Attempts, 2)
	b.busStart(c2, at(time.Minute))
	wantEqual(t, "stored Attempts, started", b.busExec("e1", "s").Attempts, 2)
	b.busFinishOK(at(2*time.Second), storage.BusResult{Execution: c2.Execution.ID, LockToken: c2.LockToken,
		Outcome: storage.BusReleased, RetryAt: at(2 * time.Second)})
	x := b.busExec("e1", "s")
	wantEqual(t, "released Status", x.Status, heraldtype.ExecRetrying)
	wantEqual(t, "released Attempts", x.Attempts, 1)
	c3 := b.busClaimOne(at(2*time.Second), "e1", "s")
	wantEqual(t, "TakenOver after a release", c3.TakenOver, false)
	wantEqual(t, "Attempts after a release", c3.Execution.Attempts, 2)
	b.busStart(c3, at(time.Minute))
	b.busFinishOK(at(3*time.Second), outcome(c3, storage.BusSucceeded, at(3*time.Second)))
	wantEqual(t, "Attempts in all", b.busExec("e1", "s").Attempts, 2)
	// A first attempt released after its start goes back to queued.
	b.busPublishRouted(at(4*time.Second), "a", []string{"s"}, "e2")
	c := b.busClaimOne(at(4*time.Second), "e2", "s")
	b.busStart(c, at(time.Minute))
	b.busFinishOK(at(4*time.Second), storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken,
		Outcome: storage.BusReleased})
	x = b.busExec("e2", "s")
	wantEqual(t, "released first attempt Status", x.Status, heraldtype.ExecQueued)
	wantEqual(t, "released first attempt Attempts", x.Attempts, 0)
}
