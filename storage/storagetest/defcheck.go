package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// current returns EventDefinitionCurrent of name.
func (b *bundle) current(name string) *storage.CurrentDefinition {
	b.t.Helper()
	cur, err := b.s.EventDefinitionCurrent(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: name})
	if err != nil {
		b.t.Fatalf("EventDefinitionCurrent(%s): %v", name, err)
	}
	return cur
}

// wantCurrent requires name's current definition to be none (buffer "")
// or one with that buffer, at version.
func (b *bundle) wantCurrent(name, buffer string, version int64) {
	b.t.Helper()
	cur := b.current(name)
	switch {
	case buffer == "" && cur.Definition != nil:
		b.t.Fatalf("current definition of %s: %+v (version %d), want none", name, cur.Definition, cur.Version)
	case buffer != "" && (cur.Definition == nil || cur.Definition.Name != name || cur.Definition.Buffer != buffer):
		b.t.Fatalf("current definition of %s: %+v, want one with buffer %s", name, cur.Definition, buffer)
	}
	wantEqual(b.t, "version of "+name, cur.Version, version)
}

// checkedParams are raiseParams conditional on definition version v.
func (b *bundle) checkedParams(id, eventID, name string, v int64, now time.Time) *storage.EventRaiseParams {
	p := b.raiseParams(id, eventID, name, now)
	p.CheckDefinition, p.DefinitionVersion = true, v
	return p
}

// raiseChecked raises p and requires it to be stored.
func (b *bundle) raiseChecked(what string, p *storage.EventRaiseParams) *storage.EventRaiseResult {
	b.t.Helper()
	res, err := b.s.EventRaise(b.ctx, p)
	if err != nil {
		b.t.Fatalf("%s: EventRaise(%s, %s) at definition version %d: %v", what, p.InstanceID, p.EventID, p.DefinitionVersion, err)
	}
	if res.Duplicate {
		b.t.Fatalf("%s: EventRaise(%s, %s): a duplicate", what, p.InstanceID, p.EventID)
	}
	return res
}

// wantChanged requires p's raise to be refused with ErrDefinitionChanged,
// nothing written: no ledger entry, and (checked by the caller) nothing to
// claim.
func (b *bundle) wantChanged(what string, p *storage.EventRaiseParams) {
	b.t.Helper()
	res, err := b.s.EventRaise(b.ctx, p)
	if err == nil {
		b.t.Fatalf("%s: EventRaise(%s, %s) at definition version %d: %+v, want ErrDefinitionChanged",
			what, p.InstanceID, p.EventID, p.DefinitionVersion, res)
	}
	wantErr(b.t, what, err, storage.ErrDefinitionChanged)
	_, err = b.s.EventGet(b.ctx, &storage.EventGetParams{Tenant: b.tenant, EventID: p.EventID})
	wantErr(b.t, what+": EventGet of the refused event", err, heraldtype.ErrNotFound)
}

