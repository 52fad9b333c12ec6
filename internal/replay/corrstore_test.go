package replay_test

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// corrStore simulates the correlated store (docs/correlated.md) around the
// harness's one instance, as storage.TurnCommitParams and
// storage.CorrelatedPutParams describe it: correlated events stored under
// (definition, key), the instance's waits as markers, a put delivering to
// them, a commit registering waits (or delivering a stored event at once),
// withdrawing them and handing on delete-after-first events (a withdrawn
// wait's delivery still in the inbox, an event a wait gave back).
type corrStore struct {
	deleteAfterFirst map[string]bool    // definition → delete_after_first_correlation
	stored           map[string]corrPut // definition/key → the stored correlated event
	markers          []corrMarker       // oldest first
	putOf            map[string]string  // produced event id → the put it carries
	handedOn         map[string]bool    // produced events the store dropped to hand them on (no breadcrumb)
	replaced         map[string]bool    // puts whose stored event a newer put replaced
	nextID           int
}

// corrPut is a put's payload: the put's id as a JSON string.
type corrPut struct {
	put     string
	payload json.RawMessage
}

type corrMarker struct {
	exec, seq int
	def, key  string
}

func newCorrStore() *corrStore {
	return &corrStore{deleteAfterFirst: map[string]bool{}, stored: map[string]corrPut{}, putOf: map[string]string{},
		handedOn: map[string]bool{}, replaced: map[string]bool{}}
}

// corrPut puts a correlated event (CorrelatedPut): it is stored (replacing
// the one stored under the key) and delivered to every marker on the key,
// or with delete-after-first to the oldest marker only, and then not kept.
func (h *harness) corrPut(def, key, put string) {
	h.t.Helper()
	c := h.corr
	ev := corrPut{put: put, payload: jsonOf(put)}
	if old, ok := c.stored[def+"/"+key]; ok {
		c.replaced[old.put] = true
	}
	c.stored[def+"/"+key] = ev
	for i := 0; i < len(c.markers); {
		m := c.markers[i]
		if m.def != def || m.key != key {
			i++
			continue
		}
		h.corrProduce(m, ev)
		c.markers = slices.Delete(c.markers, i, i+1)
		if c.deleteAfterFirst[def] {
			delete(c.stored, def+"/"+key)
			return
		}
	}
}

// corrProduce delivers a correlated event to a wait: an inbox message with
// a new event id, pending in the ledger.
func (h *harness) corrProduce(m corrMarker, ev corrPut) {
	c := h.corr
	c.nextID++
	id := fmt.Sprintf("k%d", c.nextID)
	msg := h.push(storage.Message{Kind: storage.MsgEvent, Lane: history.LaneCorrelated, EventID: id, Name: m.def, Key: m.key,
		Execution: m.exec, TaskSeq: m.seq, Payload: ev.payload})
	h.fates[id] = storage.FateUpdate{EventID: id, Fate: history.FatePending}
	h.raised = append(h.raised, raisedEvent{id: id, name: m.def, msg: msg, lane: history.LaneCorrelated})
	c.putOf[id] = ev.put
}

// corrHandOn hands a delete-after-first event on: to the oldest marker on
// its key (none of this instance if the commit ends the execution), or,
// with none, it is stored again unless a newer one is stored.
func (h *harness) corrHandOn(def, key string, ev corrPut, ending bool) {
	c := h.corr
	if !ending {
		for i, m := range c.markers {
			if m.def == def && m.key == key {
				h.corrProduce(m, ev)
				c.markers = slices.Delete(c.markers, i, i+1)
				return
			}
		}
	}
	if _, ok := c.stored[def+"/"+key]; ok {
		c.replaced[ev.put] = true
		return
	}
	c.stored[def+"/"+key] = ev
}

