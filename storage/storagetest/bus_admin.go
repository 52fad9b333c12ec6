package storagetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The bus's subscriptions, scripts, dead letters, attempts, prune,
// backlog, wake-ups, TurnCommit.Publish, tenant isolation and refusals.

// ---- subscriptions and scripts ----

func testBusSubscriptions(b *bundle) {
	t := b.t
	wantEqual(t, "generation before the first put", b.subGeneration(), int64(0))
	ids, gen := b.subIDs()
	wantStrings(t, "subscriptions before the first put", ids)
	wantEqual(t, "listed generation before the first put", gen, int64(0))

	three := 3
	sub := heraldtype.Subscription{
		ID: "orders", Pattern: "order.*",
		Filter:  json.RawMessage(`{"all":[{"field":"data.total","op":"gt","value":100}]}`),
		Target:  heraldtype.Target{Kind: heraldtype.TargetWorkflow, Workflow: "fulfil", InstanceID: "order-{data.id}"},
		Enabled: true, MaxRetries: &three, Timeout: heraldtype.Duration(5 * time.Second),
		// Set by the store.
		Version: 77, CreatedAt: at(99 * time.Hour), UpdatedAt: at(99 * time.Hour),
	}
	check := func(what string, got *heraldtype.Subscription, want heraldtype.Subscription, version int, created, updated time.Time) {
		t.Helper()
		wantEqual(t, what+" ID", got.ID, want.ID)
		wantEqual(t, what+" Pattern", got.Pattern, want.Pattern)
		wantJSON(t, what+" Filter", got.Filter, string(want.Filter))
		wantEqual(t, what+" Target", got.Target, want.Target)
		wantEqual(t, what+" Enabled", got.Enabled, want.Enabled)
		if (got.MaxRetries == nil) != (want.MaxRetries == nil) || (got.MaxRetries != nil && *got.MaxRetries != *want.MaxRetries) {
			t.Fatalf("%s MaxRetries = %v, want %v", what, got.MaxRetries, want.MaxRetries)
		}
		wantEqual(t, what+" Timeout", got.Timeout, want.Timeout)
		wantEqual(t, what+" Version", got.Version, version)
		wantTime(t, what+" CreatedAt", got.CreatedAt, created)
		wantTime(t, what+" UpdatedAt", got.UpdatedAt, updated)
	}
	get := func(id string) (*heraldtype.Subscription, error) {
		return b.s.BusSubscriptionGet(b.ctx, &storage.BusSubscriptionGetParams{Tenant: b.tenant, ID: id})
	}
	mustGet := func(id string) *heraldtype.Subscription {
		t.Helper()
		s, err := get(id)
		if err != nil {
			t.Fatalf("BusSubscriptionGet(%s): %v", id, err)
		}
		return s
	}
	check("created", b.putSub(sub, t0), sub, 1, t0, t0)
	check("read back", mustGet("orders"), sub, 1, t0, t0)
	g1 := b.subGeneration()
	if g1 == 0 {
		t.Fatal("generation unchanged by the first put")
	}
	ids, gen = b.subIDs()
	wantStrings(t, "subscriptions", ids, "orders")
	wantEqual(t, "listed generation", gen, g1)
	wantEqual(t, "generation after reads", b.subGeneration(), g1)

	// A put replaces every field.
	zero := 0
	sub2 := heraldtype.Subscription{ID: "orders", Pattern: "order.>",
		Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}, MaxRetries: &zero}
	check("replaced", b.putSub(sub2, at(time.Hour)), sub2, 2, t0, at(time.Hour))
	check("replaced, read back", mustGet("orders"), sub2, 2, t0, at(time.Hour))
	g2 := b.subGeneration()
	if g2 == g1 {
		t.Fatal("generation unchanged by a replacing put")
	}
	sub3 := sub2
	sub3.MaxRetries = nil // nil (the default) is not 0 (no retries)
	check("MaxRetries nil", b.putSub(sub3, at(2*time.Hour)), sub3, 3, t0, at(2*time.Hour))
	check("MaxRetries nil, read back", mustGet("orders"), sub3, 3, t0, at(2*time.Hour))
	g3 := b.subGeneration()
	if g3 == g2 || g3 == g1 {
		t.Fatal("generation unchanged by a put")
	}

	// Listed by id, bytewise.
	for _, id := range []string{"b", "é", "a", "B", "z"} {
		b.putSub(heraldtype.Subscription{ID: id, Pattern: id, Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}, at(3*time.Hour))
	}
	ids, gen = b.subIDs()
	wantStrings(t, "subscriptions by id", ids, "B", "a", "b", "orders", "z", "é")
	wantEqual(t, "listed generation", gen, b.subGeneration())
	seen := map[int64]bool{g1: true, g2: true, g3: true}
	if seen[gen] {
		t.Fatal("generation unchanged by puts")
	}
	seen[gen] = true

	// Delete.
	del := func(id string) error {
		return b.s.BusSubscriptionDelete(b.ctx, &storage.BusSubscriptionGetParams{Tenant: b.tenant, ID: id})
	}
	if err := del("a"); err != nil {
		t.Fatalf("BusSubscriptionDelete: %v", err)
	}
	gd := b.subGeneration()
	if seen[gd] {
		t.Fatal("generation unchanged by a delete")
	}
	seen[gd] = true
	_, err := get("a")
	wantErr(t, "BusSubscriptionGet after delete", err, heraldtype.ErrNotFound)
	wantErr(t, "second delete", del("a"), heraldtype.ErrNotFound)
	wantErr(t, "delete of an unknown id", del("nope"), heraldtype.ErrNotFound)
	wantEqual(t, "generation after deletes of nothing", b.subGeneration(), gd)
	ids, _ = b.subIDs()
	wantStrings(t, "subscriptions after delete", ids, "B", "b", "orders", "z", "é")
	// Created again: a new subscription.
	again := heraldtype.Subscription{ID: "a", Pattern: "x", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
	check("created after delete", b.putSub(again, at(5*time.Hour)), again, 1, at(5*time.Hour), at(5*time.Hour))
	if gen := b.subGeneration(); seen[gen] {
		t.Fatal("generation unchanged by a put after delete")
	}

	// A refused put changes nothing.
	gen = b.subGeneration()
	bad := sub
	bad.ID = "x\x00y"
	_, err = b.s.BusSubscriptionPut(b.ctx, &storage.BusSubscriptionPutParams{Tenant: b.tenant, Subscription: bad, Now: at(6 * time.Hour)})
	wantErr(t, "BusSubscriptionPut with a NUL in the id", err, heraldtype.ErrInvalidArgument)
	wantEqual(t, "generation after a refused put", b.subGeneration(), gen)
	ids, _ = b.subIDs()
	wantStrings(t, "subscriptions after a refused put", ids, "B", "a", "b", "orders", "z", "é")

	// Another tenant has none.
	other := b.in(b.tenant + "-other")
	ids, gen = other.subIDs()
	wantStrings(t, "another tenant's subscriptions", ids)
	wantEqual(t, "another tenant's generation", gen, int64(0))
	_, err = other.s.BusSubscriptionGet(b.ctx, &storage.BusSubscriptionGetParams{Tenant: other.tenant, ID: "orders"})
	wantErr(t, "another tenant's get", err, heraldtype.ErrNotFound)
	wantErr(t, "another tenant's delete",
		b.s.BusSubscriptionDelete(b.ctx, &storage.BusSubscriptionGetParams{Tenant: other.tenant, ID: "orders"}), heraldtype.ErrNotFound)
	mustGet("orders")
}

// testBusSubscriptionDeleteKeepsExecutions: a deleted subscription's
// executions, attempts and dead letters stay, and its executions still run.
func testBusSubscriptionDeleteKeepsExecutions(b *bundle) {
	t := b.t
	b.putSub(heraldtype.Subscription{ID: "s", Pattern: "a", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}, t0)
	b.busPublishRouted(t0, "a", []string{"s"}, "e1", "e2")
	cs := b.busClaim(t0, 2)
	b.busFinishOK(t0, outcome(cs[0], storage.BusRetry, at(time.Second)), outcome(cs[1], storage.BusDeadLetter, t0))
	if err := b.s.BusSubscriptionDelete(b.ctx, &storage.BusSubscriptionGetParams{Tenant: b.tenant, ID: "s"}); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "route kept", len(b.busEvent(cs[0].Event.ID).Routes), 1)
	as, _ := b.attempts(storage.BusAttemptListParams{Subscription: "s"})
	wantEqual(t, "attempts kept", len(as), 2)
	dls, _ := b.deadLetters(storage.BusDeadLetterFilter{Subscription: "s"}, 0, 0)
	wantEqual(t, "dead letters kept", len(dls), 1)
	c := b.busClaimOne(at(time.Minute), cs[0].Event.ID, "s")
	wantEqual(t, "Attempts", c.Execution.Attempts, 2)
}

// subVersions returns the tenant's subscription versions and generation.
func (b *bundle) subVersions() ([]*storage.BusSubscriptionVersion, int64) {
	b.t.Helper()
	vs, gen, err := b.s.BusSubscriptionVersions(b.ctx, &storage.BusTenantParams{Tenant: b.tenant})
	if err != nil {
		b.t.Fatalf("BusSubscriptionVersions: %v", err)
	}
	return vs, gen
}

