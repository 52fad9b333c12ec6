package storagetest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func (b *bundle) putDef(d heraldtype.EventDefinition, now time.Time) *heraldtype.EventDefinition {
	b.t.Helper()
	got, err := b.s.EventDefinitionPut(b.ctx, &storage.EventDefinitionPutParams{Tenant: b.tenant, Definition: d, Now: now})
	if err != nil {
		b.t.Fatalf("EventDefinitionPut(%s): %v", d.Name, err)
	}
	return got
}

func (b *bundle) getDef(name string) *heraldtype.EventDefinition {
	b.t.Helper()
	d, err := b.s.EventDefinitionGet(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: name})
	if err != nil {
		b.t.Fatalf("EventDefinitionGet(%s): %v", name, err)
	}
	return d
}

func (b *bundle) defNames() []string {
	b.t.Helper()
	ds, err := b.s.EventDefinitionList(b.ctx, &storage.EventDefinitionListParams{Tenant: b.tenant})
	if err != nil {
		b.t.Fatalf("EventDefinitionList: %v", err)
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	return names
}

// wantDef compares every field of a definition.
func wantDef(b *bundle, what string, got, want *heraldtype.EventDefinition) {
	t := b.t
	t.Helper()
	wantEqual(t, what+" Name", got.Name, want.Name)
	wantJSON(t, what+" Schema", got.Schema, string(want.Schema))
	wantEqual(t, what+" Buffer", got.Buffer, want.Buffer)
	wantEqual(t, what+" Retention", got.Retention, want.Retention)
	wantEqual(t, what+" MaxPayloadBytes", got.MaxPayloadBytes, want.MaxPayloadBytes)
	switch {
	case got.Correlation == nil && want.Correlation == nil:
	case got.Correlation == nil || want.Correlation == nil:
		t.Fatalf("%s Correlation = %+v, want %+v", what, got.Correlation, want.Correlation)
	default:
		wantEqual(t, what+" Correlation", *got.Correlation, *want.Correlation)
	}
	wantTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	wantTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func testEventDefinitions(b *bundle) {
	t := b.t
	if names := b.defNames(); len(names) != 0 {
		t.Fatalf("definitions of a new tenant: %v", names)
	}
	_, err := b.s.EventDefinitionGet(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"})
	wantErr(t, "EventDefinitionGet of a missing definition", err, heraldtype.ErrNotFound)
	err = b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"})
	wantErr(t, "EventDefinitionDelete of a missing definition", err, heraldtype.ErrNotFound)

	// Create: CreatedAt = UpdatedAt = Now, an empty Buffer is fifo.
	approve := heraldtype.EventDefinition{
		Name:            "approve",
		Schema:          json.RawMessage(`{"type":"object","required":["ok"]}`),
		Retention:       2 * time.Hour,
		MaxPayloadBytes: 4096,
	}
	want := approve
	want.Buffer, want.CreatedAt, want.UpdatedAt = heraldtype.BufferFIFO, t0, t0
	wantDef(b, "put approve", b.putDef(approve, t0), &want)
	wantDef(b, "get approve", b.getDef("approve"), &want)

	// Every field round-trips, correlation config included (nil and not).
	prices := heraldtype.EventDefinition{
		Name:        "price",
		Buffer:      heraldtype.BufferLatest,
		Correlation: &heraldtype.CorrelationConfig{TTL: 90 * time.Minute, DeleteAfterFirstCorrelation: true},
	}
	wantPrices := prices
	wantPrices.CreatedAt, wantPrices.UpdatedAt = at(time.Second), at(time.Second)
	wantDef(b, "put price", b.putDef(prices, at(time.Second)), &wantPrices)
	wantDef(b, "get price", b.getDef("price"), &wantPrices)
	// A non-nil zero config still enables the correlated lane.
	bare := heraldtype.EventDefinition{Name: "bare", Correlation: &heraldtype.CorrelationConfig{}}
	wantBare := bare
	wantBare.Buffer, wantBare.CreatedAt, wantBare.UpdatedAt = heraldtype.BufferFIFO, t0, t0
	wantDef(b, "put bare", b.putDef(bare, t0), &wantBare)
	wantDef(b, "get bare", b.getDef("bare"), &wantBare)
	// Names are case-sensitive and listed in order.
	b.putDef(heraldtype.EventDefinition{Name: "Approve"}, t0)
	if got := b.defNames(); !slices.Equal(got, []string{"Approve", "approve", "bare", "price"}) {
		t.Fatalf("EventDefinitionList: %v", got)
	}

	// Update: every field replaced, CreatedAt kept.
	approve2 := heraldtype.EventDefinition{
		Name:        "approve",
		Buffer:      heraldtype.BufferLatest,
		Correlation: &heraldtype.CorrelationConfig{TTL: time.Minute},
	}
	want2 := approve2
	want2.CreatedAt, want2.UpdatedAt = t0, at(time.Minute)
	wantDef(b, "second put of approve", b.putDef(approve2, at(time.Minute)), &want2)
	wantDef(b, "get approve after update", b.getDef("approve"), &want2)
	// Correlation can be turned off again.
	approve3 := approve
	want3 := want
	want3.UpdatedAt = at(2 * time.Minute)
	wantDef(b, "third put of approve", b.putDef(approve3, at(2*time.Minute)), &want3)
	wantDef(b, "get approve after third put", b.getDef("approve"), &want3)
	// The store sets the times, whatever the caller passes.
	forged := approve
	forged.CreatedAt, forged.UpdatedAt = at(-time.Hour), at(-time.Hour)
	want3.UpdatedAt = at(3 * time.Minute)
	wantDef(b, "put with forged times", b.putDef(forged, at(3*time.Minute)), &want3)

	// Delete.
	if err := b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"}); err != nil {
		t.Fatalf("EventDefinitionDelete: %v", err)
	}
	_, err = b.s.EventDefinitionGet(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"})
	wantErr(t, "EventDefinitionGet after delete", err, heraldtype.ErrNotFound)
	err = b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"})
	wantErr(t, "second EventDefinitionDelete", err, heraldtype.ErrNotFound)
	if got := b.defNames(); !slices.Equal(got, []string{"Approve", "bare", "price"}) {
		t.Fatalf("EventDefinitionList after delete: %v", got)
	}
	wantDef(b, "get price after another's delete", b.getDef("price"), &wantPrices)

	// Created again: a new CreatedAt, nothing of the deleted definition.
	again := b.putDef(heraldtype.EventDefinition{Name: "approve"}, at(time.Hour))
	wantEqual(t, "Buffer after delete and put", again.Buffer, heraldtype.BufferFIFO)
	wantEqual(t, "Retention after delete and put", again.Retention, time.Duration(0))
	wantTime(t, "CreatedAt after delete and put", again.CreatedAt, at(time.Hour))
	wantDef(b, "get approve after delete and put", b.getDef("approve"), again)
}

func testEventDefinitionTenants(b *bundle) {
	t := b.t
	ta, tb := b.in(b.tenant+"-a"), b.in(b.tenant+"-b")
	ta.putDef(heraldtype.EventDefinition{Name: "approve", Schema: json.RawMessage(`{"title":"a"}`)}, t0)
	ta.putDef(heraldtype.EventDefinition{Name: "approve", Schema: json.RawMessage(`{"title":"a2"}`)}, at(time.Second))
	ta.putDef(heraldtype.EventDefinition{Name: "only-a"}, t0)
	// The same name in another tenant is another definition.
	db := tb.putDef(heraldtype.EventDefinition{Name: "approve", Buffer: heraldtype.BufferLatest}, at(2*time.Second))
	wantTime(t, "CreatedAt in b", db.CreatedAt, at(2*time.Second))
	wantJSON(t, "Schema in b", db.Schema, ``)

	da := ta.getDef("approve")
	wantTime(t, "UpdatedAt in a", da.UpdatedAt, at(time.Second))
	wantJSON(t, "Schema in a", da.Schema, `{"title":"a2"}`)
	wantEqual(t, "Buffer in a", da.Buffer, heraldtype.BufferFIFO)
	wantEqual(t, "Buffer in b", tb.getDef("approve").Buffer, heraldtype.BufferLatest)

	if got := ta.defNames(); !slices.Equal(got, []string{"approve", "only-a"}) {
		t.Fatalf("EventDefinitionList of a: %v", got)
	}
	if got := tb.defNames(); !slices.Equal(got, []string{"approve"}) {
		t.Fatalf("EventDefinitionList of b: %v", got)
	}
	if got := b.defNames(); len(got) != 0 {
		t.Fatalf("EventDefinitionList of a third tenant: %v", got)
	}
	_, err := b.s.EventDefinitionGet(b.ctx, &storage.EventDefinitionGetParams{Tenant: tb.tenant, Name: "only-a"})
	wantErr(t, "EventDefinitionGet of another tenant's definition", err, heraldtype.ErrNotFound)
	err = b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: tb.tenant, Name: "only-a"})
	wantErr(t, "EventDefinitionDelete of another tenant's definition", err, heraldtype.ErrNotFound)

	// Deleting in b leaves a's.
	if err := b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: tb.tenant, Name: "approve"}); err != nil {
		t.Fatalf("EventDefinitionDelete in b: %v", err)
	}
	wantJSON(t, "Schema in a after b's delete", ta.getDef("approve").Schema, `{"title":"a2"}`)
	if got := tb.defNames(); len(got) != 0 {
		t.Fatalf("EventDefinitionList of b after delete: %v", got)
	}
}

