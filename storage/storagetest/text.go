package storagetest

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// maxText returns a string of exactly max bytes (when the runes allow it)
// made of seed's runes repeated: multi-byte runes, quotes, slashes, percent
// signs and escapes a backend might mishandle.
func maxText(seed string, max int) string {
	s := strings.Repeat(seed, max/len(seed)+1)
	for len(s) > max {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// testTextBoundaries: every text within storage.TextProblem's rules is
// stored and returned unchanged — ids, names and keys at their byte caps,
// made of multi-byte runes and characters SQL and JSON treat specially —
// through every call that stores or finds it, bookmarks included.
func testTextBoundaries(b *bundle) {
	t := b.t
	b = b.in(maxText("t€nant/", storage.MaxIDBytes))
	id := maxText(`é'"%_\/`+" 🎉", storage.MaxIDBytes)
	wf := maxText("wörkflow;DROP ", storage.MaxNameBytes)
	name := maxText("ñame*.>", storage.MaxNameBytes)
	eventID := maxText("ev€nt \u00a0", storage.MaxIDBytes)
	def := maxText("d€f", storage.MaxNameBytes)
	key := maxText(`k€y\u0000"`, storage.MaxKeyBytes)
	for what, s := range map[string]string{"tenant": b.tenant, "id": id, "workflow": wf, "name": name,
		"event id": eventID, "def": def, "key": key} {
		max := storage.MaxIDBytes
		switch what {
		case "workflow", "name", "def":
			max = storage.MaxNameBytes
		case "key":
			max = storage.MaxKeyBytes
		}
		if p := storage.TextProblem(s, max); p != "" || len(s) < max-3 {
			t.Fatalf("test bug: %s %s (%d bytes)", what, p, len(s))
		}
	}

	inst, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{Tenant: b.tenant, ID: id, Workflow: wf, Now: t0})
	if err != nil {
		t.Fatalf("InstanceCreate: %v", err)
	}
	wantEqual(t, "created ID", inst.ID, id)
	got := b.get(id)
	wantEqual(t, "ID", got.ID, id)
	wantEqual(t, "Tenant", got.Tenant, b.tenant)
	wantEqual(t, "Workflow", got.Workflow, wf)

	res, err := b.s.EventRaise(b.ctx, &storage.EventRaiseParams{Tenant: b.tenant, InstanceID: id, EventID: eventID,
		Lane: history.LaneQueue, Name: name, Payload: []byte(`"\u0000é"`), Now: t0})
	if err != nil {
		t.Fatalf("EventRaise: %v", err)
	}
	wantEqual(t, "receipt EventID", res.EventID, eventID)
	rec := b.event(eventID)
	wantEqual(t, "ledger EventID", rec.EventID, eventID)
	wantEqual(t, "ledger InstanceID", rec.InstanceID, id)
	wantEqual(t, "ledger Name", rec.Name, name)
	evs := b.events(id)
	if len(evs) != 1 || evs[0].EventID != eventID {
		t.Fatalf("EventList: %+v", evs)
	}
	again, err := b.s.EventRaise(b.ctx, &storage.EventRaiseParams{Tenant: b.tenant, InstanceID: id, EventID: eventID,
		Lane: history.LaneQueue, Name: name, Payload: []byte(`1`), Now: at(time.Second)})
	if err != nil || !again.Duplicate {
		t.Fatalf("EventRaise again: %+v, %v; want a duplicate", again, err)
	}

	turn := b.claimOne(id, t0)
	wantEqual(t, "turn ID", turn.Instance.ID, id)
	wantMessages(t, "turn", turn.Messages, "kick", "event:"+eventID)
	m := turn.Messages[1]
	wantEqual(t, "message EventID", m.EventID, eventID)
	wantEqual(t, "message Name", m.Name, name)
	wantJSON(t, "message Payload", m.Payload, `"\u0000é"`)

	// Correlated: the key also travels inside a search bookmark.
	b.corrPut(def, key, `1`, false, t0)
	b.corrPut(def, maxText("€"+key, storage.MaxKeyBytes), `2`, false, t0)
	ce := b.mustCorrGet(def, key)
	wantEqual(t, "correlated Def", ce.Def, def)
	wantEqual(t, "correlated Key", ce.Key, key)
	var keys []string
	bookmark := ""
	for range 3 {
		page, next := b.search(storage.CorrelatedSearchParams{Def: def, Limit: 1, Bookmark: bookmark})
		for _, c := range page {
			keys = append(keys, c.Key)
		}
		if bookmark = next; next == "" {
			break
		}
	}
	if len(keys) != 2 || (keys[0] != key && keys[1] != key) {
		t.Fatalf("search pages: %q", keys)
	}
}

// testInstanceTerminateFailure: InstanceTerminate with a Failure ends the
// instance failed, with ExecutionFailed in history, and drops its events as
// any end does.
func testInstanceTerminateFailure(b *bundle) {
	t := b.t
	b.create("a", t0)
	b.raise("a", "e1", "x", t0)
	f := &history.Failure{Kind: "corrupt", Message: "cannot decode"}
	dropped, err := b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "a",
		Now: at(time.Second), Failure: f})
	if err != nil {
		t.Fatalf("InstanceTerminate: %v", err)
	}
	if len(dropped) != 1 || dropped[0].EventID != "e1" || dropped[0].Reason != history.DropInstanceTerminal {
		t.Fatalf("dropped %+v", dropped)
	}
	got := b.get("a")
	wantEqual(t, "Status", got.Status, heraldtype.StatusFailed)
	if got.Failure == nil || got.Failure.Kind != f.Kind || got.Failure.Message != f.Message {
		t.Fatalf("Failure %+v, want %+v", got.Failure, f)
	}
	evs := b.history("a", 0)
	wantEqual(t, "last kind", evs[len(evs)-1].Kind, history.EventDropped)
	wantEqual(t, "end kind", evs[len(evs)-2].Kind, history.ExecutionFailed)
	wantEqual(t, "fate", b.event("e1").Fate, history.FateDropped)
	_, err = b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "a", Now: at(2 * time.Second)})
	wantErr(t, "InstanceTerminate of a failed instance", err, heraldtype.ErrInstanceNotRunning)
}

// testSearchBookmarkInvalid: a bookmark no search returned is refused with
// heraldtype.ErrInvalidArgument, whatever it holds.
func testSearchBookmarkInvalid(b *bundle) {
	for _, bm := range []string{"x", "!!", strings.Repeat("A", 1<<16), "YzE6eDpr", "YzE6MTprAGs", "YzE6MTpr_2s"} {
		_, _, err := b.s.CorrelatedSearch(b.ctx, &storage.CorrelatedSearchParams{Tenant: b.tenant, Def: "d", Bookmark: bm})
		wantErr(b.t, "CorrelatedSearch with bookmark "+bm[:min(len(bm), 12)], err, heraldtype.ErrInvalidArgument)
	}
}