// testBusSubscriptionVersions: a put or delete takes a position in the
// publish order and keeps the version it replaces while unrouted events
// published before it may need it; BusPrune drops a kept version once no
// unrouted event is at or before its end.
func testBusSubscriptionVersions(b *bundle) {
	t := b.t
	type v struct {
		id           string
		version      int
		since, until int64
	}
	versions := func(what string, want ...v) []*storage.BusSubscriptionVersion {
		t.Helper()
		vs, gen := b.subVersions()
		wantEqual(t, what+": generation", gen, b.subGeneration())
		var got []v
		for _, x := range vs {
			got = append(got, v{x.Subscription.ID, x.Subscription.Version, x.Since, x.Until})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: versions %v, want %v", what, got, want)
		}
		return vs
	}
	seqs := map[string]int64{}
	route := func(now time.Time) int {
		t.Helper()
		return b.busRoute(now, 100, func(ev *storage.BusEvent) []storage.BusRouteDecision {
			seqs[ev.ID] = ev.Seq
			return nil
		})
	}
	sub := func(id, filter string) heraldtype.Subscription {
		return heraldtype.Subscription{ID: id, Pattern: "a", Filter: json.RawMessage(filter), Enabled: true,
			Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
	}
	del := func(id string) {
		t.Helper()
		if err := b.s.BusSubscriptionDelete(b.ctx, &storage.BusSubscriptionGetParams{Tenant: b.tenant, ID: id}); err != nil {
			t.Fatalf("BusSubscriptionDelete(%s): %v", id, err)
		}
	}
	versions("no subscription")

	// Nothing unrouted: a put keeps nothing.
	b.putSub(sub("s", `{"n":1}`), t0)
	b.putSub(sub("s", `{"n":2}`), t0)
	vs := versions("s put twice, nothing unrouted", v{"s", 2, b.subVersionSince("s"), 0})
	s2 := vs[0].Since

	// e1 is published under s v2; the put of v3 keeps v2 until it.
	b.busPublish("e1", "a", t0)
	b.putSub(sub("s", `{"n":3}`), at(time.Second))
	vs = versions("s v3 after e1", v{"s", 2, s2, b.subVersionSince("s")}, v{"s", 3, b.subVersionSince("s"), 0})
	c3 := vs[0].Until
	wantJSON(t, "kept v2's filter", vs[0].Subscription.Filter, `{"n":2}`)
	wantTime(t, "kept v2's UpdatedAt", vs[0].Subscription.UpdatedAt, t0)
	wantJSON(t, "v3's filter", vs[1].Subscription.Filter, `{"n":3}`)

	// e2 is published under v3; the delete keeps v3 until it. t is created
	// after the delete; e3 is published under t alone.
	b.busPublish("e2", "a", at(time.Second))
	del("s")
	b.putSub(sub("t", ``), at(2*time.Second))
	b.busPublish("e3", "a", at(2*time.Second))
	vs, _ = b.subVersions()
	if len(vs) != 3 {
		t.Fatalf("versions after the delete and t's put: %d, want 3", len(vs))
	}
	d, tSince := vs[1].Until, vs[2].Since
	versions("s deleted, t put", v{"s", 2, s2, c3}, v{"s", 3, c3, d}, v{"t", 1, tSince, 0})
	if !(d > c3 && tSince >= d) {
		t.Fatalf("positions: v3 put at %d, delete at %d, t put at %d", c3, d, tSince)
	}
	wantEqual(t, "routed", route(at(3*time.Second)), 3)
	// Each event's seq is within the versions it was published under.
	if !(s2 < seqs["e1"] && seqs["e1"] <= c3 && c3 < seqs["e2"] && seqs["e2"] <= d && tSince < seqs["e3"]) {
		t.Fatalf("seqs %v against positions s v2 %d, v3 %d, delete %d, t %d", seqs, s2, c3, d, tSince)
	}

	// A routing that names another generation than the current one routes
	// nothing; one that names the current one routes.
	b.busPublish("e4", "a", at(3*time.Second))
	gen := b.subGeneration()
	for _, g := range []int64{gen - 1, gen + 1} {
		_, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Now: at(3 * time.Second),
			CheckGeneration: true, Generation: g, Route: matchAll("t")})
		wantErr(t, fmt.Sprintf("BusRoute at generation %d (current %d)", g, gen), err, storage.ErrSubscriptionsChanged)
	}
	wantEqual(t, "e4's routes after refused routings", len(b.busEvent("e4").Routes), 0)

	// A kept version stays while an unrouted event needs it.
	b.putSub(sub("t", `{"n":4}`), at(4*time.Second))
	wantEqual(t, "pruned", b.busPrune(at(time.Hour), 0), 3)
	versions("pruned with e4 unrouted", v{"t", 1, tSince, b.subVersionSince("t")}, v{"t", 2, b.subVersionSince("t"), 0})
	n, err := b.s.BusRoute(b.ctx, &storage.BusRouteParams{Tenant: b.tenant, Now: at(5 * time.Second),
		CheckGeneration: true, Generation: b.subGeneration(), Route: matchAll("t")})
	if err != nil || n != 1 {
		t.Fatalf("BusRoute at the current generation: %d, %v", n, err)
	}
	wantEqual(t, "e4's routes", len(b.busEvent("e4").Routes), 1)
	b.busPrune(at(time.Hour), 0)
	versions("pruned after e4 was routed", v{"t", 2, b.subVersionSince("t"), 0})

	// Another tenant's changes keep nothing of this one.
	o := b.in(b.tenant + "-other")
	o.busPublish("x", "a", t0)
	o.putSub(sub("t", ``), t0)
	vs, _ = o.subVersions()
	wantEqual(t, "another tenant's versions", len(vs), 1)
	versions("after another tenant's put", v{"t", 2, b.subVersionSince("t"), 0})
}

// busPrune prunes what ended before before and returns how many events it
// deleted.
func (b *bundle) busPrune(before time.Time, limit int) int {
	b.t.Helper()
	n, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: b.tenant, Before: before, Limit: limit})
	if err != nil {
		b.t.Fatalf("BusPrune: %v", err)
	}
	return n
}

// subVersionSince returns the Since of subscription id's current version.
func (b *bundle) subVersionSince(id string) int64 {
	b.t.Helper()
	vs, _ := b.subVersions()
	for _, v := range vs {
		if v.Subscription.ID == id && v.Until == 0 {
			return v.Since
		}
	}
	b.t.Fatalf("no current version of %s", id)
	return 0
}

func testBusScripts(b *bundle) {
	t := b.t
	put := func(id, src string, now time.Time) *heraldtype.Script {
		t.Helper()
		s, err := b.s.BusScriptPut(b.ctx, &storage.BusScriptPutParams{Tenant: b.tenant, ID: id, Source: src, Now: now})
		if err != nil {
			t.Fatalf("BusScriptPut(%s): %v", id, err)
		}
		return s
	}
	get := func(id string, version int) (*heraldtype.Script, error) {
		return b.s.BusScriptGet(b.ctx, &storage.BusScriptGetParams{Tenant: b.tenant, ID: id, Version: version})
	}
	check := func(what string, s *heraldtype.Script, id string, version int, src string, created, updated time.Time) {
		t.Helper()
		wantEqual(t, what+" ID", s.ID, id)
		wantEqual(t, what+" Version", s.Version, version)
		wantEqual(t, what+" Source", s.Source, src)
		wantTime(t, what+" CreatedAt", s.CreatedAt, created)
		wantTime(t, what+" UpdatedAt", s.UpdatedAt, updated)
	}
	mustGet := func(id string, version int) *heraldtype.Script {
		t.Helper()
		s, err := get(id, version)
		if err != nil {
			t.Fatalf("BusScriptGet(%s, %d): %v", id, version, err)
		}
		return s
	}
	src1 := "export default (ev) => ev.data.total * 2 // « ünïcode » 'quotes' \"double\"\n"
	src2 := strings.Repeat("// a long script\n", 10000) + "return 2;"
	// Every put and delete of a script changes the subscription
	// generation (the runtimes' script caches are checked against it);
	// reads and refused calls do not.
	gen := b.subGeneration()
	changed := func(what string) {
		t.Helper()
		g := b.subGeneration()
		if g == gen {
			t.Fatalf("generation still %d after %s", g, what)
		}
		gen = g
	}
	unchanged := func(what string) {
		t.Helper()
		wantEqual(t, "generation after "+what, b.subGeneration(), gen)
	}
	check("v1", put("greet", src1, t0), "greet", 1, src1, t0, t0)
	changed("the first put")
	check("v2", put("greet", src2, at(time.Hour)), "greet", 2, src2, t0, at(time.Hour))
	changed("the second put")
	check("latest", mustGet("greet", 0), "greet", 2, src2, t0, at(time.Hour))
	check("version 1", mustGet("greet", 1), "greet", 1, src1, t0, t0)
	check("version 2", mustGet("greet", 2), "greet", 2, src2, t0, at(time.Hour))
	_, err := get("greet", 3)
	wantErr(t, "a version not saved", err, heraldtype.ErrNotFound)
	_, err = get("nope", 0)
	wantErr(t, "an unknown script", err, heraldtype.ErrNotFound)
	_, err = get("greet", -1)
	wantErr(t, "a negative version", err, heraldtype.ErrInvalidArgument)
	unchanged("reads")

	put("alpha", "a1", at(2*time.Hour))
	put("Zeta", "z1", at(2*time.Hour))
	put("alpha", "a2", at(3*time.Hour))
	list := func() []*heraldtype.Script {
		t.Helper()
		ss, err := b.s.BusScriptList(b.ctx, &storage.BusTenantParams{Tenant: b.tenant})
		if err != nil {
			t.Fatalf("BusScriptList: %v", err)
		}
		return ss
	}
	ss := list()
	if len(ss) != 3 {
		t.Fatalf("BusScriptList: %d scripts, want 3", len(ss))
	}
	check("listed Zeta", ss[0], "Zeta", 1, "z1", at(2*time.Hour), at(2*time.Hour))
	check("listed alpha", ss[1], "alpha", 2, "a2", at(2*time.Hour), at(3*time.Hour))
	check("listed greet", ss[2], "greet", 2, src2, t0, at(time.Hour))

	del := func(id string) error {
		return b.s.BusScriptDelete(b.ctx, &storage.BusScriptGetParams{Tenant: b.tenant, ID: id})
	}
	gen = b.subGeneration()
	if err := del("greet"); err != nil {
		t.Fatalf("BusScriptDelete: %v", err)
	}
	changed("a delete")
	for _, v := range []int{0, 1, 2} {
		_, err := get("greet", v)
		wantErr(t, fmt.Sprintf("version %d after delete", v), err, heraldtype.ErrNotFound)
	}
	wantErr(t, "second delete", del("greet"), heraldtype.ErrNotFound)
	wantErr(t, "delete of an unknown script", del("nope"), heraldtype.ErrNotFound)
	unchanged("deletes of no script")
	if ss := list(); len(ss) != 2 || ss[0].ID != "Zeta" || ss[1].ID != "alpha" {
		t.Fatalf("BusScriptList after delete: %d scripts", len(ss))
	}
	// Saved again after a delete, its versions go on: a script id and a
	// version never name two different sources.
	check("saved after delete", put("greet", "v3", at(4*time.Hour)), "greet", 3, "v3", at(4*time.Hour), at(4*time.Hour))
	check("latest after delete", mustGet("greet", 0), "greet", 3, "v3", at(4*time.Hour), at(4*time.Hour))
	for _, v := range []int{1, 2} {
		_, err := get("greet", v)
		wantErr(t, fmt.Sprintf("deleted version %d", v), err, heraldtype.ErrNotFound)
	}

	// Refused: nothing stored.
	_, err = b.s.BusScriptPut(b.ctx, &storage.BusScriptPutParams{Tenant: b.tenant, ID: "bad\x00", Source: "x", Now: t0})
	wantErr(t, "BusScriptPut with a NUL in the id", err, heraldtype.ErrInvalidArgument)
	wantEqual(t, "scripts after a refused put", len(list()), 3)
	gen = b.subGeneration()

	// Another tenant has none.
	other := b.in(b.tenant + "-other")
	ss, err = b.s.BusScriptList(b.ctx, &storage.BusTenantParams{Tenant: other.tenant})
	if err != nil || len(ss) != 0 {
		t.Fatalf("another tenant's scripts: %d, %v", len(ss), err)
	}
	_, err = b.s.BusScriptGet(b.ctx, &storage.BusScriptGetParams{Tenant: other.tenant, ID: "alpha"})
	wantErr(t, "another tenant's get", err, heraldtype.ErrNotFound)
	wantErr(t, "another tenant's delete",
		b.s.BusScriptDelete(b.ctx, &storage.BusScriptGetParams{Tenant: other.tenant, ID: "alpha"}), heraldtype.ErrNotFound)
	unchanged("another tenant's calls")
	check("alpha untouched", mustGet("alpha", 0), "alpha", 2, "a2", at(2*time.Hour), at(3*time.Hour))
}

