package herald_test

// Tests of the event definition cache (defcache.go): a send validates its
// event against the definition current when the event is stored, whichever
// process changed the definition last, and reads the definition from the
// store only when it has not seen it or it changed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// defCountingStore counts the definition reads and the raises that go
// through it.
type defCountingStore struct {
	storage.Store
	gets, currents atomic.Int64 // EventDefinitionGet, EventDefinitionCurrent
	raises         atomic.Int64 // EventRaise
	checked        atomic.Int64 // EventRaise with CheckDefinition
	changed        atomic.Int64 // EventRaise refused with ErrDefinitionChanged
	refuseAll      atomic.Bool  // answer every raise with ErrDefinitionChanged
}

func (s *defCountingStore) EventDefinitionGet(ctx context.Context, p *storage.EventDefinitionGetParams) (*herald.EventDefinition, error) {
	s.gets.Add(1)
	return s.Store.EventDefinitionGet(ctx, p)
}

func (s *defCountingStore) EventDefinitionCurrent(ctx context.Context, p *storage.EventDefinitionGetParams) (*storage.CurrentDefinition, error) {
	s.currents.Add(1)
	return s.Store.EventDefinitionCurrent(ctx, p)
}

func (s *defCountingStore) EventRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	s.raises.Add(1)
	if p.CheckDefinition {
		s.checked.Add(1)
	}
	if s.refuseAll.Load() {
		s.changed.Add(1)
		return nil, fmt.Errorf("injected: %w", storage.ErrDefinitionChanged)
	}
	res, err := s.Store.EventRaise(ctx, p)
	if errors.Is(err, storage.ErrDefinitionChanged) {
		s.changed.Add(1)
	}
	return res, err
}

// reads returns the definition reads so far (both kinds) and resets them.
func (s *defCountingStore) reads() (gets, currents int64) {
	return s.gets.Swap(0), s.currents.Swap(0)
}

func wantDefReads(t *testing.T, what string, s *defCountingStore, currents int64) {
	t.Helper()
	if g, c := s.reads(); g != 0 || c != currents {
		t.Fatalf("%s: %d EventDefinitionGet and %d EventDefinitionCurrent, want 0 and %d", what, g, c, currents)
	}
}

// otherNode opens a second handle on st's store (its own connections, as
// another process would have) and returns a client of the default tenant
// over it.
func otherNode(t *testing.T, st storage.Store) *herald.Client {
	t.Helper()
	loc, ok := storeLocations.Load(st)
	if !ok {
		t.Fatal("otherNode: the store was not opened by testStore")
	}
	other, err := openStore(context.Background(), loc.(string))
	if err != nil {
		t.Fatalf("open a second handle on the store: %v", err)
	}
	t.Cleanup(func() { other.Close() })
	return mustClient(other, herald.DefaultTenant, nil)
}