func testEventRaiseLatest(b *bundle) {
	t := b.t
	raise := func(id, eventID string, latest bool, now time.Time) {
		t.Helper()
		p := b.raiseParams(id, eventID, "price", now)
		p.Lane = history.LaneQueue
		p.Latest = latest
		if _, err := b.s.EventRaise(b.ctx, p); err != nil {
			t.Fatalf("EventRaise(%s): %v", eventID, err)
		}
	}
	// Kept before the instance exists, and raised to a running one.
	raise("i", "early", true, t0)
	b.create("i", at(time.Second))
	raise("i", "fifo", false, at(2*time.Second))
	raise("i", "latest", true, at(3*time.Second))
	turn := b.claimOne("i", at(4*time.Second))
	wantMessages(t, "turn", turn.Messages, "event:early", "kick", "event:fifo", "event:latest")
	for i, want := range []bool{true, false, false, true} {
		m := turn.Messages[i]
		wantEqual(t, "Latest of "+msgKinds(turn.Messages)[i], m.Latest, want)
		if m.Kind == storage.MsgEvent {
			wantEqual(t, "Lane of "+m.EventID, m.Lane, history.LaneQueue)
		}
	}
}

func testEventExpire(b *bundle) {
	t := b.t
	raise := func(bb *bundle, id, eventID string, expiresAt, now time.Time) {
		t.Helper()
		p := bb.raiseParams(id, eventID, "approve", now)
		p.ExpiresAt = expiresAt
		if _, err := b.s.EventRaise(b.ctx, p); err != nil {
			t.Fatalf("EventRaise(%s): %v", eventID, err)
		}
	}
	expire := func(bb *bundle, now time.Time, limit int) []string {
		t.Helper()
		ids, err := b.s.EventExpire(b.ctx, &storage.EventExpireParams{Tenant: bb.tenant, Now: now, Limit: limit})
		if err != nil {
			t.Fatalf("EventExpire: %v", err)
		}
		return ids
	}
	wantExpired := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: expired %v, want %v", what, got, want)
		}
	}
	wantFate := func(bb *bundle, eventID string, fate history.Fate, reason history.DropReason) {
		t.Helper()
		e := bb.event(eventID)
		if e.Fate != fate || e.Reason != reason {
			t.Fatalf("event %s: fate %s/%s, want %s/%s", eventID, e.Fate, e.Reason, fate, reason)
		}
	}

	hour := time.Hour
	wantExpired("nothing raised", expire(b, at(hour), 0))

	// Kept for instances that do not exist yet.
	raise(b, "gone", "past", at(hour), t0)        // expires at 1h
	raise(b, "kept", "future", at(3*hour), t0)    // expires at 3h
	raise(b, "forever", "never", time.Time{}, t0) // never expires
	// Raised to an instance that exists (still pending): never expires here.
	b.create("started", t0)
	raise(b, "started", "live", at(hour), at(time.Second))
	// Kept before its instance is created: creating it keeps the event.
	raise(b, "late", "rescued", at(hour), at(time.Second))
	b.create("late", at(2*time.Second))

	wantExpired("before any expiry time", expire(b, at(hour-time.Nanosecond), 0))
	wantFate(b, "past", history.FatePending, "")

	// At its ExpiresAt the event is dropped: fate dropped/expired, updated
	// at Now, its inbox message gone.
	wantExpired("at 2h", expire(b, at(2*hour), 0), "past")
	wantFate(b, "past", history.FateDropped, history.DropExpired)
	wantTime(t, "UpdatedAt of the expired event", b.event("past").UpdatedAt, at(2*hour))
	wantTime(t, "ReceivedAt of the expired event", b.event("past").ReceivedAt, t0)
	for _, id := range []string{"future", "never", "live", "rescued"} {
		wantFate(b, id, history.FatePending, "")
	}
	wantExpired("again at 2h", expire(b, at(2*hour), 0))

	// Creating the instance afterwards does not deliver the expired event.
	b.create("gone", at(2*hour))
	// A raise of the same id is still a duplicate.
	p := b.raiseParams("gone", "past", "approve", at(2*hour))
	if res, err := b.s.EventRaise(b.ctx, p); err != nil || !res.Duplicate {
		t.Fatalf("raise of an expired event id: %+v, %v; want a duplicate", res, err)
	}
	wantFate(b, "past", history.FateDropped, history.DropExpired)

	turns := b.claimN(at(2*hour), 10)
	byID := make(map[string]*storage.Turn)
	for _, turn := range turns {
		byID[turn.Instance.ID] = turn
	}
	if len(turns) != 3 || byID["gone"] == nil || byID["started"] == nil || byID["late"] == nil {
		t.Fatalf("claim at 2h: %v, want gone, started and late", turnIDs(turns))
	}
	wantMessages(t, "first turn of gone", byID["gone"].Messages, "kick")
	wantMessages(t, "first turn of started", byID["started"].Messages, "kick", "event:live")
	wantMessages(t, "first turn of late", byID["late"].Messages, "event:rescued", "kick")
	for _, turn := range turns {
		b.commit(b.commitParams(turn, at(2*hour)))
	}

	// Long after every expiry time, the events whose instances exist (and
	// the one without an ExpiresAt) stay; the other one goes.
	wantExpired("at 100h", expire(b, at(100*hour), 0), "future")
	wantFate(b, "never", history.FatePending, "")
	wantFate(b, "live", history.FatePending, "")
	wantFate(b, "rescued", history.FatePending, "")
	b.create("forever", at(100*hour))
	turn := b.claimOne("forever", at(100*hour))
	wantMessages(t, "first turn of forever", turn.Messages, "event:never", "kick")
}