// ---- dead letters ----

// deadLetterSpec is one dead letter the tests make.
type deadLetterSpec struct {
	event, typ, sub string
	kind            heraldtype.ErrorKind
}

// makeDeadLetters publishes, routes, claims and dead-letters one execution
// per spec, one after the other (so the letters' ids increase in spec
// order), and returns the letters' ids.
func (b *bundle) makeDeadLetters(now time.Time, specs ...deadLetterSpec) []int64 {
	b.t.Helper()
	var ids []int64
	for _, sp := range specs {
		b.busPublishRouted(now, sp.typ, []string{sp.sub}, sp.event)
		c := b.busClaimOne(now, sp.event, sp.sub)
		r := outcome(c, storage.BusDeadLetter, now)
		r.DeadLetter.ErrorKind, r.DeadLetter.Error = sp.kind, "failed: "+sp.event
		b.busFinishOK(now, r)
		id := b.busExec(sp.event, sp.sub).DeadLetter
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			b.t.Fatalf("dead letter ids not increasing: %d after %d", id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	return ids
}

func testBusDeadLetterList(b *bundle) {
	t := b.t
	L := b.makeDeadLetters(t0,
		deadLetterSpec{"d1", "order.placed", "A", heraldtype.ErrorPermanent},
		deadLetterSpec{"d2", "order.placed", "B", heraldtype.ErrorValidation},
		deadLetterSpec{"d3", "user.created", "A", heraldtype.ErrorPermanent},
		deadLetterSpec{"d4", "user.created", "B", heraldtype.ErrorPermission},
		deadLetterSpec{"d5", "order.placed", "A", heraldtype.ErrorValidation},
		deadLetterSpec{"d6", "user.created", "A", heraldtype.ErrorPermanent},
	)
	list := func(what string, f storage.BusDeadLetterFilter, limit int, before int64, want []int64, wantNext int64) {
		t.Helper()
		dls, next := b.deadLetters(f, limit, before)
		wantIDs(t, what, letterIDs(dls), want...)
		wantEqual(t, what+": next", next, wantNext)
	}
	all := storage.BusDeadLetterFilter{}
	list("all", all, 0, 0, []int64{L[5], L[4], L[3], L[2], L[1], L[0]}, 0)
	list("over the cap (read as the cap)", all, 5000, 0, []int64{L[5], L[4], L[3], L[2], L[1], L[0]}, 0)
	list("page 1 of 4", all, 4, 0, []int64{L[5], L[4], L[3], L[2]}, L[2])
	list("page 2 of 4", all, 4, L[2], []int64{L[1], L[0]}, 0)
	list("page 1 of 3", all, 3, 0, []int64{L[5], L[4], L[3]}, L[3])
	list("page 2 of 3 (exactly the rest)", all, 3, L[3], []int64{L[2], L[1], L[0]}, 0)
	list("subscription A", storage.BusDeadLetterFilter{Subscription: "A"}, 0, 0, []int64{L[5], L[4], L[2], L[0]}, 0)
	list("subscription A, page 1", storage.BusDeadLetterFilter{Subscription: "A"}, 2, 0, []int64{L[5], L[4]}, L[4])
	list("subscription A, page 2", storage.BusDeadLetterFilter{Subscription: "A"}, 2, L[4], []int64{L[2], L[0]}, 0)
	list("event type", storage.BusDeadLetterFilter{EventType: "user.created"}, 0, 0, []int64{L[5], L[3], L[2]}, 0)
	list("error kind", storage.BusDeadLetterFilter{ErrorKind: heraldtype.ErrorValidation}, 0, 0, []int64{L[4], L[1]}, 0)
	list("subscription and type", storage.BusDeadLetterFilter{Subscription: "A", EventType: "order.placed"}, 0, 0, []int64{L[4], L[0]}, 0)
	list("ids", storage.BusDeadLetterFilter{IDs: []int64{L[1], L[4], 987654321}}, 0, 0, []int64{L[4], L[1]}, 0)
	list("ids and subscription", storage.BusDeadLetterFilter{IDs: []int64{L[1], L[4]}, Subscription: "B"}, 0, 0, []int64{L[1]}, 0)
	list("an empty id list", storage.BusDeadLetterFilter{IDs: []int64{}}, 0, 0, nil, 0)
	list("through a letter", storage.BusDeadLetterFilter{Through: L[3]}, 0, 0, []int64{L[3], L[2], L[1], L[0]}, 0)
	list("through a letter, subscription A", storage.BusDeadLetterFilter{Through: L[3], Subscription: "A"}, 0, 0, []int64{L[2], L[0]}, 0)
	list("unknown subscription", storage.BusDeadLetterFilter{Subscription: "C"}, 0, 0, nil, 0)
	no, yes := false, true
	list("not reprocessed", storage.BusDeadLetterFilter{Reprocessed: &no}, 0, 0, []int64{L[5], L[4], L[3], L[2], L[1], L[0]}, 0)
	list("reprocessed", storage.BusDeadLetterFilter{Reprocessed: &yes}, 0, 0, nil, 0)
	wantEqual(t, "reprocessed", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L[2]}}, 0, at(time.Hour)), 1)
	list("reprocessed, after one", storage.BusDeadLetterFilter{Reprocessed: &yes}, 0, 0, []int64{L[2]}, 0)
	list("not reprocessed, after one", storage.BusDeadLetterFilter{Reprocessed: &no}, 0, 0, []int64{L[5], L[4], L[3], L[1], L[0]}, 0)
	list("reprocessed letters are listed", all, 0, 0, []int64{L[5], L[4], L[3], L[2], L[1], L[0]}, 0)

	dl := b.deadLetter(L[3])
	wantEqual(t, "letter EventID", dl.EventID, "d4")
	wantEqual(t, "letter ErrorKind", dl.ErrorKind, heraldtype.ErrorPermission)
	wantEqual(t, "letter Error", dl.Error, "failed: d4")
	_, err := b.s.BusDeadLetterGet(b.ctx, &storage.BusDeadLetterGetParams{Tenant: b.tenant, ID: 987654321})
	wantErr(t, "BusDeadLetterGet of an unknown id", err, heraldtype.ErrNotFound)
	for what, p := range map[string]storage.BusDeadLetterListParams{
		"a negative limit":  {Limit: -1},
		"a negative cursor": {Before: -1},
	} {
		p.Tenant = b.tenant
		_, _, err := b.s.BusDeadLetterList(b.ctx, &p)
		wantErr(t, "BusDeadLetterList with "+what, err, heraldtype.ErrInvalidArgument)
	}
}

func testBusDeadLetterReprocess(b *bundle) {
	t := b.t
	L1 := b.makeDeadLetters(t0, deadLetterSpec{"e1", "a", "s", heraldtype.ErrorPermanent})[0]
	wantEqual(t, "reprocessed", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L1}}, 0, at(time.Hour)), 1)
	wantTime(t, "letter ReprocessedAt", b.deadLetter(L1).ReprocessedAt, at(time.Hour))
	x := b.busExec("e1", "s")
	wantEqual(t, "Status", x.Status, heraldtype.ExecQueued)
	wantEqual(t, "Attempts (reset)", x.Attempts, 0)
	wantEqual(t, "Reprocessed", x.Reprocessed, 1)
	wantTime(t, "NextAttemptAt", x.NextAttemptAt, at(time.Hour))
	wantTime(t, "UpdatedAt", x.UpdatedAt, at(time.Hour))
	wantEqual(t, "backlog", b.busBacklog(0), 1)
	// A letter is reprocessed once.
	wantEqual(t, "reprocessed again", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L1}}, 0, at(2*time.Hour)), 0)
	wantEqual(t, "reprocessed again, no filter", b.reprocess(storage.BusDeadLetterFilter{}, 0, at(2*time.Hour)), 0)
	wantTime(t, "ReprocessedAt kept", b.deadLetter(L1).ReprocessedAt, at(time.Hour))
	b.busClaimNone(at(time.Hour).Add(-time.Nanosecond))
	c := b.busClaimOne(at(time.Hour), "e1", "s")
	wantEqual(t, "Attempts after a reprocess", c.Execution.Attempts, 1)
	wantEqual(t, "TakenOver", c.TakenOver, false)
	// It fails again: a second letter; only that one is reprocessed.
	b.busFinishOK(at(time.Hour), outcome(c, storage.BusDeadLetter, at(time.Hour)))
	L2 := b.busExec("e1", "s").DeadLetter
	if L2 == L1 || L2 == 0 {
		t.Fatalf("second letter %d (first %d)", L2, L1)
	}
	wantEqual(t, "second letter's Attempts", b.deadLetter(L2).Attempts, 1)
	wantEqual(t, "reprocessed of both", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L1, L2}}, 0, at(2*time.Hour)), 1)
	wantEqual(t, "Reprocessed", b.busExec("e1", "s").Reprocessed, 2)
	wantTime(t, "first letter's ReprocessedAt", b.deadLetter(L1).ReprocessedAt, at(time.Hour))
	wantTime(t, "second letter's ReprocessedAt", b.deadLetter(L2).ReprocessedAt, at(2*time.Hour))

	// Limit and filter.
	b.makeDeadLetters(t0,
		deadLetterSpec{"x1", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"x2", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"x3", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"y1", "a", "y", heraldtype.ErrorPermanent},
	)
	onX := storage.BusDeadLetterFilter{Subscription: "x"}
	wantEqual(t, "reprocessed with Limit 2", b.reprocess(onX, 2, at(3*time.Hour)), 2)
	wantEqual(t, "reprocessed the rest", b.reprocess(onX, 2, at(3*time.Hour)), 1)
	wantEqual(t, "reprocessed with nothing left", b.reprocess(onX, 2, at(3*time.Hour)), 0)
	wantEqual(t, "y's execution", b.busExec("y1", "y").Status, heraldtype.ExecDeadLettered)
	for _, id := range []string{"x1", "x2", "x3"} {
		wantEqual(t, id+"'s execution", b.busExec(id, "x").Status, heraldtype.ExecQueued)
	}
	_, err := b.s.BusDeadLetterReprocess(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant, Limit: -1, Now: at(4 * time.Hour)})
	wantErr(t, "BusDeadLetterReprocess with a negative limit", err, heraldtype.ErrInvalidArgument)

	// Through fences the selection: z1 fails again after the reprocess
	// took it, and its new letter is past the fence.
	o := b.in(b.tenant + "-fence")
	Z1 := o.makeDeadLetters(t0, deadLetterSpec{"z1", "a", "z", heraldtype.ErrorPermanent})[0]
	fence := storage.BusDeadLetterFilter{Through: Z1}
	wantEqual(t, "reprocessed through z1's letter", o.reprocess(fence, 0, at(5*time.Hour)), 1)
	c = o.busClaimOne(at(5*time.Hour), "z1", "z")
	o.busFinishOK(at(5*time.Hour), outcome(c, storage.BusDeadLetter, at(5*time.Hour)))
	if Z2 := o.busExec("z1", "z").DeadLetter; Z2 <= Z1 {
		t.Fatalf("z1's second letter %d is not after its first %d", Z2, Z1)
	}
	wantEqual(t, "reprocessed through z1's first letter, after it failed again", o.reprocess(fence, 0, at(5*time.Hour)), 0)
	wantEqual(t, "z1 after the fenced reprocess", o.busExec("z1", "z").Status, heraldtype.ExecDeadLettered)
	wantEqual(t, "reprocessed without the fence", o.reprocess(storage.BusDeadLetterFilter{}, 0, at(5*time.Hour)), 1)
	wantEqual(t, "y's execution after a refused reprocess", b.busExec("y1", "y").Status, heraldtype.ExecDeadLettered)
}