// testEventRaiseDefinitionCheck: a raise conditional on a definition
// version (EventRaiseParams.CheckDefinition) is stored only while the
// definition is at that version (0: none), and otherwise refused with
// ErrDefinitionChanged, nothing written, whatever else the raise asks for
// (StartIfAbsent, a hand-off); a duplicate is answered first, the instance
// looked at after. EventDefinitionCurrent reports the version.
func testEventRaiseDefinitionCheck(b *bundle) {
	t := b.t
	b.create("i", t0)
	b.commit(b.commitParams(b.claimOne("i", t0), t0)) // idle: a stored event makes it claimable

	// No definition: version 0.
	b.wantCurrent("approve", "", 0)
	now := at(time.Second)
	b.raiseChecked("no definition, version 0", b.checkedParams("i", "e1", "approve", 0, now))
	b.wantChanged("no definition, version 1", b.checkedParams("i", "x1", "approve", 1, now))
	turn := b.claimOne("i", now)
	wantMessages(t, "turn after the raises without a definition", turn.Messages, "event:e1")
	b.commit(b.commitParams(turn, now))

	// Created: version 1; 0 is stale.
	now = at(2 * time.Second)
	b.putDef(heraldtype.EventDefinition{Name: "approve"}, now)
	b.wantCurrent("approve", heraldtype.BufferFIFO, 1)
	b.wantChanged("created since version 0", b.checkedParams("i", "x2", "approve", 0, now))
	b.claimNone(now)
	b.raiseChecked("version 1", b.checkedParams("i", "e2", "approve", 1, now))

	// Replaced: version 2; 1 is stale.
	b.putDef(heraldtype.EventDefinition{Name: "approve", Buffer: heraldtype.BufferLatest}, now)
	b.wantCurrent("approve", heraldtype.BufferLatest, 2)
	b.wantChanged("replaced since version 1", b.checkedParams("i", "x3", "approve", 1, now))
	b.wantChanged("a version not reached yet", b.checkedParams("i", "x4", "approve", 3, now))
	b.raiseChecked("version 2", b.checkedParams("i", "e3", "approve", 2, now))
	turn = b.claimOne("i", now)
	wantMessages(t, "turn after the raises at versions 1 and 2", turn.Messages, "event:e2", "event:e3")
	b.commit(b.commitParams(turn, now))

	// Deleted: none again, version 0; 2 is stale.
	now = at(3 * time.Second)
	if err := b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: "approve"}); err != nil {
		t.Fatalf("EventDefinitionDelete: %v", err)
	}
	b.wantCurrent("approve", "", 0)
	b.wantChanged("deleted since version 2", b.checkedParams("i", "x5", "approve", 2, now))
	b.claimNone(now)
	b.raiseChecked("deleted, version 0", b.checkedParams("i", "e4", "approve", 0, now))

	// Created again: the version goes on from the deleted one's.
	b.putDef(heraldtype.EventDefinition{Name: "approve"}, now)
	b.wantCurrent("approve", heraldtype.BufferFIFO, 3)
	b.wantChanged("created again since version 0", b.checkedParams("i", "x6", "approve", 0, now))
	b.wantChanged("created again, the deleted version", b.checkedParams("i", "x7", "approve", 2, now))
	b.raiseChecked("version 3", b.checkedParams("i", "e5", "approve", 3, now))

	// Unchecked raises (DefinitionVersion alone included) and raises of
	// other names, or in other tenants, do not look at the definition.
	b.raiseChecked("unchecked", b.raiseParams("i", "e6", "approve", now))
	up := b.raiseParams("i", "e7", "approve", now)
	up.DefinitionVersion = 1
	b.raiseChecked("a version without CheckDefinition", up)
	b.raiseChecked("another name", b.checkedParams("i", "e8", "reject", 0, now))
	o := b.in(b.tenant + "-other")
	o.create("i", now)
	o.wantCurrent("approve", "", 0)
	o.raiseChecked("another tenant", o.checkedParams("i", "o1", "approve", 0, now))
	o.wantChanged("another tenant, this tenant's version", o.checkedParams("i", "o2", "approve", 3, now))
	turn = b.claimOne("i", now)
	wantMessages(t, "turn after the deletion", turn.Messages, "event:e4", "event:e5", "event:e6", "event:e7", "event:e8")
	b.commit(b.commitParams(turn, now))

	// A negative version is refused.
	if _, err := b.s.EventRaise(b.ctx, b.checkedParams("i", "x8", "approve", -1, now)); err == nil {
		t.Fatal("EventRaise at definition version -1: stored, want an error")
	}
	_, err := b.s.EventGet(b.ctx, &storage.EventGetParams{Tenant: b.tenant, EventID: "x8"})
	wantErr(t, "EventGet of the raise at version -1", err, heraldtype.ErrNotFound)

	// A duplicate is answered whatever the version; a conflicting id is
	// still a conflict.
	now = at(4 * time.Second)
	dup, err := b.s.EventRaise(b.ctx, b.checkedParams("i", "e1", "approve", 1, now))
	if err != nil || !dup.Duplicate {
		t.Fatalf("duplicate at a stale version: %+v, %v; want the first receipt", dup, err)
	}
	wantTime(t, "duplicate ReceivedAt", dup.ReceivedAt, at(time.Second))
	_, err = b.s.EventRaise(b.ctx, b.checkedParams("other", "e1", "approve", 1, now))
	wantErr(t, "reused id at a stale version", err, heraldtype.ErrEventIDConflict)
	b.claimNone(now)

	// An instance that does not exist: a refused raise keeps nothing for
	// it; StartIfAbsent starts nothing.
	b.wantChanged("before create", b.checkedParams("later", "x9", "approve", 0, now))
	sp := b.checkedParams("started", "x10", "approve", 2, now)
	sp.StartIfAbsent = &storage.InstanceCreateParams{Workflow: "wf"}
	b.wantChanged("StartIfAbsent", sp)
	_, err = b.s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant, ID: "started"})
	wantErr(t, "InstanceGet of the instance a refused raise was to start", err, heraldtype.ErrNotFound)
	b.claimNone(now)
	b.raiseChecked("before create, current version", b.checkedParams("later", "e9", "approve", 3, now))
	sp = b.checkedParams("started", "e10", "approve", 3, now)
	sp.StartIfAbsent = &storage.InstanceCreateParams{Workflow: "wf"}
	if res := b.raiseChecked("StartIfAbsent, current version", sp); !res.Started {
		t.Fatalf("StartIfAbsent at the current version: %+v, want Started", res)
	}
	wantMessages(t, "first turn of the started instance", b.claimOne("started", now).Messages, "kick", "event:e10")
	b.create("later", now)
	wantMessages(t, "first turn of the instance created later", b.claimOne("later", now).Messages, "event:e9", "kick")

	// An ended instance: a stale version is told first.
	b.createCompleted("ended", now)
	b.wantChanged("ended instance, stale version", b.checkedParams("ended", "x11", "approve", 0, now))
	_, err = b.s.EventRaise(b.ctx, b.checkedParams("ended", "x12", "approve", 3, now))
	wantErr(t, "ended instance, current version", err, heraldtype.ErrInstanceNotRunning)

	// A hand-off: a refused raise leases nothing.
	now = at(5 * time.Second)
	hp := b.checkedParams("i", "x13", "approve", 2, now)
	hp.Claim = &storage.TurnClaimParams{Lease: lease}
	b.wantChanged("hand-off", hp)
	b.claimNone(now)
	hp = b.checkedParams("i", "e11", "approve", 3, now)
	hp.Claim = &storage.TurnClaimParams{Lease: lease}
	handed := b.wantHandOff(b.raiseChecked("hand-off, current version", hp), "i", now, "event:e11")
	b.commit(b.commitParams(handed, now))

	// Nothing refused reached the ledger.
	for _, e := range b.events("") {
		if e.EventID[0] == 'x' {
			t.Fatalf("refused event %s is in the ledger: %+v", e.EventID, e)
		}
	}
}