// corrCommit applies a turn's correlated-lane output, as TurnCommit does,
// after the turn's fates.
func (h *harness) corrCommit(exec int, out *replay.Output) {
	h.t.Helper()
	c := h.corr
	if c == nil {
		if len(out.CorrelatedWaits) > 0 || len(out.ReturnedCorrelated) > 0 {
			h.t.Fatalf("turn %d: correlated-lane output without a correlated store", h.turns)
		}
		return
	}
	ending := out.Status.Terminal() || out.ContinueAsNew != nil
	withdrawn := func(m storage.Message) bool {
		return m.Kind == storage.MsgEvent && m.Lane == history.LaneCorrelated && m.Execution == exec &&
			(ending || slices.Contains(out.CancelCorrelatedWaits, m.TaskSeq))
	}
	// Deliveries to withdrawn waits still in the inbox: a delete-after-first
	// one is handed on, a fan-out one left to the engine.
	for i := 0; i < len(h.inbox); {
		m := h.inbox[i]
		if !withdrawn(m) || !c.deleteAfterFirst[m.Name] {
			i++
			continue
		}
		h.inbox = slices.Delete(h.inbox, i, i+1)
		h.fates[m.EventID] = storage.FateUpdate{EventID: m.EventID, Fate: history.FateDropped, Reason: history.DropWithdrawnWait, Execution: exec}
		c.handedOn[m.EventID] = true
		h.corrHandOn(m.Name, m.Key, corrPut{put: c.putOf[m.EventID], payload: m.Payload}, ending)
	}
	c.markers = slices.DeleteFunc(c.markers, func(m corrMarker) bool {
		return ending || m.exec == exec && slices.Contains(out.CancelCorrelatedWaits, m.seq)
	})
	if !ending {
		for _, w := range out.CorrelatedWaits {
			if slices.Contains(out.CancelCorrelatedWaits, w.TaskSeq) {
				continue
			}
			m := corrMarker{exec: exec, seq: w.TaskSeq, def: w.Def, key: w.Key}
			if ev, ok := c.stored[w.Def+"/"+w.Key]; ok {
				h.corrProduce(m, ev)
				if c.deleteAfterFirst[w.Def] {
					delete(c.stored, w.Def+"/"+w.Key)
				}
				continue
			}
			c.markers = append(c.markers, m)
		}
	}
	for _, r := range out.ReturnedCorrelated {
		f := h.fates[r.EventID]
		if f.Fate != history.FateDropped || f.Reason != history.DropWithdrawnWait {
			h.t.Fatalf("turn %d: correlated event %s given back with fate %+v", h.turns, r.EventID, f)
		}
		if c.putOf[r.EventID] == "" || r.Def == "" {
			h.t.Fatalf("turn %d: given back %+v, which the store never produced", h.turns, r)
		}
		if c.deleteAfterFirst[r.Def] {
			h.corrHandOn(r.Def, r.Key, corrPut{put: c.putOf[r.EventID], payload: r.Payload}, ending)
		}
	}
}

// corrCheckEnd checks the correlated lane at the end of a run: the code
// received exactly the delivered copies of each put (received counts the
// code's receipts per put), a delete-after-first put was received at most
// once, and one not received is not lost: it is stored, a copy of it is
// still pending, or a newer put replaced it.
func (h *harness) corrCheckEnd(received map[string]int) {
	h.t.Helper()
	c := h.corr
	life := h.derive()
	delivered := map[string]int{}
	pending := map[string]bool{}
	for _, r := range h.raised {
		if r.lane != history.LaneCorrelated {
			continue
		}
		put := c.putOf[r.id]
		if l := life[r.id]; l != nil && l.fate == history.FateDelivered {
			delivered[put]++
		}
		if h.fates[r.id].Fate == history.FatePending {
			pending[put] = true
		}
	}
	puts := map[string]bool{}
	for _, p := range c.putOf {
		puts[p] = true
	}
	for p := range received {
		puts[p] = true
	}
	stored := map[string]bool{}
	for _, ev := range c.stored {
		stored[ev.put] = true
	}
	for p := range puts {
		if received[p] != delivered[p] {
			h.t.Fatalf("put %s: %d copies delivered, the code received %d", p, delivered[p], received[p])
		}
		def := p[1:2]
		if !c.deleteAfterFirst[def] {
			continue
		}
		if delivered[p] > 1 {
			h.t.Fatalf("delete-after-first put %s received %d times", p, delivered[p])
		}
		if delivered[p] == 0 && !stored[p] && !pending[p] && !c.replaced[p] && !h.status.Terminal() {
			h.t.Fatalf("delete-after-first put %s lost: never received, not stored, no copy pending", p)
		}
	}
}