// testBusDeadLetterReprocessConcurrent: concurrent reprocesses queue each
// letter's execution once.
func testBusDeadLetterReprocessConcurrent(b *bundle) {
	t := b.t
	var specs []deadLetterSpec
	for i := range 10 {
		specs = append(specs, deadLetterSpec{fmt.Sprintf("e%d", i), "a", "s", heraldtype.ErrorPermanent})
	}
	L := b.makeDeadLetters(t0, specs...)
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := storage.BusDeadLetterFilter{}
			if i%2 == 0 {
				f.IDs = L
			}
			for {
				n, err := b.s.BusDeadLetterReprocess(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant, Filter: f,
					Limit: 3, Now: at(time.Hour)})
				if err != nil {
					t.Errorf("BusDeadLetterReprocess: %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	total += b.reprocess(storage.BusDeadLetterFilter{}, 0, at(time.Hour))
	wantEqual(t, "letters reprocessed", total, len(L))
	for _, sp := range specs {
		x := b.busExec(sp.event, "s")
		wantEqual(t, sp.event+" Reprocessed", x.Reprocessed, 1)
		wantEqual(t, sp.event+" Status", x.Status, heraldtype.ExecQueued)
	}
	wantEqual(t, "executions claimed", len(b.busClaim(at(time.Hour), 100)), len(L))
}

func testBusDeadLetterDelete(b *bundle) {
	t := b.t
	L := b.makeDeadLetters(t0,
		deadLetterSpec{"e1", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"e2", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"e3", "a", "x", heraldtype.ErrorPermanent},
		deadLetterSpec{"e4", "a", "y", heraldtype.ErrorPermanent},
	)
	del := func(f storage.BusDeadLetterFilter, limit int) int {
		t.Helper()
		n, err := b.s.BusDeadLetterDelete(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant, Filter: f, Limit: limit, Now: at(time.Hour)})
		if err != nil {
			t.Fatalf("BusDeadLetterDelete: %v", err)
		}
		return n
	}
	wantEqual(t, "deleted by id", del(storage.BusDeadLetterFilter{IDs: []int64{L[0]}}, 0), 1)
	_, err := b.s.BusDeadLetterGet(b.ctx, &storage.BusDeadLetterGetParams{Tenant: b.tenant, ID: L[0]})
	wantErr(t, "BusDeadLetterGet after delete", err, heraldtype.ErrNotFound)
	wantEqual(t, "execution after its letter's delete", b.busExec("e1", "x").Status, heraldtype.ExecDeadLettered)
	// A deleted letter cannot be reprocessed.
	wantEqual(t, "reprocess of a deleted letter", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L[0]}}, 0, at(time.Hour)), 0)
	wantEqual(t, "execution after reprocessing a deleted letter", b.busExec("e1", "x").Status, heraldtype.ExecDeadLettered)
	wantEqual(t, "deleted with Limit 1", del(storage.BusDeadLetterFilter{Subscription: "x"}, 1), 1)
	wantEqual(t, "deleted the rest of x", del(storage.BusDeadLetterFilter{Subscription: "x"}, 0), 1)
	wantEqual(t, "deleted again", del(storage.BusDeadLetterFilter{Subscription: "x"}, 0), 0)
	dls, _ := b.deadLetters(storage.BusDeadLetterFilter{}, 0, 0)
	wantIDs(t, "letters left", letterIDs(dls), L[3])
	_, err = b.s.BusDeadLetterDelete(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant, Limit: -1})
	wantErr(t, "BusDeadLetterDelete with a negative limit", err, heraldtype.ErrInvalidArgument)
	// Another tenant deletes nothing of this one.
	wantEqual(t, "reprocessed in another tenant", b.in(b.tenant+"-other").reprocess(storage.BusDeadLetterFilter{IDs: L}, 0, at(time.Hour)), 0)
	n, err := b.s.BusDeadLetterDelete(b.ctx, &storage.BusDeadLetterOpParams{Tenant: b.tenant + "-other", Filter: storage.BusDeadLetterFilter{IDs: L}})
	if err != nil || n != 0 {
		t.Fatalf("BusDeadLetterDelete in another tenant: %d, %v", n, err)
	}
	b.deadLetter(L[3])
}

// ---- reads ----

// testBusEventGet: an event with its routes, each with its execution as it
// stands.
func testBusEventGet(b *bundle) {
	t := b.t
	b.busPublish("e1", "order.placed", t0)
	b.busPublish("e2", "order.placed", t0)
	b.busRoute(at(time.Second), 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		if ev.ID == "e2" {
			return nil
		}
		return []storage.BusRouteDecision{{Subscription: "A", Matched: true}, {Subscription: "B", Matched: true},
			{Subscription: "C", FilteredBy: "data.total"}}
	})
	cs := b.busClaim(at(2*time.Second), 10)
	bySub := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		bySub[c.Execution.Subscription] = c
	}
	okR := outcome(bySub["A"], storage.BusSucceeded, at(2*time.Second))
	okR.Attempt.Result = json.RawMessage(`[1,2]`)
	b.busFinishOK(at(3*time.Second), okR, outcome(bySub["B"], storage.BusDeadLetter, at(2*time.Second)))

	ev := b.busEvent("e1")
	wantEqual(t, "Fate", ev.Fate, heraldtype.BusFate(""))
	wantTime(t, "RoutedAt", ev.RoutedAt, at(time.Second))
	rs := b.busRoutes("e1")
	wantEqual(t, "routes", len(rs), 3)
	a, bb, c := rs["A"], rs["B"], rs["C"]
	if a == nil || bb == nil || c == nil || a.Execution == nil || bb.Execution == nil || c.Execution != nil {
		t.Fatalf("routes %+v", ev.Routes)
	}
	wantEqual(t, "A Status", a.Execution.Status, heraldtype.ExecSucceeded)
	wantJSON(t, "A Result", a.Execution.Result, `[1,2]`)
	wantEqual(t, "A Attempts", a.Execution.Attempts, 1)
	wantEqual(t, "A id", a.Execution.ID, bySub["A"].Execution.ID)
	wantTime(t, "A CreatedAt", a.Execution.CreatedAt, at(time.Second))
	wantTime(t, "A UpdatedAt", a.Execution.UpdatedAt, at(3*time.Second))
	wantEqual(t, "B Status", bb.Execution.Status, heraldtype.ExecDeadLettered)
	wantEqual(t, "B LastError", bb.Execution.LastError, "gave up")
	if bb.Execution.DeadLetter == 0 {
		t.Fatal("B without its letter")
	}
	wantEqual(t, "C Matched", c.Matched, false)
	wantEqual(t, "C FilteredBy", c.FilteredBy, "data.total")
	e2 := b.busEvent("e2")
	if len(e2.Routes) != 0 || e2.RoutedAt.IsZero() {
		t.Fatalf("no-match event: %+v", e2)
	}
	_, err := b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant + "-other", ID: "e1"})
	wantErr(t, "BusEventGet in another tenant", err, heraldtype.ErrNotFound)
}

func testBusAttemptList(b *bundle) {
	t := b.t
	b.busPublishRouted(t0, "a", []string{"X", "Y"}, "e1")
	b.busPublishRouted(t0, "a", []string{"X"}, "e2")
	cs := b.busClaim(t0, 10)
	by := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		by[c.Event.ID+"/"+c.Execution.Subscription] = c
	}
	if len(by) != 3 {
		t.Fatalf("claimed %v", claimedIDs(cs))
	}
	// a1: X/e1 retries, a2: Y/e1, a3: X/e2, a4: X/e1 retries, a5: X/e1.
	b.busFinishOK(t0, outcome(by["e1/X"], storage.BusRetry, t0))
	b.busFinishOK(t0, outcome(by["e1/Y"], storage.BusSucceeded, t0))
	b.busFinishOK(t0, outcome(by["e2/X"], storage.BusSucceeded, t0))
	c := b.busClaimOne(at(time.Second), "e1", "X")
	b.busFinishOK(at(time.Second), outcome(c, storage.BusRetry, at(time.Second)))
	c = b.busClaimOne(at(2*time.Second), "e1", "X")
	b.busFinishOK(at(2*time.Second), outcome(c, storage.BusSucceeded, at(2*time.Second)))

	xe1 := by["e1/X"].Execution.ID
	all, next := b.attempts(storage.BusAttemptListParams{Execution: xe1})
	wantEqual(t, "next", next, int64(0))
	if len(all) != 3 {
		t.Fatalf("X/e1's attempts: %d, want 3", len(all))
	}
	for i, a := range all {
		wantEqual(t, fmt.Sprintf("attempt %d Number", i), a.Number, i+1)
		wantEqual(t, fmt.Sprintf("attempt %d Execution", i), a.Execution, xe1)
		if i > 0 && a.ID <= all[i-1].ID {
			t.Fatalf("attempt ids not increasing: %v", attemptIDs(all))
		}
	}
	a1, a4, a5 := all[0].ID, all[1].ID, all[2].ID
	ye1, _ := b.attempts(storage.BusAttemptListParams{Execution: by["e1/Y"].Execution.ID})
	xe2, _ := b.attempts(storage.BusAttemptListParams{Execution: by["e2/X"].Execution.ID})
	if len(ye1) != 1 || len(xe2) != 1 {
		t.Fatalf("Y/e1: %d attempts, X/e2: %d", len(ye1), len(xe2))
	}
	a2, a3 := ye1[0].ID, xe2[0].ID
	if !(a1 < a2 && a2 < a3 && a3 < a4) {
		t.Fatalf("attempt ids not in finish order: %d %d %d %d %d", a1, a2, a3, a4, a5)
	}
	list := func(what string, p storage.BusAttemptListParams, want []int64, wantNext int64) {
		t.Helper()
		as, next := b.attempts(p)
		wantIDs(t, what, attemptIDs(as), want...)
		wantEqual(t, what+": next", next, wantNext)
	}
	list("by event", storage.BusAttemptListParams{EventID: "e1"}, []int64{a1, a2, a4, a5}, 0)
	list("by subscription", storage.BusAttemptListParams{Subscription: "X"}, []int64{a1, a3, a4, a5}, 0)
	list("by event and subscription", storage.BusAttemptListParams{EventID: "e1", Subscription: "X"}, []int64{a1, a4, a5}, 0)
	list("by event and another's execution", storage.BusAttemptListParams{EventID: "e2", Execution: xe1}, nil, 0)
	list("subscription X, page 1 of 2", storage.BusAttemptListParams{Subscription: "X", Limit: 2}, []int64{a1, a3}, a3)
	list("subscription X, page 2 of 2 (exactly the rest)", storage.BusAttemptListParams{Subscription: "X", Limit: 2, After: a3}, []int64{a4, a5}, 0)
	list("subscription X, page 1 of 3", storage.BusAttemptListParams{Subscription: "X", Limit: 3}, []int64{a1, a3, a4}, a4)
	list("subscription X, page 2 of 3", storage.BusAttemptListParams{Subscription: "X", Limit: 3, After: a4}, []int64{a5}, 0)
	list("over the cap (read as the cap)", storage.BusAttemptListParams{EventID: "e1", Limit: 5000}, []int64{a1, a2, a4, a5}, 0)
	list("unknown event", storage.BusAttemptListParams{EventID: "nope"}, nil, 0)
	as, _, err := b.s.BusAttemptList(b.ctx, &storage.BusAttemptListParams{Tenant: b.tenant + "-other", Execution: xe1})
	if err != nil || len(as) != 0 {
		t.Fatalf("another tenant's attempts of X/e1: %d, %v", len(as), err)
	}
	for what, p := range map[string]storage.BusAttemptListParams{
		"no filter":          {},
		"a negative limit":   {EventID: "e1", Limit: -1},
		"a negative cursor":  {EventID: "e1", After: -1},
		"a NUL in the event": {EventID: "e\x00"},
	} {
		p.Tenant = b.tenant
		_, _, err := b.s.BusAttemptList(b.ctx, &p)
		wantErr(t, "BusAttemptList with "+what, err, heraldtype.ErrInvalidArgument)
	}
}