// A definition changed by another node applies to the next send of this
// runtime's client, which had cached the old one: a tightened schema
// refuses it, a loosened one accepts what the old one refused, and once
// the definition is deleted the default cap applies again.
func TestDefinition_ChangedOnAnotherNodeAppliesToNextSend(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	b := setupOn(t, st, &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadBytes: 200}}, dfRegister)
	other := on(t, otherNode(t, st))

	loose := json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)
	tight := json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"approver":{"type":"string"}},"required":["approved","approver"]}`)
	type approval struct {
		Approved bool   `json:"approved"`
		Approver string `json:"approver,omitempty"`
		Note     string `json:"note,omitempty"`
	}
	for _, lane := range []history.Lane{history.LaneQueue, history.LanePositional} {
		l := string(lane)
		// This node caches the loose definition.
		b.define(herald.EventDefinition{Name: "approval", Schema: loose, MaxPayloadBytes: 2000})
		b.send(lane, "i", "approval", approval{Approved: true}, l+"-1")
		b.send(lane, "i", "approval", approval{Approved: true, Note: strings.Repeat("x", 500)}, l+"-big")

		// Tightened elsewhere: refused here at once.
		other.define(herald.EventDefinition{Name: "approval", Schema: tight, MaxPayloadBytes: 2000})
		b.refused(lane, "i", "approval", approval{Approved: true}, l+"-2", "approver")
		b.send(lane, "i", "approval", approval{Approved: true, Approver: "ann"}, l+"-3")

		// Loosened elsewhere: what this node's cached definition refuses
		// is accepted.
		b.refused(lane, "i", "approval", approval{Approved: false}, l+"-4", "approver")
		other.define(herald.EventDefinition{Name: "approval", Schema: loose, MaxPayloadBytes: 2000})
		b.send(lane, "i", "approval", approval{Approved: false}, l+"-4")

		// Deleted elsewhere: the runtime's 200-byte cap applies again.
		if err := other.client.DeleteEventDefinition(other.ctx, "approval"); err != nil {
			t.Fatal(err)
		}
		b.refused(lane, "i", "approval", approval{Approved: true, Note: strings.Repeat("x", 500)}, l+"-5", "over the 200-byte cap")
		b.send(lane, "i", "approval", "no schema", l+"-6")

		// Created elsewhere while this node knows there is none.
		other.define(herald.EventDefinition{Name: "approval", Schema: tight})
		b.refused(lane, "i", "approval", "no schema", l+"-7", "/: ")
		if err := other.client.DeleteEventDefinition(other.ctx, "approval"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"queue-1", "queue-big", "queue-3", "queue-4", "queue-6",
		"positional-1", "positional-big", "positional-3", "positional-4", "positional-6"}
	if ids := b.eventIDs("i"); fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", ids, want)
	}
}

// A send reads its event's definition from the store once, not at every
// send: again only after this client's runtime changed it (at once, with no
// raise refused for it) or after a raise was refused because another node
// changed it. Every raise is conditional on the version it was validated
// against.
func TestDefinition_SendsReadDefinitionOncePerVersion(t *testing.T) {
	t.Parallel()
	raw := testStore(t)
	st := &defCountingStore{Store: raw}
	b := setupOn(t, st, nil, dfRegister)
	other := on(t, mustClient(raw, herald.DefaultTenant, nil))
	const n = 20
	sendAll := func(tag, name string, payload any) {
		t.Helper()
		for i := range n {
			b.send(history.LaneQueue, "i", name, payload, fmt.Sprintf("%s-%d", tag, i))
		}
	}
	st.reads()

	// No definition: read once.
	sendAll("none", "approval", 1)
	wantDefReads(t, "sends without a definition", st, 1)

	// Put through this runtime's client: the next send reads it, once, and
	// no raise is refused.
	b.define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"integer"}`)})
	st.reads()
	sendAll("v1", "approval", 1)
	wantDefReads(t, "sends after a put through this runtime", st, 1)
	b.refused(history.LaneQueue, "i", "approval", "x", "bad-v1", "want integer")
	wantDefReads(t, "a refused send (confirmed against the store)", st, 1)
	if c := st.changed.Load(); c != 0 {
		t.Fatalf("%d raises refused for a changed definition, want none", c)
	}

	// Concurrent sends of a cached definition read nothing.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range n {
				if _, err := b.client.Enqueue(b.ctx, "i", "approval", i, herald.WithEventID(fmt.Sprintf("c-%d-%d", g, i))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	wantDefReads(t, "concurrent sends", st, 0)

	// Changed through another client (as another node would): the first
	// send's raise is refused by the store, the send reads the new version
	// and validates against it; the following sends read nothing.
	other.define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"string"}`)})
	st.reads()
	b.refused(history.LaneQueue, "i", "approval", 1, "bad-v2", "want string")
	if c := st.changed.Swap(0); c != 1 {
		t.Fatalf("%d raises refused for a changed definition, want 1", c)
	}
	wantDefReads(t, "the send that found the definition changed", st, 1)
	sendAll("v2", "approval", "ok")
	wantDefReads(t, "sends after the change", st, 0)

	// Deleted through this runtime's client: read once more.
	if err := b.client.DeleteEventDefinition(b.ctx, "approval"); err != nil {
		t.Fatal(err)
	}
	sendAll("deleted", "approval", 1)
	wantDefReads(t, "sends after a delete through this runtime", st, 1)

	if r, c := st.raises.Load(), st.checked.Load(); r != c || r == 0 {
		t.Fatalf("%d raises, %d of them conditional on a definition version; want all", r, c)
	}
	if c := st.changed.Load(); c != 0 {
		t.Fatalf("%d raises refused for a changed definition after the other node's change, want none", c)
	}
}

// A send whose raise is refused for a changed definition at every attempt
// gives up after a few, nothing stored, with storage.ErrDefinitionChanged.
func TestDefinition_SendGivesUpWhenDefinitionKeepsChanging(t *testing.T) {
	t.Parallel()
	st := &defCountingStore{Store: testStore(t)}
	c := mustClient(st, herald.DefaultTenant, nil)
	st.refuseAll.Store(true)
	_, err := c.RaiseEvent(t.Context(), "i", "approval", true, herald.WithEventID("ev"))
	if !errors.Is(err, storage.ErrDefinitionChanged) {
		t.Fatalf("send: %v, want storage.ErrDefinitionChanged", err)
	}
	if r := st.raises.Load(); r != 4 {
		t.Fatalf("%d raises, want 4", r)
	}
	st.refuseAll.Store(false)
	if rec, err := c.EventFate(t.Context(), "ev"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("event stored: %+v, %v", rec, err)
	}
	on(t, c).send(history.LanePositional, "i", "approval", true, "ev")
}