// testEventRaiseDefinitionCheckConcurrent: concurrent conditional raises
// (which a backend may run together) are each checked on their own: those
// at the current version are stored, the others refused; and a raise that
// begins after a put has returned is refused at the version before it.
func testEventRaiseDefinitionCheckConcurrent(b *bundle) {
	t := b.t
	now := at(time.Second)
	b.putDef(heraldtype.EventDefinition{Name: "approve"}, now) // version 1
	const instances, each = 4, 8
	for i := range instances {
		b.create(fmt.Sprintf("i%d", i), t0)
	}
	var wg sync.WaitGroup
	for i := range instances {
		for j := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, v := fmt.Sprintf("i%d", i), int64(j%2) // even: stale (0), odd: current (1)
				p := b.checkedParams(id, fmt.Sprintf("e%d-%d-v%d", i, j, v), "approve", v, now)
				_, err := b.s.EventRaise(b.ctx, p)
				switch {
				case v == 1 && err != nil:
					t.Errorf("raise %s at the current version: %v", p.EventID, err)
				case v == 0 && err == nil:
					t.Errorf("raise %s at a stale version: stored", p.EventID)
				case v == 0 && !isChanged(err):
					t.Errorf("raise %s at a stale version: %v, want ErrDefinitionChanged", p.EventID, err)
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range instances {
		id := fmt.Sprintf("i%d", i)
		evs := b.events(id)
		if len(evs) != each/2 {
			t.Fatalf("ledger of %s has %d events, want %d", id, len(evs), each/2)
		}
		for _, e := range evs {
			if e.EventID[len(e.EventID)-1] != '1' {
				t.Fatalf("stale raise %s is in the ledger", e.EventID)
			}
		}
	}

	// Raises at version 1 race a put of version 2: each is stored or
	// refused, and every one that began after the put returned is refused.
	var (
		put      atomic.Bool
		afterPut atomic.Int64
		seq      atomic.Int64
	)
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				began := put.Load()
				p := b.checkedParams(fmt.Sprintf("i%d", i), fmt.Sprintf("r%d", seq.Add(1)), "approve", 1, now)
				_, err := b.s.EventRaise(b.ctx, p)
				switch {
				case err == nil && began:
					t.Errorf("raise %s at version 1, begun after the put of version 2 returned: stored", p.EventID)
					return
				case err == nil:
				case isChanged(err):
					if began {
						afterPut.Add(1)
						return
					}
				default:
					t.Errorf("raise %s: %v", p.EventID, err)
					return
				}
			}
		}()
	}
	b.putDef(heraldtype.EventDefinition{Name: "approve"}, now) // version 2
	put.Store(true)
	wg.Wait()
	wantEqual(t, "raisers refused after the put", afterPut.Load(), int64(instances))
	b.wantCurrent("approve", heraldtype.BufferFIFO, 2)
}

func isChanged(err error) bool { return errors.Is(err, storage.ErrDefinitionChanged) }