// ---- prune and backlog ----

func testBusPrune(b *bundle) {
	t := b.t
	for _, id := range []string{"e1", "e2", "e3", "e6", "e7"} {
		b.busPublish(id, "a", t0)
	}
	routedAt := at(time.Minute)
	b.busRoute(routedAt, 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		switch ev.ID {
		case "e3":
			return nil
		case "e7":
			return []storage.BusRouteDecision{{Subscription: "s", FilteredBy: "f"}}
		}
		return matchAll("s")(ev)
	})
	cs := b.busClaim(routedAt, 10)
	by := map[string]*storage.BusClaimed{}
	for _, c := range cs {
		by[c.Event.ID] = c
	}
	if len(by) != 3 {
		t.Fatalf("claimed %v", claimedIDs(cs))
	}
	b.busFinishOK(routedAt, outcome(by["e1"], storage.BusSucceeded, routedAt),
		func() storage.BusResult {
			r := outcome(by["e2"], storage.BusRetry, routedAt)
			r.RetryAt = at(10 * time.Hour)
			return r
		}(),
		outcome(by["e6"], storage.BusDeadLetter, routedAt))
	L6 := b.busExec("e6", "s").DeadLetter
	b.busPublish("e5", "a", at(2*time.Minute))
	b.busRoute(at(time.Hour), 0, func(*storage.BusEvent) []storage.BusRouteDecision { return nil })
	b.busPublish("e4", "a", at(2*time.Hour)) // never routed

	prune := func(before time.Time, limit int) int {
		t.Helper()
		n, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: b.tenant, Before: before, Limit: limit})
		if err != nil {
			t.Fatalf("BusPrune: %v", err)
		}
		return n
	}
	// Another tenant's prune deletes nothing here.
	if n, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: b.tenant + "-other", Before: at(100 * time.Hour)}); err != nil || n != 0 {
		t.Fatalf("BusPrune in another tenant: %d, %v", n, err)
	}
	wantEqual(t, "pruned before the routes", prune(routedAt, 0), 0)
	wantEqual(t, "pruned", prune(at(30*time.Minute), 0), 4) // e1, e3, e6, e7
	for _, id := range []string{"e1", "e3", "e6", "e7"} {
		_, err := b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant, ID: id})
		wantErr(t, "BusEventGet of pruned "+id, err, heraldtype.ErrNotFound)
		as, _ := b.attempts(storage.BusAttemptListParams{EventID: id})
		wantEqual(t, "attempts of pruned "+id, len(as), 0)
	}
	as, _ := b.attempts(storage.BusAttemptListParams{Execution: by["e1"].Execution.ID})
	wantEqual(t, "attempts of e1's execution", len(as), 0)
	for _, id := range []string{"e2", "e4", "e5"} {
		b.busEvent(id)
	}
	wantEqual(t, "e2's execution", b.busExec("e2", "s").Status, heraldtype.ExecRetrying)
	// The dead letter is kept, with the event's data; its execution is
	// gone, so it can no longer be reprocessed.
	dl := b.deadLetter(L6)
	wantEqual(t, "kept letter's EventID", dl.EventID, "e6")
	wantJSON(t, "kept letter's EventData", dl.EventData, string(busData("e6")))
	wantEqual(t, "reprocess of a pruned event's letter", b.reprocess(storage.BusDeadLetterFilter{IDs: []int64{L6}}, 0, at(3*time.Hour)), 0)
	wantTime(t, "its ReprocessedAt", b.deadLetter(L6).ReprocessedAt, time.Time{})
	wantEqual(t, "pruned again", prune(at(30*time.Minute), 0), 0)
	// Routed before Before, strictly.
	wantEqual(t, "pruned at e5's route", prune(at(time.Hour), 0), 0)
	wantEqual(t, "pruned after e5's route", prune(at(time.Hour+time.Nanosecond), 0), 1)
	// e2 is prunable once its execution ended.
	c := b.busClaimOne(at(10*time.Hour), "e2", "s")
	b.busFinishOK(at(10*time.Hour), outcome(c, storage.BusSucceeded, at(10*time.Hour)))
	wantEqual(t, "pruned e2", prune(at(100*time.Hour), 0), 1)
	b.busEvent("e4") // unrouted: never pruned
	wantEqual(t, "backlog", b.busBacklog(0), 1)

	// Limit.
	l := b.in(b.tenant + "-limit")
	l.busPublishRouted(t0, "a", nil, "n1", "n2", "n3")
	prunel := func(limit int) int {
		t.Helper()
		n, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: l.tenant, Before: at(time.Hour), Limit: limit})
		if err != nil {
			t.Fatalf("BusPrune: %v", err)
		}
		return n
	}
	wantEqual(t, "pruned with Limit 2", prunel(2), 2)
	wantEqual(t, "pruned the rest", prunel(2), 1)
	_, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: b.tenant, Before: at(time.Hour), Limit: -1})
	wantErr(t, "BusPrune with a negative limit", err, heraldtype.ErrInvalidArgument)
}

func testBusBacklog(b *bundle) {
	t := b.t
	for _, id := range []string{"e1", "e2", "e3"} {
		b.busPublish(id, "a", t0)
	}
	wantEqual(t, "three unrouted", b.busBacklog(0), 3)
	wantEqual(t, "with Limit 2", b.busBacklog(2), 2)
	wantEqual(t, "with Limit 3", b.busBacklog(3), 3)
	b.busRoute(t0, 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		switch ev.ID {
		case "e1":
			return matchAll("x", "y")(ev)
		case "e2":
			return nil
		}
		return []storage.BusRouteDecision{{Subscription: "x", FilteredBy: "f"}}
	})
	wantEqual(t, "two executions", b.busBacklog(0), 2)
	b.busPublish("e4", "a", t0)
	wantEqual(t, "two executions, one unrouted", b.busBacklog(0), 3)
	cs := b.busClaim(t0, 2)
	wantEqual(t, "running executions count", b.busBacklog(0), 3)
	b.busFinishOK(t0, outcome(cs[0], storage.BusRetry, at(time.Hour)))
	wantEqual(t, "retrying executions count", b.busBacklog(0), 3)
	b.busFinishOK(t0, outcome(cs[1], storage.BusDeadLetter, t0))
	wantEqual(t, "dead-lettered executions do not", b.busBacklog(0), 2)
	c := b.busClaimOne(at(time.Hour), cs[0].Event.ID, cs[0].Execution.Subscription)
	b.busFinishOK(at(time.Hour), outcome(c, storage.BusSucceeded, at(time.Hour)))
	wantEqual(t, "succeeded executions do not", b.busBacklog(0), 1)
	wantEqual(t, "another tenant's", b.in(b.tenant+"-other").busBacklog(0), 0)
	_, err := b.s.BusBacklog(b.ctx, &storage.BusBacklogParams{Tenant: b.tenant, Limit: -1})
	wantErr(t, "BusBacklog with a negative limit", err, heraldtype.ErrInvalidArgument)
}

// ---- work: TenantsReady, NextWake, wake-ups ----