func testEventExpireLimitAndTenants(b *bundle) {
	t := b.t
	other := b.in(b.tenant + "-other")
	raise := func(bb *bundle, id, eventID string, expiresAt time.Time) {
		t.Helper()
		p := bb.raiseParams(id, eventID, "approve", t0)
		p.ExpiresAt = expiresAt
		if _, err := b.s.EventRaise(b.ctx, p); err != nil {
			t.Fatalf("EventRaise(%s): %v", eventID, err)
		}
	}
	expire := func(bb *bundle, limit int) []string {
		t.Helper()
		ids, err := b.s.EventExpire(b.ctx, &storage.EventExpireParams{Tenant: bb.tenant, Now: at(time.Hour), Limit: limit})
		if err != nil {
			t.Fatalf("EventExpire: %v", err)
		}
		return ids
	}
	// Five expired events over two instance ids, e<n> expiring at n
	// minutes, and the same ids in another tenant.
	var all []string
	for i, id := range []string{"e1", "e2", "e3", "e4", "e5"} {
		target := []string{"x", "y"}[i%2]
		raise(b, target, id, at(time.Duration(i+1)*time.Minute))
		raise(other, target, id, at(time.Duration(i+1)*time.Minute))
		all = append(all, id)
	}
	// An instance of the same id in another tenant does not protect them.
	other.create("x", t0)

	// Limit is respected, the oldest go first.
	for _, want := range [][]string{{"e1", "e2"}, {"e3", "e4"}, {"e5"}, nil} {
		if got := expire(b, 2); !slices.Equal(got, want) {
			t.Fatalf("EventExpire with Limit 2: %v, want %v", got, want)
		}
	}
	for _, id := range all {
		if e := b.event(id); e.Fate != history.FateDropped || e.Reason != history.DropExpired {
			t.Fatalf("event %s: fate %s/%s, want dropped/expired", id, e.Fate, e.Reason)
		}
		// The other tenant's events are untouched.
		wantEqual(t, "fate in the other tenant of "+id, other.event(id).Fate, history.FatePending)
	}
	// In the other tenant, only the events of y (x exists there) expire, and
	// the default limit takes them all.
	if got := expire(other, 0); !slices.Equal(got, []string{"e2", "e4"}) {
		t.Fatalf("EventExpire in the other tenant: %v, want [e2 e4]", got)
	}
	turn := other.claimOne("x", at(time.Hour))
	wantMessages(t, "turn of x in the other tenant", turn.Messages, "event:e1", "event:e3", "event:e5", "kick")
}