func testBusTenantsReady(b *bundle) {
	t := b.t
	name := func(s string) string { return b.tenant + "-" + s }
	all := []string{name("idle"), name("unrouted"), name("queued"), name("future"), name("retrying"),
		name("running"), name("ended"), name("turns")}
	for _, tn := range all {
		b.ensureTenant(tn)
	}
	b.in(name("unrouted")).busPublish("e", "a", t0)
	b.in(name("queued")).busPublishRouted(t0, "a", []string{"s"}, "e")
	b.in(name("future")).busPublish("e", "a", t0)
	b.in(name("future")).busRoute(at(time.Hour), 0, matchAll("s")) // due at 1h
	rb := b.in(name("retrying"))
	rb.busPublishRouted(t0, "a", []string{"s"}, "e")
	r := outcome(rb.busClaim(t0, 1)[0], storage.BusRetry, t0)
	r.RetryAt = at(time.Hour)
	rb.busFinishOK(t0, r)
	runb := b.in(name("running"))
	runb.busPublishRouted(t0, "a", []string{"s"}, "e")
	runb.busClaim(t0, 1) // leased for a minute
	eb := b.in(name("ended"))
	eb.busPublishRouted(t0, "a", []string{"s"}, "e")
	eb.busFinishOK(t0, outcome(eb.busClaim(t0, 1)[0], storage.BusSucceeded, t0))
	b.in(name("turns")).create("i", t0)

	ready := func(kinds storage.WorkKind, now time.Time, tenants []string) []string {
		t.Helper()
		got, err := b.s.TenantsReady(b.ctx, &storage.TenantsReadyParams{Tenants: tenants, Kinds: kinds, Now: now})
		if err != nil {
			t.Fatalf("TenantsReady: %v", err)
		}
		return b.ownTenants(got)
	}
	now := at(time.Second)
	wantStrings(t, "bus, registered", ready(storage.WorkBus, now, nil), name("queued"), name("unrouted"))
	wantStrings(t, "bus, listed", ready(storage.WorkBus, now, all), name("queued"), name("unrouted"))
	wantStrings(t, "bus, listed in part", ready(storage.WorkBus, now, []string{name("queued"), name("idle")}), name("queued"))
	wantStrings(t, "turns", ready(storage.WorkTurns, now, all), name("turns"))
	wantStrings(t, "activities", ready(storage.WorkActivities, now, all))
	wantStrings(t, "all kinds", ready(storage.WorkAll, now, all), name("queued"), name("turns"), name("unrouted"))
	wantStrings(t, "zero kinds is all", ready(0, now, all), name("queued"), name("turns"), name("unrouted"))
	wantStrings(t, "bus and turns", ready(storage.WorkBus|storage.WorkTurns, now, nil), name("queued"), name("turns"), name("unrouted"))
	// At the lease's end it is still live; after it the execution is due.
	wantStrings(t, "bus at the lease's end", ready(storage.WorkBus, at(time.Minute), nil), name("queued"), name("unrouted"))
	wantStrings(t, "bus after the lease", ready(storage.WorkBus, at(time.Minute+time.Nanosecond), nil),
		name("queued"), name("running"), name("unrouted"))
	wantStrings(t, "bus at 1h", ready(storage.WorkBus, at(time.Hour), nil),
		name("future"), name("queued"), name("retrying"), name("running"), name("unrouted"))
	wantStrings(t, "bus just before 1h", ready(storage.WorkBus, at(time.Hour-time.Nanosecond), all),
		name("queued"), name("running"), name("unrouted"))
	// Routing and claiming take the work away.
	b.in(name("unrouted")).busRoute(at(time.Hour), 0, func(*storage.BusEvent) []storage.BusRouteDecision { return nil })
	b.in(name("queued")).busClaim(at(time.Hour), 1)
	wantStrings(t, "bus after a route and a claim", ready(storage.WorkBus, at(time.Hour), nil),
		name("future"), name("retrying"), name("running"))
}

func testBusNextWake(b *bundle) {
	b.busPublishRouted(t0, "a", []string{"s"}, "e1")
	b.busClaimP(t0, 1, 30*time.Minute) // lease until 30m
	b.busPublishRouted(t0, "a", []string{"s"}, "e2")
	r := outcome(b.busClaim(t0, 1)[0], storage.BusRetry, t0)
	r.RetryAt = at(2 * time.Hour)
	b.busFinishOK(t0, r)
	b.busPublish("e3", "a", t0)
	b.busRoute(at(time.Hour), 0, matchAll("s")) // queued, due at 1h
	b.wantNextWake(t0, at(30*time.Minute))
	b.wantNextWake(at(30*time.Minute), at(time.Hour))
	b.wantNextWake(at(time.Hour), at(2*time.Hour))
	b.wantNoWake(at(2 * time.Hour))
	// Another tenant's wakes are its own.
	b.in(b.tenant + "-other").wantNoWake(t0)
}

// testBusNextWakeAllTenants: NextWake with AllTenants includes the bus's
// times. It works between t0 and testNextWakeAllTenants's times, so that
// on a shared store the other subtests' wakes are before its Now and that
// test's after its last check.
func testBusNextWakeAllTenants(b *bundle) {
	t := b.t
	base := t0.Add(500 * 24 * time.Hour)
	x, y := b.in(b.tenant+"-x"), b.in(b.tenant+"-y")
	for _, c := range []*bundle{x, y} {
		b.ensureTenant(c.tenant)
	}
	x.busPublishRouted(base, "a", []string{"s"}, "e")
	r := outcome(x.busClaim(base, 1)[0], storage.BusRetry, base)
	r.RetryAt = base.Add(time.Hour)
	x.busFinishOK(base, r)
	y.busPublish("e", "a", base)
	y.busRoute(base.Add(2*time.Hour), 0, matchAll("s"))
	y.busPublishRouted(base, "a", []string{"s"}, "f")
	y.busClaimP(base, 1, 3*time.Hour) // takes f (y's e is not due yet): lease until base+3h
	wake := func(now time.Time) (time.Time, bool) {
		t.Helper()
		got, ok, err := b.s.NextWake(b.ctx, &storage.NextWakeParams{Tenant: "ignored", AllTenants: true, Now: now})
		if err != nil {
			t.Fatalf("NextWake(AllTenants): %v", err)
		}
		return got, ok
	}
	for _, w := range []struct{ now, want time.Time }{
		{base, base.Add(time.Hour)},
		{base.Add(time.Hour), base.Add(2 * time.Hour)},
		{base.Add(2 * time.Hour), base.Add(3 * time.Hour)},
	} {
		if got, ok := wake(w.now); !ok || !got.Equal(w.want) {
			t.Fatalf("NextWake(AllTenants, %v) = %v, %v; want %v", w.now.Sub(base), got.Sub(base), ok, w.want.Sub(base))
		}
	}
	if got, ok := wake(base.Add(3 * time.Hour)); ok && !got.After(base.Add(24*time.Hour)) {
		t.Fatalf("NextWake(AllTenants) after every bus time = %v", got.Sub(base))
	}
}

// testBusTurnCommitPublish: a turn's Publish is stored in the turn's
// transaction, as BusPublish stores it; a commit that fails publishes
// nothing.
func testBusTurnCommitPublish(b *bundle) {
	t := b.t
	b.create("i", t0)
	pub := func(id, typ string) storage.BusPublishEvent {
		return storage.BusPublishEvent{ID: id, Type: typ, Data: busData(id), Source: "workflow:i"}
	}
	turn := b.claimOne("i", t0)
	p := b.commitParams(turn, at(time.Second))
	p.Publish = []storage.BusPublishEvent{pub("p1", "order.placed"), pub("p2", "order.shipped")}
	b.commit(p)
	p1 := b.busEvent("p1")
	wantEqual(t, "Type", p1.Type, "order.placed")
	wantEqual(t, "Source", p1.Source, "workflow:i")
	wantJSON(t, "Data", p1.Data, string(busData("p1")))
	wantTime(t, "PublishedAt", p1.PublishedAt, at(time.Second))
	wantTime(t, "RoutedAt", p1.RoutedAt, time.Time{})
	var routed []string
	b.busRoute(at(2*time.Second), 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		routed = append(routed, ev.ID)
		return nil
	})
	wantStrings(t, "routed", routed, "p1", "p2")

	// A commit that fails publishes nothing.
	b.raise("i", "r1", "go", at(3*time.Second))
	turn = b.claimOne("i", at(3*time.Second))
	lost := b.commitParams(turn, at(3*time.Second))
	lost.LockToken = "not-the-token"
	lost.Publish = []storage.BusPublishEvent{pub("p3", "x")}
	wantErr(t, "commit with a lost lease", errOf(b.s.TurnCommit(b.ctx, lost)), heraldtype.ErrLeaseLost)
	dupSeq := b.commitParams(turn, at(3*time.Second))
	dupSeq.NewEvents = []history.Event{ev(1, history.ExecutionCompleted, at(3*time.Second))} // seq 1 is taken
	dupSeq.Publish = []storage.BusPublishEvent{pub("p3", "x")}
	if _, err := b.s.TurnCommit(b.ctx, dupSeq); err == nil {
		t.Fatal("commit with a taken seq succeeded")
	}
	badID := b.commitParams(turn, at(3*time.Second))
	badID.Publish = []storage.BusPublishEvent{pub("p3", "x"), pub("p\x00", "x")}
	wantErr(t, "commit publishing a NUL id", errOf(b.s.TurnCommit(b.ctx, badID)), heraldtype.ErrInvalidArgument)
	badType := b.commitParams(turn, at(3*time.Second))
	badType.Publish = []storage.BusPublishEvent{pub("p3", "x"), pub("p4", "")}
	wantErr(t, "commit publishing an empty type", errOf(b.s.TurnCommit(b.ctx, badType)), heraldtype.ErrInvalidArgument)
	dupTask := b.commitParams(turn, at(3*time.Second))
	dupTask.Activities = []storage.ActivityTask{{TaskSeq: 5, Name: "w"}, {TaskSeq: 5, Name: "w"}} // one task twice
	dupTask.Publish = []storage.BusPublishEvent{pub("p3", "x")}
	if _, err := b.s.TurnCommit(b.ctx, dupTask); err == nil {
		t.Fatal("commit scheduling one task twice succeeded")
	}
	_, err := b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant, ID: "p3"})
	wantErr(t, "an event of failed commits", err, heraldtype.ErrNotFound)
	wantEqual(t, "backlog after failed commits", b.busBacklog(0), 0)

	// Duplicates are skipped, and so are ids of another type.
	again := b.commitParams(turn, at(4*time.Second))
	dup := pub("p1", "order.placed")
	dup.Data = json.RawMessage(`"changed"`)
	again.Publish = []storage.BusPublishEvent{dup, pub("p2", "another.type"), pub("p3", "x")}
	b.commit(again)
	wantJSON(t, "p1 after a duplicate", b.busEvent("p1").Data, string(busData("p1")))
	wantTime(t, "p1's PublishedAt", b.busEvent("p1").PublishedAt, at(time.Second))
	wantEqual(t, "p2 after an id of another type", b.busEvent("p2").Type, "order.shipped")
	wantTime(t, "p3's PublishedAt", b.busEvent("p3").PublishedAt, at(4*time.Second))
	wantEqual(t, "backlog", b.busBacklog(0), 1)
	wantEqual(t, "history", len(b.history("i", 1)), 1)

	// Published with the instance's end, in the same transaction.
	b.raise("i", "r2", "go", at(5*time.Second))
	end := b.commitParams(b.claimOne("i", at(5*time.Second)), at(5*time.Second))
	end.Status = heraldtype.StatusCompleted
	end.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, at(5*time.Second))}
	end.Publish = []storage.BusPublishEvent{pub("done", "order.done")}
	b.commit(end)
	wantEqual(t, "status", b.get("i").Status, heraldtype.StatusCompleted)
	wantTime(t, "done's PublishedAt", b.busEvent("done").PublishedAt, at(5*time.Second))
}

// testBusWakeups: publishing, a route that queues, a retry, a reprocess
// and a commit that publishes wake the tenant's bus workers.
func testBusWakeups(b *bundle) {
	t := b.t
	ch, cancel := b.s.SubscribeKinds(b.tenant, storage.WorkBus)
	defer cancel()
	other := b.in(b.tenant + "-other")
	chOther, cancelOther := b.s.SubscribeKinds(other.tenant, storage.WorkAll)
	defer cancelOther()
	all, drainAll, cancelAll := b.s.SubscribeAll(storage.WorkBus)
	defer cancelAll()
	wait := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no WorkBus signal after %s", what)
		}
	}
	drain := func() {
		select {
		case <-ch:
		default:
		}
	}
	b.busPublish("e1", "a", t0)
	wait("BusPublish")
	wantDrained(b, "SubscribeAll after BusPublish", all, drainAll, b.tenant)
	drain()
	b.busRoute(t0, 0, matchAll("s"))
	wait("BusRoute that queued an execution")
	drain()
	c := b.busClaim(t0, 1)[0]
	drain()
	r := outcome(c, storage.BusRetry, t0)
	r.RetryAt = at(time.Hour)
	b.busFinishOK(t0, r)
	wait("BusFinish with a retry")
	c = b.busClaimOne(at(time.Hour), "e1", "s")
	b.busFinishOK(at(time.Hour), outcome(c, storage.BusDeadLetter, at(time.Hour)))
	drain()
	b.reprocess(storage.BusDeadLetterFilter{}, 0, at(time.Hour))
	wait("BusDeadLetterReprocess")
	b.create("i", t0)
	p := b.commitParams(b.claimOne("i", t0), t0)
	drain()
	p.Publish = []storage.BusPublishEvent{{ID: "p1", Type: "a", Data: busData("p1"), Source: "workflow:i"}}
	b.commit(p)
	wait("TurnCommit with Publish")
	select {
	case <-chOther:
		t.Fatal("another tenant's subscriber was woken")
	default:
	}
}

// ---- isolation and refusals ----

// testBusTenantIsolation: another tenant's ids are invisible and
// untouchable through every method.
func testBusTenantIsolation(b *bundle) {
	t := b.t
	a, o := b.in(b.tenant+"-a"), b.in(b.tenant+"-o")
	a.busPublishRouted(t0, "a", []string{"s"}, "e1", "e2")
	o.busPublish("e1", "other.type", t0) // the same id: no conflict
	a.putSub(heraldtype.Subscription{ID: "s", Pattern: "a", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}, t0)
	if _, err := b.s.BusScriptPut(b.ctx, &storage.BusScriptPutParams{Tenant: a.tenant, ID: "js", Source: "1", Now: t0}); err != nil {
		t.Fatal(err)
	}
	cs := a.busClaim(t0, 2)
	a.busFinishOK(t0, outcome(cs[1], storage.BusDeadLetter, t0))
	c := cs[0]
	letter := a.busExec(cs[1].Event.ID, "s").DeadLetter

	// o's route sees only its own event; its claims nothing of a's.
	var seen []string
	o.busRoute(t0, 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		seen = append(seen, ev.ID+":"+ev.Type)
		return nil
	})
	wantStrings(t, "o's route", seen, "e1:other.type")
	o.busClaimNone(at(time.Hour))
	// a's execution, token, letter and attempts through o.
	errs, err := b.s.BusFinish(b.ctx, &storage.BusFinishParams{Tenant: o.tenant, Now: t0,
		Results: []storage.BusResult{outcome(c, storage.BusSucceeded, t0)}})
	if err != nil || len(errs) != 1 {
		t.Fatalf("BusFinish in o: %v, %v", errs, err)
	}
	wantErr(t, "BusFinish of a's execution in o", errs[0], heraldtype.ErrLeaseLost)
	wantErr(t, "BusHeartbeat of a's execution in o", b.s.BusHeartbeat(b.ctx, &storage.BusHeartbeatParams{Tenant: o.tenant,
		Execution: c.Execution.ID, LockToken: c.LockToken, LeaseUntil: at(time.Hour)}), heraldtype.ErrLeaseLost)
	_, err = b.s.BusDeadLetterGet(b.ctx, &storage.BusDeadLetterGetParams{Tenant: o.tenant, ID: letter})
	wantErr(t, "BusDeadLetterGet of a's letter in o", err, heraldtype.ErrNotFound)
	dls, _ := o.deadLetters(storage.BusDeadLetterFilter{}, 0, 0)
	wantEqual(t, "o's letters", len(dls), 0)
	wantEqual(t, "o reprocessing a's letter", o.reprocess(storage.BusDeadLetterFilter{IDs: []int64{letter}}, 0, t0), 0)
	as, _ := o.attempts(storage.BusAttemptListParams{Execution: cs[1].Execution.ID})
	wantEqual(t, "o's attempts of a's execution", len(as), 0)
	as, _ = o.attempts(storage.BusAttemptListParams{Subscription: "s"})
	wantEqual(t, "o's attempts of a's subscription", len(as), 0)
	_, err = b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: o.tenant, ID: "e2"})
	wantErr(t, "BusEventGet of a's event in o", err, heraldtype.ErrNotFound)
	wantEqual(t, "o's e1 has no routes", len(o.busEvent("e1").Routes), 0)
	wantEqual(t, "o's backlog", o.busBacklog(0), 0)
	if n, err := b.s.BusPrune(b.ctx, &storage.BusPruneParams{Tenant: o.tenant, Before: at(100 * time.Hour)}); err != nil || n != 1 {
		t.Fatalf("o's prune: %d, %v; want its own event only", n, err)
	}
	_, err = b.s.BusSubscriptionGet(b.ctx, &storage.BusSubscriptionGetParams{Tenant: o.tenant, ID: "s"})
	wantErr(t, "BusSubscriptionGet of a's subscription in o", err, heraldtype.ErrNotFound)
	_, err = b.s.BusScriptGet(b.ctx, &storage.BusScriptGetParams{Tenant: o.tenant, ID: "js"})
	wantErr(t, "BusScriptGet of a's script in o", err, heraldtype.ErrNotFound)

	// a is untouched.
	wantEqual(t, "a's e1", a.busEvent("e1").Type, "a")
	wantEqual(t, "a's running execution", a.busExec(c.Event.ID, "s").Status, heraldtype.ExecRunning)
	wantEqual(t, "a's letter", a.deadLetter(letter).ID, letter)
	a.busFinishOK(t0, outcome(c, storage.BusSucceeded, t0))
	wantEqual(t, "a's backlog", a.busBacklog(0), 0)
}

// badText are ids that break the text rules.
var badText = map[string]string{
	"empty":         "",
	"NUL":           "a\x00b",
	"invalid UTF-8": "a\xffb",
	"over the cap":  strings.Repeat("x", storage.MaxIDBytes+1),
}

// testBusBadInput: nil params, ids that break the text rules and negative
// limits are refused with ErrInvalidArgument, and nothing is written.
func testBusBadInput(b *bundle) {
	t := b.t
	s, ctx, tn := b.s, b.ctx, b.tenant
	b.busPublishRouted(t0, "a", []string{"s"}, "e0")
	c := b.busClaim(t0, 1)[0]
	want := func(what string, err error) {
		t.Helper()
		wantErr(t, what, err, heraldtype.ErrInvalidArgument)
	}
	// Nil params.
	want("BusPublish(nil)", errOf(s.BusPublish(ctx, nil)))
	want("BusRoute(nil)", errOf(s.BusRoute(ctx, nil)))
	want("BusClaim(nil)", errOf(s.BusClaim(ctx, nil)))
	want("BusFinish(nil)", errOf(s.BusFinish(ctx, nil)))
	want("BusHeartbeat(nil)", s.BusHeartbeat(ctx, nil))
	want("BusSubscriptionPut(nil)", errOf(s.BusSubscriptionPut(ctx, nil)))
	want("BusSubscriptionGet(nil)", errOf(s.BusSubscriptionGet(ctx, nil)))
	_, _, err := s.BusSubscriptionList(ctx, nil)
	want("BusSubscriptionList(nil)", err)
	want("BusSubscriptionDelete(nil)", s.BusSubscriptionDelete(ctx, nil))
	want("BusSubscriptionGeneration(nil)", errOf(s.BusSubscriptionGeneration(ctx, nil)))
	want("BusScriptPut(nil)", errOf(s.BusScriptPut(ctx, nil)))
	want("BusScriptGet(nil)", errOf(s.BusScriptGet(ctx, nil)))
	want("BusScriptList(nil)", errOf(s.BusScriptList(ctx, nil)))
	want("BusScriptDelete(nil)", s.BusScriptDelete(ctx, nil))
	_, _, err = s.BusDeadLetterList(ctx, nil)
	want("BusDeadLetterList(nil)", err)
	want("BusDeadLetterGet(nil)", errOf(s.BusDeadLetterGet(ctx, nil)))
	want("BusDeadLetterReprocess(nil)", errOf(s.BusDeadLetterReprocess(ctx, nil)))
	want("BusDeadLetterDelete(nil)", errOf(s.BusDeadLetterDelete(ctx, nil)))
	want("BusEventGet(nil)", errOf(s.BusEventGet(ctx, nil)))
	_, _, err = s.BusAttemptList(ctx, nil)
	want("BusAttemptList(nil)", err)
	want("BusPrune(nil)", errOf(s.BusPrune(ctx, nil)))
	want("BusBacklog(nil)", errOf(s.BusBacklog(ctx, nil)))

	sub := heraldtype.Subscription{ID: "s", Pattern: "a", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
	for kind, bad := range badText {
		// A bad tenant, on every method.
		w := func(method string, err error) {
			t.Helper()
			want(fmt.Sprintf("%s with a tenant id %s", method, kind), err)
		}
		w("BusPublish", errOf(s.BusPublish(ctx, &storage.BusPublishParams{Tenant: bad, Event: storage.BusPublishEvent{ID: "e", Type: "a", Data: busData("e")}, Now: t0})))
		w("BusRoute", errOf(s.BusRoute(ctx, &storage.BusRouteParams{Tenant: bad, Now: t0, Route: matchAll("s")})))
		w("BusClaim", errOf(s.BusClaim(ctx, &storage.BusClaimParams{Tenant: bad, Now: t0})))
		w("BusFinish", errOf(s.BusFinish(ctx, &storage.BusFinishParams{Tenant: bad, Now: t0, Results: []storage.BusResult{outcome(c, storage.BusSucceeded, t0)}})))
		w("BusHeartbeat", s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: bad, Execution: c.Execution.ID, LockToken: c.LockToken, LeaseUntil: at(time.Hour)}))
		w("BusSubscriptionPut", errOf(s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: bad, Subscription: sub, Now: t0})))
		w("BusSubscriptionGet", errOf(s.BusSubscriptionGet(ctx, &storage.BusSubscriptionGetParams{Tenant: bad, ID: "s"})))
		_, _, err := s.BusSubscriptionList(ctx, &storage.BusTenantParams{Tenant: bad})
		w("BusSubscriptionList", err)
		w("BusSubscriptionDelete", s.BusSubscriptionDelete(ctx, &storage.BusSubscriptionGetParams{Tenant: bad, ID: "s"}))
		w("BusSubscriptionGeneration", errOf(s.BusSubscriptionGeneration(ctx, &storage.BusTenantParams{Tenant: bad})))
		w("BusScriptPut", errOf(s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: bad, ID: "js", Source: "1", Now: t0})))
		w("BusScriptGet", errOf(s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: bad, ID: "js"})))
		w("BusScriptList", errOf(s.BusScriptList(ctx, &storage.BusTenantParams{Tenant: bad})))
		w("BusScriptDelete", s.BusScriptDelete(ctx, &storage.BusScriptGetParams{Tenant: bad, ID: "js"}))
		_, _, err = s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: bad})
		w("BusDeadLetterList", err)
		w("BusDeadLetterGet", errOf(s.BusDeadLetterGet(ctx, &storage.BusDeadLetterGetParams{Tenant: bad, ID: 1})))
		w("BusDeadLetterReprocess", errOf(s.BusDeadLetterReprocess(ctx, &storage.BusDeadLetterOpParams{Tenant: bad, Now: t0})))
		w("BusDeadLetterDelete", errOf(s.BusDeadLetterDelete(ctx, &storage.BusDeadLetterOpParams{Tenant: bad, Now: t0})))
		w("BusEventGet", errOf(s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: bad, ID: "e"})))
		_, _, err = s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: bad, EventID: "e"})
		w("BusAttemptList", err)
		w("BusPrune", errOf(s.BusPrune(ctx, &storage.BusPruneParams{Tenant: bad, Before: at(time.Hour)})))
		w("BusBacklog", errOf(s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: bad})))

		// Bad ids and names.
		w = func(what string, err error) {
			t.Helper()
			want(fmt.Sprintf("%s %s", what, kind), err)
		}
		w("BusPublish with an event id", errOf(s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tn, Event: storage.BusPublishEvent{ID: bad, Type: "a", Data: busData("e")}, Now: t0})))
		w("BusPublish with a type", errOf(s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tn, Event: storage.BusPublishEvent{ID: "e" + kind, Type: bad, Data: busData("e")}, Now: t0})))
		badSub := sub
		badSub.ID = bad
		w("BusSubscriptionPut with an id", errOf(s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: tn, Subscription: badSub, Now: t0})))
		w("BusSubscriptionGet with an id", errOf(s.BusSubscriptionGet(ctx, &storage.BusSubscriptionGetParams{Tenant: tn, ID: bad})))
		w("BusSubscriptionDelete with an id", s.BusSubscriptionDelete(ctx, &storage.BusSubscriptionGetParams{Tenant: tn, ID: bad}))
		w("BusScriptPut with an id", errOf(s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: tn, ID: bad, Source: "1", Now: t0})))
		w("BusScriptGet with an id", errOf(s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: tn, ID: bad})))
		w("BusScriptDelete with an id", s.BusScriptDelete(ctx, &storage.BusScriptGetParams{Tenant: tn, ID: bad}))
		w("BusEventGet with an id", errOf(s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: tn, ID: bad})))
		if bad != "" { // an empty filter field does not filter
			_, _, err = s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, EventID: bad})
			w("BusAttemptList with an event id", err)
			_, _, err = s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, Subscription: bad})
			w("BusAttemptList with a subscription", err)
			_, _, err = s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn, Filter: storage.BusDeadLetterFilter{Subscription: bad}})
			w("BusDeadLetterList with a subscription", err)
			_, _, err = s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn, Filter: storage.BusDeadLetterFilter{EventType: bad}})
			w("BusDeadLetterList with an event type", err)
			w("BusDeadLetterReprocess with a subscription", errOf(s.BusDeadLetterReprocess(ctx, &storage.BusDeadLetterOpParams{Tenant: tn,
				Filter: storage.BusDeadLetterFilter{Subscription: bad}, Now: t0})))
		}
	}
	for what, src := range map[string]string{"NUL": "workflow:a\x00", "invalid UTF-8": "workflow:\xff"} {
		_, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tn, Event: storage.BusPublishEvent{ID: "src", Type: "a", Data: busData("e"), Source: src}, Now: t0})
		want("BusPublish with a source with "+what, err)
	}
	// Negative limits.
	want("BusClaim with a negative Max", errOf(s.BusClaim(ctx, &storage.BusClaimParams{Tenant: tn, Max: -1, Now: t0})))
	want("BusRoute with a negative Max", errOf(s.BusRoute(ctx, &storage.BusRouteParams{Tenant: tn, Max: -5, Now: t0, Route: matchAll("s")})))
	want("BusPrune with a negative Limit", errOf(s.BusPrune(ctx, &storage.BusPruneParams{Tenant: tn, Limit: -1, Before: at(time.Hour)})))
	want("BusBacklog with a negative Limit", errOf(s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: tn, Limit: -1})))
	want("BusScriptGet with a negative Version", errOf(s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: tn, ID: "js", Version: -1})))
	want("BusDeadLetterReprocess with a negative Limit", errOf(s.BusDeadLetterReprocess(ctx, &storage.BusDeadLetterOpParams{Tenant: tn, Limit: -1, Now: t0})))

	// Nothing was written.
	wantEqual(t, "backlog", b.busBacklog(0), 1) // e0's running execution
	wantEqual(t, "generation", b.subGeneration(), int64(0))
	ss, err := s.BusScriptList(ctx, &storage.BusTenantParams{Tenant: tn})
	if err != nil || len(ss) != 0 {
		t.Fatalf("scripts: %d, %v", len(ss), err)
	}
	for _, id := range []string{"src", "e"} {
		_, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: tn, ID: id})
		wantErr(t, "event "+id, err, heraldtype.ErrNotFound)
	}
	for kind := range badText {
		_, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: tn, ID: "e" + kind})
		wantErr(t, "event e"+kind, err, heraldtype.ErrNotFound)
	}
	x := b.busExec("e0", "s")
	wantEqual(t, "e0's execution", x.Status, heraldtype.ExecRunning)
	as, _ := b.attempts(storage.BusAttemptListParams{EventID: "e0"})
	wantEqual(t, "attempts", len(as), 0)
	b.busFinishOK(t0, outcome(c, storage.BusSucceeded, t0))
}

// testBusTextBoundaries: ids and names at their byte caps, made of
// multi-byte runes and characters SQL and JSON treat specially, and data
// holding an escaped NUL, go through every call unchanged.
func testBusTextBoundaries(b *bundle) {
	t := b.t
	b = b.in(maxText("t€nant/bus", storage.MaxIDBytes))
	id := maxText(`é'"%_\/`+" 🎉", storage.MaxIDBytes)
	typ := maxText("ty.pe*>ñ", storage.MaxNameBytes)
	sub := maxText("sub'\"%€", storage.MaxIDBytes)
	script := maxText("scr;DROP ipt€", storage.MaxIDBytes)
	source := "workflow:" + maxText("wf€", storage.MaxIDBytes)
	data := json.RawMessage(`{"s":"\u0000é","n":[1,2.5e10,null,true]}`)
	for what, s := range map[string]string{"tenant": b.tenant, "id": id, "type": typ, "sub": sub, "script": script} {
		if p := storage.TextProblem(s, storage.MaxIDBytes); p != "" || len(s) < storage.MaxIDBytes-3 {
			t.Fatalf("test bug: %s %s (%d bytes)", what, p, len(s))
		}
	}
	if _, err := b.s.BusPublish(b.ctx, &storage.BusPublishParams{Tenant: b.tenant, Now: t0,
		Event: storage.BusPublishEvent{ID: id, Type: typ, Data: data, Source: source}}); err != nil {
		t.Fatalf("BusPublish: %v", err)
	}
	res, err := b.s.BusPublish(b.ctx, &storage.BusPublishParams{Tenant: b.tenant, Now: t0,
		Event: storage.BusPublishEvent{ID: id, Type: typ, Data: data, Source: source}})
	if err != nil || !res.Duplicate {
		t.Fatalf("BusPublish again: %+v, %v; want a duplicate", res, err)
	}
	b.busRoute(t0, 0, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		if ev.ID != id || ev.Type != typ || ev.Source != source || string(ev.Data) != string(data) {
			t.Errorf("Route saw %q %q %q %s", ev.ID, ev.Type, ev.Source, ev.Data)
		}
		return matchAll(sub)(ev)
	})
	c := b.busClaimOne(t0, id, sub)
	wantEqual(t, "claimed Type", c.Event.Type, typ)
	wantEqual(t, "claimed Source", c.Event.Source, source)
	wantJSON(t, "claimed Data", c.Event.Data, string(data))
	b.busFinishOK(t0, outcome(c, storage.BusDeadLetter, t0))
	ev := b.busEvent(id)
	wantEqual(t, "event ID", ev.ID, id)
	wantEqual(t, "route Subscription", ev.Routes[0].Subscription, sub)
	wantEqual(t, "execution EventID", ev.Routes[0].Execution.EventID, id)
	dls, _ := b.deadLetters(storage.BusDeadLetterFilter{Subscription: sub, EventType: typ}, 0, 0)
	if len(dls) != 1 {
		t.Fatalf("dead letters by subscription and type: %d", len(dls))
	}
	wantEqual(t, "letter EventID", dls[0].EventID, id)
	wantEqual(t, "letter Subscription", dls[0].Subscription, sub)
	wantEqual(t, "letter EventType", dls[0].EventType, typ)
	wantJSON(t, "letter EventData", dls[0].EventData, string(data))
	as, _ := b.attempts(storage.BusAttemptListParams{EventID: id, Subscription: sub})
	if len(as) != 1 || as[0].EventID != id || as[0].Subscription != sub {
		t.Fatalf("attempts: %+v", as)
	}
	got := b.putSub(heraldtype.Subscription{ID: sub, Pattern: typ, Target: heraldtype.Target{Kind: heraldtype.TargetScript, Script: script}}, t0)
	wantEqual(t, "subscription ID", got.ID, sub)
	ids, _ := b.subIDs()
	wantStrings(t, "subscriptions", ids, sub)
	if _, err := b.s.BusScriptPut(b.ctx, &storage.BusScriptPutParams{Tenant: b.tenant, ID: script, Source: "return 1", Now: t0}); err != nil {
		t.Fatalf("BusScriptPut: %v", err)
	}
	sc, err := b.s.BusScriptGet(b.ctx, &storage.BusScriptGetParams{Tenant: b.tenant, ID: script})
	if err != nil || sc.ID != script {
		t.Fatalf("BusScriptGet: %+v, %v", sc, err)
	}
	if err := b.s.BusScriptDelete(b.ctx, &storage.BusScriptGetParams{Tenant: b.tenant, ID: script}); err != nil {
		t.Fatalf("BusScriptDelete: %v", err)
	}
	if err := b.s.BusSubscriptionDelete(b.ctx, &storage.BusSubscriptionGetParams{Tenant: b.tenant, ID: sub}); err != nil {
		t.Fatalf("BusSubscriptionDelete: %v", err)
	}
}
