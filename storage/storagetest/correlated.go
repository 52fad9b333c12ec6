package storagetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// def is the event definition of the correlated-lane tests.
const def = "doc-signed"

// cw is a correlated wait on (def, key).
func cw(seq int, key string, deleteAfterFirst bool) storage.CorrelatedWait {
	return storage.CorrelatedWait{TaskSeq: seq, Def: def, Key: key, DeleteAfterFirst: deleteAfterFirst}
}

func (b *bundle) corrPutParams(def, key, payload string, deleteAfterFirst bool, now time.Time) *storage.CorrelatedPutParams {
	return &storage.CorrelatedPutParams{
		Tenant: b.tenant, Def: def, Key: key, Payload: json.RawMessage(payload),
		DeleteAfterFirst: deleteAfterFirst, Now: now,
	}
}

func (b *bundle) corrPut(def, key, payload string, deleteAfterFirst bool, now time.Time) *heraldtype.CorrelatedEvent {
	b.t.Helper()
	c, err := b.s.CorrelatedPut(b.ctx, b.corrPutParams(def, key, payload, deleteAfterFirst, now))
	if err != nil {
		b.t.Fatalf("CorrelatedPut(%s/%s): %v", def, key, err)
	}
	return c
}

func (b *bundle) corrGet(def, key string) (*heraldtype.CorrelatedEvent, error) {
	return b.s.CorrelatedGet(b.ctx, &storage.CorrelatedGetParams{Tenant: b.tenant, Def: def, Key: key})
}

func (b *bundle) mustCorrGet(def, key string) *heraldtype.CorrelatedEvent {
	b.t.Helper()
	c, err := b.corrGet(def, key)
	if err != nil {
		b.t.Fatalf("CorrelatedGet(%s/%s): %v", def, key, err)
	}
	return c
}

func (b *bundle) wantCorrGone(def, key string) {
	b.t.Helper()
	_, err := b.corrGet(def, key)
	wantErr(b.t, fmt.Sprintf("CorrelatedGet(%s/%s)", def, key), err, heraldtype.ErrNotFound)
}

func (b *bundle) search(p storage.CorrelatedSearchParams) ([]*heraldtype.CorrelatedEvent, string) {
	b.t.Helper()
	p.Tenant = b.tenant
	if p.Def == "" {
		p.Def = def
	}
	out, next, err := b.s.CorrelatedSearch(b.ctx, &p)
	if err != nil {
		b.t.Fatalf("CorrelatedSearch(%+v): %v", p, err)
	}
	return out, next
}

// turnOf claims every ready instance and returns id's turn (nil if id is
// not ready), abandoning the others.
func (b *bundle) turnOf(id string, now time.Time) *storage.Turn {
	b.t.Helper()
	var mine *storage.Turn
	for _, turn := range b.claimN(now, 1000) {
		if turn.Instance.ID == id {
			mine = turn
			continue
		}
		if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{
			Tenant: b.tenant, InstanceID: turn.Instance.ID, LockToken: turn.LockToken,
		}); err != nil {
			b.t.Fatalf("TurnAbandon(%s): %v", turn.Instance.ID, err)
		}
	}
	return mine
}

// startWaiting creates instance id and commits its first turn with waits.
func (b *bundle) startWaiting(id string, now time.Time, waits ...storage.CorrelatedWait) {
	b.t.Helper()
	b.create(id, now)
	turn := b.turnOf(id, now)
	if turn == nil {
		b.t.Fatalf("instance %s not claimable after create", id)
	}
	p := b.commitParams(turn, now)
	p.CorrelatedWaits = waits
	b.commit(p)
}

// poke makes a running instance claimable (a positional event) and returns
// its next turn.
func (b *bundle) poke(id string, now time.Time) *storage.Turn {
	b.t.Helper()
	b.raise(id, fmt.Sprintf("poke-%s-%d", id, now.UnixNano()), "poke", now)
	turn := b.turnOf(id, now)
	if turn == nil {
		b.t.Fatalf("instance %s not claimable after a raise", id)
	}
	return turn
}

// corrMsg describes a correlated message as "seq:key:payload".
func corrMsg(m storage.Message) string {
	return fmt.Sprintf("%d:%s:%s", m.TaskSeq, m.Key, m.Payload)
}

// wantDelivered claims instance id's turn, requires its correlated-lane
// messages to be want ("seq:key:payload", in order), checks each message
// and its ledger entry, and commits the turn (consuming them). It returns
// the messages.
func (b *bundle) wantDelivered(id string, now time.Time, want ...string) []storage.Message {
	b.t.Helper()
	t := b.t
	turn := b.turnOf(id, now)
	if turn == nil {
		if len(want) > 0 {
			t.Fatalf("instance %s has no turn, want correlated messages %v", id, want)
		}
		return nil
	}
	var (
		got  []string
		msgs []storage.Message
	)
	for _, m := range turn.Messages {
		if m.Lane != history.LaneCorrelated {
			continue
		}
		msgs = append(msgs, m)
		got = append(got, corrMsg(m))
		wantEqual(t, "correlated message Kind", m.Kind, storage.MsgEvent)
		wantEqual(t, "correlated message Name", m.Name, def)
		wantEqual(t, "correlated message Execution", m.Execution, turn.Instance.Execution)
		if m.EventID == "" {
			t.Fatalf("correlated message without an event id: %+v", m)
		}
		e := b.event(m.EventID)
		wantEqual(t, "produced event InstanceID", e.InstanceID, id)
		wantEqual(t, "produced event Lane", e.Lane, history.LaneCorrelated)
		wantEqual(t, "produced event Name", e.Name, def)
		wantEqual(t, "produced event Key", e.Key, m.Key)
		wantEqual(t, "produced event Fate", e.Fate, history.FatePending)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("instance %s: correlated messages %v, want %v", id, got, want)
	}
	b.commit(b.commitParams(turn, now))
	return msgs
}

// produced lists a correlated event's produced entries as "instance:seq".
func produced(c *heraldtype.CorrelatedEvent) []string {
	out := make([]string, len(c.Produced))
	for i, p := range c.Produced {
		out[i] = fmt.Sprintf("%s:%d", p.InstanceID, p.TaskSeq)
	}
	return out
}

func wantProduced(t *testing.T, what string, c *heraldtype.CorrelatedEvent, want ...string) {
	t.Helper()
	if got := produced(c); !slices.Equal(got, want) {
		t.Fatalf("%s: produced %v, want %v", what, got, want)
	}
}

func testCorrelatedCRUD(b *bundle) {
	t := b.t
	b.wantCorrGone(def, "k1")
	err := b.s.CorrelatedDelete(b.ctx, &storage.CorrelatedGetParams{Tenant: b.tenant, Def: def, Key: "k1"})
	wantErr(t, "CorrelatedDelete(missing)", err, heraldtype.ErrNotFound)

	c := b.corrPut(def, "k1", `{"v":1}`, false, t0)
	wantEqual(t, "Def", c.Def, def)
	wantEqual(t, "Key", c.Key, "k1")
	wantJSON(t, "Payload", c.Payload, `{"v":1}`)
	wantTime(t, "CreatedAt", c.CreatedAt, t0)
	wantTime(t, "UpdatedAt", c.UpdatedAt, t0)
	if !c.ExpiresAt.IsZero() || len(c.Produced) != 0 {
		t.Fatalf("new correlated event: ExpiresAt %v, Produced %v", c.ExpiresAt, c.Produced)
	}
	got := b.mustCorrGet(def, "k1")
	wantJSON(t, "get Payload", got.Payload, `{"v":1}`)
	wantTime(t, "get CreatedAt", got.CreatedAt, t0)

	// An update changes payload, UpdatedAt and ExpiresAt, not CreatedAt.
	p := b.corrPutParams(def, "k1", `{"v":2}`, false, at(time.Second))
	p.ExpiresAt = at(time.Hour)
	c, err = b.s.CorrelatedPut(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*heraldtype.CorrelatedEvent{c, b.mustCorrGet(def, "k1")} {
		wantJSON(t, "updated Payload", c.Payload, `{"v":2}`)
		wantTime(t, "updated CreatedAt", c.CreatedAt, t0)
		wantTime(t, "updated UpdatedAt", c.UpdatedAt, at(time.Second))
		wantTime(t, "updated ExpiresAt", c.ExpiresAt, at(time.Hour))
	}

	// Payloads are kept byte for byte, including "" and null; a missing one
	// stays missing.
	for key, payload := range map[string]string{"empty-string": `""`, "null": `null`, "spaced": `{ "a" : [1, 2] }`, "none": ``} {
		b.corrPut(def, key, payload, false, t0)
		wantJSON(t, "payload of "+key, b.mustCorrGet(def, key).Payload, payload)
	}

	// The same key under another definition is another correlated event.
	b.corrPut("other-def", "k1", `"other"`, false, t0)
	wantJSON(t, "other definition's payload", b.mustCorrGet("other-def", "k1").Payload, `"other"`)
	wantJSON(t, "payload after the other definition's put", b.mustCorrGet(def, "k1").Payload, `{"v":2}`)

	// Bad input is refused, nothing panics.
	for _, p := range []*storage.CorrelatedPutParams{
		nil,
		{Tenant: b.tenant, Def: "", Key: "k", Now: t0},
		{Tenant: b.tenant, Def: def, Key: "", Now: t0},
	} {
		if _, err := b.s.CorrelatedPut(b.ctx, p); err == nil {
			t.Fatalf("CorrelatedPut(%+v) succeeded", p)
		}
	}
	if _, err := b.s.CorrelatedGet(b.ctx, nil); err == nil {
		t.Fatal("CorrelatedGet(nil) succeeded")
	}
	if err := b.s.CorrelatedDelete(b.ctx, nil); err == nil {
		t.Fatal("CorrelatedDelete(nil) succeeded")
	}
	if _, _, err := b.s.CorrelatedSearch(b.ctx, nil); err == nil {
		t.Fatal("CorrelatedSearch(nil) succeeded")
	}
	if _, err := b.s.CorrelatedExpire(b.ctx, nil); err == nil {
		t.Fatal("CorrelatedExpire(nil) succeeded")
	}

	if err := b.s.CorrelatedDelete(b.ctx, &storage.CorrelatedGetParams{Tenant: b.tenant, Def: def, Key: "k1"}); err != nil {
		t.Fatalf("CorrelatedDelete: %v", err)
	}
	b.wantCorrGone(def, "k1")
	err = b.s.CorrelatedDelete(b.ctx, &storage.CorrelatedGetParams{Tenant: b.tenant, Def: def, Key: "k1"})
	wantErr(t, "second CorrelatedDelete", err, heraldtype.ErrNotFound)
	b.mustCorrGet("other-def", "k1")

	// Put again after a delete: a new event.
	c = b.corrPut(def, "k1", `3`, false, at(time.Minute))
	wantTime(t, "CreatedAt after delete and put", c.CreatedAt, at(time.Minute))
}

func testCorrelatedSearch(b *bundle) {
	t := b.t
	const n = 1000
	type item struct {
		key     string
		created time.Time
	}
	items := make([]item, n)
	for i := range n {
		// Many events share a creation time: the key orders them.
		items[i] = item{key: fmt.Sprintf("k%04d", i), created: at(time.Duration((i*37)%97) * time.Second)}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(n, func(i, j int) { items[i], items[j] = items[j], items[i] })

	// Put them concurrently, in random order.
	var wg sync.WaitGroup
	work := make(chan item)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if _, err := b.s.CorrelatedPut(b.ctx, b.corrPutParams(def, it.key, `{"k":"`+it.key+`"}`, false, it.created)); err != nil {
					t.Errorf("CorrelatedPut(%s): %v", it.key, err)
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Events of another definition never show.
	for i := range 5 {
		b.corrPut("other-def", fmt.Sprintf("k%04d", i), `1`, false, t0)
	}
	slices.SortFunc(items, func(x, y item) int {
		if c := x.created.Compare(y.created); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	})
	want := make([]string, 0, n+1)
	for _, it := range items {
		want = append(want, it.key)
	}

	// Page through with the default limit (100). After the third page, an
	// event created before the bookmark (not seen: the pages are past it)
	// and one created after every other (seen last) are put.
	var (
		seen     []string
		bookmark string
		pages    int
	)
	for {
		page, next := b.search(storage.CorrelatedSearchParams{Bookmark: bookmark})
		pages++
		if len(page) == 0 {
			t.Fatalf("page %d is empty", pages)
		}
		if len(page) > 100 {
			t.Fatalf("page %d has %d events, want at most 100", pages, len(page))
		}
		if next != "" && len(page) != 100 {
			t.Fatalf("page %d has %d events and a next page", pages, len(page))
		}
		for _, c := range page {
			wantEqual(t, "search Def", c.Def, def)
			wantJSON(t, "search Payload", c.Payload, `{"k":"`+c.Key+`"}`)
			seen = append(seen, c.Key)
		}
		if pages == 3 {
			b.corrPut(def, "a-early", `{"k":"a-early"}`, false, at(-time.Hour))
			b.corrPut(def, "z-late", `{"k":"z-late"}`, false, at(1000*time.Hour))
		}
		if next == "" {
			break
		}
		bookmark = next
	}
	want = append(want, "z-late")
	if !slices.Equal(seen, want) {
		for i := range min(len(seen), len(want)) {
			if seen[i] != want[i] {
				t.Fatalf("paging: event %d is %s, want %s (%d seen, %d wanted)", i, seen[i], want[i], len(seen), len(want))
			}
		}
		t.Fatalf("paging: %d events seen, want %d", len(seen), len(want))
	}
	wantEqual(t, "pages", pages, (n+1+99)/100)

	// Limits: explicit, capped at 1000.
	page, next := b.search(storage.CorrelatedSearchParams{Limit: 7})
	if len(page) != 7 || next == "" || page[0].Key != "a-early" {
		t.Fatalf("Limit 7: %d events from %s, next %q", len(page), page[0].Key, next)
	}
	page, next = b.search(storage.CorrelatedSearchParams{Limit: 5000})
	if len(page) != 1000 || next == "" {
		t.Fatalf("Limit 5000: %d events, next %q; want 1000 and a next page", len(page), next)
	}
	page, next = b.search(storage.CorrelatedSearchParams{Limit: 1000, Bookmark: next})
	if len(page) != 2 || next != "" {
		t.Fatalf("after 1000: %d events, next %q; want 2 and none", len(page), next)
	}

	// Earliest and Latest are inclusive bounds on CreatedAt.
	var inRange []string
	for _, it := range items {
		if !it.created.Before(at(10*time.Second)) && !it.created.After(at(12*time.Second)) {
			inRange = append(inRange, it.key)
		}
	}
	page, next = b.search(storage.CorrelatedSearchParams{Earliest: at(10 * time.Second), Latest: at(12 * time.Second), Limit: 1000})
	if got := keysOf(page); !slices.Equal(got, inRange) || next != "" {
		t.Fatalf("Earliest/Latest: %v (next %q), want %v", got, next, inRange)
	}
	page, _ = b.search(storage.CorrelatedSearchParams{Latest: at(-time.Hour)})
	if got := keysOf(page); !slices.Equal(got, []string{"a-early"}) {
		t.Fatalf("Latest only: %v", got)
	}
	page, _ = b.search(storage.CorrelatedSearchParams{Earliest: at(999 * time.Hour)})
	if got := keysOf(page); !slices.Equal(got, []string{"z-late"}) {
		t.Fatalf("Earliest only: %v", got)
	}

	// HasProduced: an instance waiting on k0005 (delivered at once) makes it
	// the only one with produced events.
	b.startWaiting("w", at(2000*time.Hour), cw(2, "k0005", false))
	yes := true
	page, next = b.search(storage.CorrelatedSearchParams{HasProduced: &yes})
	if got := keysOf(page); !slices.Equal(got, []string{"k0005"}) || next != "" {
		t.Fatalf("HasProduced=true: %v (next %q)", got, next)
	}
	wantProduced(t, "k0005 in a search", page[0], "w:2")
	no := false
	count := 0
	for bookmark = ""; ; {
		page, next := b.search(storage.CorrelatedSearchParams{HasProduced: &no, Limit: 300, Bookmark: bookmark})
		for _, c := range page {
			count++
			if c.Key == "k0005" || len(c.Produced) != 0 {
				t.Fatalf("HasProduced=false returned %s with %v", c.Key, c.Produced)
			}
		}
		if next == "" {
			break
		}
		bookmark = next
	}
	wantEqual(t, "events with nothing produced", count, n+2-1)

	// Empty results, a bad bookmark.
	page, next = b.search(storage.CorrelatedSearchParams{Def: "no-such-def"})
	if len(page) != 0 || next != "" {
		t.Fatalf("search of an unknown definition: %v, %q", keysOf(page), next)
	}
	if _, _, err := b.s.CorrelatedSearch(b.ctx, &storage.CorrelatedSearchParams{Tenant: b.tenant, Def: def, Bookmark: "not a bookmark!"}); err == nil {
		t.Fatal("CorrelatedSearch with a bad bookmark succeeded")
	}
}

func keysOf(cs []*heraldtype.CorrelatedEvent) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}

func testCorrelatedPutThenWait(b *bundle) {
	t := b.t
	b.corrPut(def, "doc1", `{"signed":true}`, false, t0)

	// A wait on an existing correlated event gets it at once.
	b.startWaiting("a", at(time.Second), cw(2, "doc1", false))
	msgs := b.wantDelivered("a", at(time.Second), `2:doc1:{"signed":true}`)
	e := b.event(msgs[0].EventID)
	wantTime(t, "produced event ReceivedAt", e.ReceivedAt, at(time.Second))
	c := b.mustCorrGet(def, "doc1")
	wantProduced(t, "after a's wait", c, "a:2")
	pe := c.Produced[0]
	wantEqual(t, "Produced EventID", pe.EventID, msgs[0].EventID)
	wantEqual(t, "Produced Execution", pe.Execution, 1)
	wantTime(t, "Produced CreatedAt", pe.CreatedAt, at(time.Second))

	// Without delete-after-first every later wait gets it too, two waits
	// of one turn included; a wait on another key gets nothing.
	b.startWaiting("b", at(2*time.Second), cw(2, "doc1", false), cw(3, "doc1", false), cw(4, "doc2", false))
	b.wantDelivered("b", at(2*time.Second), `2:doc1:{"signed":true}`, `3:doc1:{"signed":true}`)
	wantProduced(t, "after b's waits", b.mustCorrGet(def, "doc1"), "a:2", "b:2", "b:3")

	// The update is what later waits get.
	b.corrPut(def, "doc1", `{"signed":"again"}`, false, at(3*time.Second))
	b.startWaiting("c", at(4*time.Second), cw(2, "doc1", false))
	b.wantDelivered("c", at(4*time.Second), `2:doc1:{"signed":"again"}`)

	// The produced events are ordinary ledger entries with their key.
	evs, err := b.s.EventList(b.ctx, &storage.EventListParams{Tenant: b.tenant, Lane: history.LaneCorrelated})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Fatalf("ledger has %d correlated events, want 4", len(evs))
	}
	for _, e := range evs {
		wantEqual(t, "ledger Key", e.Key, "doc1")
	}
	// Other lanes have no key.
	b.raise("c", "plain", "x", at(5*time.Second))
	wantEqual(t, "positional event Key", b.event("plain").Key, "")
}

func testCorrelatedWaitThenPut(b *bundle) {
	t := b.t
	for i := range 5 {
		b.startWaiting(fmt.Sprintf("i%d", i), at(time.Duration(i+1)*time.Second), cw(2, "k", false))
	}
	b.startWaiting("multi", at(6*time.Second), cw(2, "k", false), cw(3, "k", false))
	b.startWaiting("other-key", at(7*time.Second), cw(2, "k2", false))
	b.create("other-def", at(8*time.Second))
	turn := b.turnOf("other-def", at(8*time.Second))
	p := b.commitParams(turn, at(8*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{{TaskSeq: 2, Def: "other-def", Key: "k"}}
	b.commit(p)
	b.claimNone(at(9 * time.Second))

	ch, cancel := b.s.SubscribeKinds(b.tenant, storage.WorkAll)
	defer cancel()
	select {
	case <-ch:
	default:
	}
	now := at(10 * time.Second)
	c := b.corrPut(def, "k", `"hello"`, false, now)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal after a put that delivered")
	}
	// Fan-out, oldest marker first.
	wantProduced(t, "put", c, "i0:2", "i1:2", "i2:2", "i3:2", "i4:2", "multi:2", "multi:3")
	wantProduced(t, "get", b.mustCorrGet(def, "k"), "i0:2", "i1:2", "i2:2", "i3:2", "i4:2", "multi:2", "multi:3")
	for i := range 5 {
		b.wantDelivered(fmt.Sprintf("i%d", i), now, `2:k:"hello"`)
	}
	b.wantDelivered("multi", now, `2:k:"hello"`, `3:k:"hello"`)
	b.wantDelivered("other-key", now)
	b.wantDelivered("other-def", now)

	// The markers are gone: the next put reaches nobody new.
	c = b.corrPut(def, "k", `"again"`, false, at(11*time.Second))
	wantEqual(t, "produced after the second put", len(c.Produced), 7)
	b.claimNone(at(11 * time.Second))

	// The other markers are still there.
	c = b.corrPut(def, "k2", `2`, false, at(12*time.Second))
	wantProduced(t, "put on k2", c, "other-key:2")
	b.wantDelivered("other-key", at(12*time.Second), `2:k2:2`)
	c = b.corrPut("other-def", "k", `3`, false, at(13*time.Second))
	wantProduced(t, "put on the other definition", c, "other-def:2")
}

func testCorrelatedDeleteAfterFirst(b *bundle) {
	t := b.t
	// Wait, then put: only the oldest waiter receives it.
	b.startWaiting("a", at(1*time.Second), cw(2, "k", true))
	b.startWaiting("b", at(2*time.Second), cw(2, "k", true))
	c := b.corrPut(def, "k", `1`, true, at(3*time.Second))
	wantProduced(t, "delete-after-first put", c, "a:2")
	wantJSON(t, "returned payload", c.Payload, `1`)
	b.wantCorrGone(def, "k")
	b.wantDelivered("a", at(3*time.Second), `2:k:1`)
	b.wantDelivered("b", at(3*time.Second))
	// b kept its marker: the next put is its.
	c = b.corrPut(def, "k", `2`, true, at(4*time.Second))
	wantProduced(t, "second put", c, "b:2")
	b.wantCorrGone(def, "k")
	b.wantDelivered("b", at(4*time.Second), `2:k:2`)

	// Nobody waits: the event is kept until the first wait.
	c = b.corrPut(def, "k", `3`, true, at(5*time.Second))
	wantProduced(t, "put with no waiter", c)
	b.mustCorrGet(def, "k")
	b.startWaiting("c", at(6*time.Second), cw(2, "k", true))
	b.wantDelivered("c", at(6*time.Second), `2:k:3`)
	b.wantCorrGone(def, "k")
	// The next waiter gets nothing and keeps its marker.
	b.startWaiting("d", at(7*time.Second), cw(2, "k", true))
	b.wantDelivered("d", at(7*time.Second))
	c = b.corrPut(def, "k", `4`, true, at(8*time.Second))
	wantProduced(t, "put for d", c, "d:2")
	b.wantDelivered("d", at(8*time.Second), `2:k:4`)

	// Two waits of one turn on a kept event: the first takes it, the second
	// waits for the next put.
	b.corrPut(def, "k", `5`, true, at(9*time.Second))
	b.startWaiting("e", at(10*time.Second), cw(2, "k", true), cw(3, "k", true))
	b.wantDelivered("e", at(10*time.Second), `2:k:5`)
	b.wantCorrGone(def, "k")
	b.corrPut(def, "k", `6`, true, at(11*time.Second))
	b.wantDelivered("e", at(11*time.Second), `3:k:6`)
	b.wantCorrGone(def, "k")

	evs, err := b.s.EventList(b.ctx, &storage.EventListParams{Tenant: b.tenant, Lane: history.LaneCorrelated})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "deliveries", len(evs), 6)
}

func testCorrelatedCancel(b *bundle) {
	t := b.t
	b.startWaiting("a", at(time.Second), cw(2, "k", false), cw(3, "k2", false))
	turn := b.poke("a", at(2*time.Second))
	p := b.commitParams(turn, at(2*time.Second))
	p.CancelCorrelatedWaits = []int{2, 99} // 99 has no marker: ignored
	b.commit(p)

	c := b.corrPut(def, "k", `1`, false, at(3*time.Second))
	wantProduced(t, "put after the wait was withdrawn", c)
	b.wantDelivered("a", at(3*time.Second))
	no, yes := false, true
	page, _ := b.search(storage.CorrelatedSearchParams{HasProduced: &no})
	if got := keysOf(page); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("HasProduced=false: %v, want [k]", got)
	}
	page, _ = b.search(storage.CorrelatedSearchParams{HasProduced: &yes})
	if len(page) != 0 {
		t.Fatalf("HasProduced=true: %v, want none", keysOf(page))
	}
	// The other marker of a is still there.
	c = b.corrPut(def, "k2", `2`, false, at(4*time.Second))
	wantProduced(t, "put on k2", c, "a:3")
	b.wantDelivered("a", at(4*time.Second), `3:k2:2`)

	// A wait made and withdrawn in the same turn is neither registered nor
	// delivered to.
	b.create("b", at(5*time.Second))
	turn = b.turnOf("b", at(5*time.Second))
	p = b.commitParams(turn, at(5*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{cw(2, "k", false), cw(3, "k3", false)}
	p.CancelCorrelatedWaits = []int{2, 3}
	b.commit(p)
	b.wantDelivered("b", at(5*time.Second))
	wantProduced(t, "k after b's withdrawn wait", b.mustCorrGet(def, "k"))
	c = b.corrPut(def, "k3", `3`, false, at(6*time.Second))
	wantProduced(t, "k3 after b's withdrawn wait", c)
	b.claimNone(at(6 * time.Second))
}

func testCorrelatedMarkersEnd(b *bundle) {
	t := b.t
	// a completes, b continues as new, c is terminated, d keeps waiting.
	for i, id := range []string{"a", "b", "c", "d"} {
		b.startWaiting(id, at(time.Duration(i+1)*time.Second), cw(2, "k", false))
	}
	now := at(10 * time.Second)
	turn := b.poke("a", now)
	p := b.commitParams(turn, now)
	p.Status = heraldtype.StatusCompleted
	b.commit(p)

	turn = b.poke("b", now)
	p = b.commitParams(turn, now)
	started := ev(1, history.ExecutionStarted, now)
	started.Workflow, started.Execution = "wf", 2
	p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{started}}
	b.commit(p)
	turn = b.turnOf("b", now)
	b.commit(b.commitParams(turn, now)) // the new execution's first turn, waiting for nothing

	if _, err := b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "c", Reason: "test", Now: now}); err != nil {
		t.Fatal(err)
	}

	c := b.corrPut(def, "k", `1`, false, at(11*time.Second))
	wantProduced(t, "put", c, "d:2")
	b.wantDelivered("d", at(11*time.Second), `2:k:1`)
	b.claimNone(at(11 * time.Second))
	// The new execution of b waits on k again: it gets the event (fresh seq).
	turn = b.poke("b", at(12*time.Second))
	p = b.commitParams(turn, at(12*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{cw(5, "k", false)}
	b.commit(p)
	msgs := b.wantDelivered("b", at(12*time.Second), `5:k:1`)
	wantEqual(t, "Execution of b's message", msgs[0].Execution, 2)

	// A turn that ends the instance or continues it as new registers no
	// waits and receives nothing, even if the correlated event exists.
	b.startWaiting("e", at(13*time.Second))
	turn = b.poke("e", at(14*time.Second))
	p = b.commitParams(turn, at(14*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{cw(3, "k", true), cw(4, "k9", false)}
	p.Status = heraldtype.StatusFailed
	b.commit(p)
	b.startWaiting("f", at(15*time.Second))
	turn = b.poke("f", at(16*time.Second))
	p = b.commitParams(turn, at(16*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{cw(3, "k", true), cw(4, "k9", false)}
	started = ev(1, history.ExecutionStarted, at(16*time.Second))
	started.Workflow, started.Execution = "wf", 2
	p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{started}}
	b.commit(p)
	b.commit(b.commitParams(b.turnOf("f", at(16*time.Second)), at(16*time.Second)))
	wantProduced(t, "k after e and f ended", b.mustCorrGet(def, "k"), "d:2", "b:5")
	c = b.corrPut(def, "k9", `9`, false, at(17*time.Second))
	wantProduced(t, "k9", c)
	b.claimNone(at(17 * time.Second))
}

func testCorrelatedExpire(b *bundle) {
	t := b.t
	put := func(d, key string, expires time.Time, now time.Time) *heraldtype.CorrelatedEvent {
		t.Helper()
		p := b.corrPutParams(d, key, `"`+key+`"`, false, now)
		p.ExpiresAt = expires
		c, err := b.s.CorrelatedPut(b.ctx, p)
		if err != nil {
			t.Fatalf("CorrelatedPut(%s): %v", key, err)
		}
		return c
	}
	expire := func(now time.Time, limit int, want ...string) {
		t.Helper()
		got, err := b.s.CorrelatedExpire(b.ctx, &storage.CorrelatedExpireParams{Tenant: b.tenant, Now: now, Limit: limit})
		if err != nil {
			t.Fatalf("CorrelatedExpire: %v", err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("CorrelatedExpire(%v, %d) = %v, want %v", now.Sub(t0), limit, got, want)
		}
	}
	put(def, "k1", at(time.Hour), t0)
	put(def, "k2", at(2*time.Hour), t0)
	put(def, "k3", time.Time{}, t0)
	put("d2", "k4", at(time.Hour), t0)
	// k1 produced an event: its produced list goes with it, the ledger
	// entry stays.
	b.startWaiting("w", at(time.Minute), cw(2, "k1", false))
	msgs := b.wantDelivered("w", at(time.Minute), `2:k1:"k1"`)

	expire(at(30*time.Minute), 0)
	expire(at(time.Hour), 1, "k4") // ties: by definition ("d2" < "doc-signed"), then key
	expire(at(time.Hour), 0, "k1")
	expire(at(3*time.Hour), 0, "k2")
	expire(at(1000*time.Hour), 0)
	b.wantCorrGone(def, "k1")
	b.wantCorrGone(def, "k2")
	b.wantCorrGone("d2", "k4")
	b.mustCorrGet(def, "k3")
	wantEqual(t, "ledger entry of an expired event's delivery", b.event(msgs[0].EventID).Key, "k1")
	c := put(def, "k1", time.Time{}, at(4*time.Hour))
	wantTime(t, "CreatedAt of k1 put again", c.CreatedAt, at(4*time.Hour))
	wantProduced(t, "k1 put again", c)

	// Past its ExpiresAt but not swept yet: a wait does not get it, and a
	// put replaces it (new CreatedAt, produced list cleared) and delivers.
	put(def, "k5", at(5*time.Hour), at(4*time.Hour))
	b.startWaiting("x", at(4*time.Hour+time.Minute), cw(2, "k5", false))
	b.wantDelivered("x", at(4*time.Hour+time.Minute), `2:k5:"k5"`)
	b.startWaiting("y", at(6*time.Hour), cw(2, "k5", false))
	b.wantDelivered("y", at(6*time.Hour))
	c = put(def, "k5", time.Time{}, at(7*time.Hour))
	wantTime(t, "CreatedAt of a replaced expired event", c.CreatedAt, at(7*time.Hour))
	wantProduced(t, "replaced expired event", c, "y:2")
	b.wantDelivered("y", at(7*time.Hour), `2:k5:"k5"`)
	expire(at(1000*time.Hour), 0)

	// The limit.
	for i := range 5 {
		put(def, fmt.Sprintf("m%d", i), at(2000*time.Hour+time.Duration(i)*time.Second), at(8*time.Hour))
	}
	expire(at(3000*time.Hour), 2, "m0", "m1")
	expire(at(3000*time.Hour), 0, "m2", "m3", "m4")
}

func testCorrelatedTenants(b *bundle) {
	t := b.t
	other := b.in(b.tenant + "-b")
	other.startWaiting("x", t0, cw(2, "k", false))
	b.startWaiting("x", t0, cw(2, "k-a", false))

	c := b.corrPut(def, "k", `"a"`, false, at(time.Second))
	wantProduced(t, "put in tenant a", c)
	other.wantDelivered("x", at(time.Second))
	other.wantCorrGone(def, "k")
	if page, next := other.search(storage.CorrelatedSearchParams{}); len(page) != 0 || next != "" {
		t.Fatalf("search in tenant b: %v", keysOf(page))
	}
	p := b.corrPutParams(def, "gone", `1`, false, t0)
	p.ExpiresAt = at(time.Minute)
	if _, err := b.s.CorrelatedPut(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	if keys, err := other.s.CorrelatedExpire(b.ctx, &storage.CorrelatedExpireParams{Tenant: other.tenant, Now: at(time.Hour)}); err != nil || len(keys) != 0 {
		t.Fatalf("expire in tenant b: %v, %v", keys, err)
	}
	b.mustCorrGet(def, "gone")
	err := other.s.CorrelatedDelete(b.ctx, &storage.CorrelatedGetParams{Tenant: other.tenant, Def: def, Key: "k"})
	wantErr(t, "delete in tenant b", err, heraldtype.ErrNotFound)
	b.mustCorrGet(def, "k")

	// Tenant b's own put reaches its own x only.
	c = other.corrPut(def, "k", `"b"`, false, at(2*time.Second))
	wantProduced(t, "put in tenant b", c, "x:2")
	other.wantDelivered("x", at(2*time.Second), `2:k:"b"`)
	b.wantDelivered("x", at(2*time.Second))
	c = other.corrPut(def, "k-a", `"b"`, false, at(3*time.Second))
	wantProduced(t, "put of k-a in tenant b", c)
	b.wantDelivered("x", at(3*time.Second))
	c = b.corrPut(def, "k-a", `"a"`, false, at(4*time.Second))
	wantProduced(t, "put of k-a in tenant a", c, "x:2")
	wantJSON(t, "tenant a's k", b.mustCorrGet(def, "k").Payload, `"a"`)
}

// testCorrelatedConcurrentDeleteAfterFirst races turn commits that register
// delete-after-first waits on one key with a put of that key: exactly one
// waiter receives it.
func testCorrelatedConcurrentDeleteAfterFirst(b *bundle) {
	t := b.t
	const n = 20
	for i := range n {
		b.create(fmt.Sprintf("i%02d", i), t0)
	}
	turns := b.claimN(t0, n)
	if len(turns) != n {
		t.Fatalf("claimed %d turns, want %d", len(turns), n)
	}
	var wg sync.WaitGroup
	for i, turn := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := b.commitParams(turn, at(time.Second))
			p.CorrelatedWaits = []storage.CorrelatedWait{cw(2, "k", true)}
			if _, err := b.s.TurnCommit(b.ctx, p); err != nil {
				t.Errorf("TurnCommit(%s): %v", turn.Instance.ID, err)
			}
		}()
		if i == n/2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.s.CorrelatedPut(b.ctx, b.corrPutParams(def, "k", `1`, true, at(time.Second))); err != nil {
					t.Errorf("CorrelatedPut: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	evs, err := b.s.EventList(b.ctx, &storage.EventListParams{Tenant: b.tenant, Lane: history.LaneCorrelated})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d deliveries, want exactly 1", len(evs))
	}
	b.wantCorrGone(def, "k")
	turns = b.claimN(at(time.Second), n)
	if len(turns) != 1 || turns[0].Instance.ID != evs[0].InstanceID {
		t.Fatalf("claimable after the race: %v, want [%s]", turnIDs(turns), evs[0].InstanceID)
	}
}

func testLeaderElection(b *bundle) {
	t := b.t
	elect := func(bb *bundle, name, holder string, now time.Time) bool {
		t.Helper()
		ok, err := bb.s.LeaderElect(bb.ctx, &storage.LeaderElectParams{Tenant: bb.tenant, Name: name, Holder: holder, Lease: 10 * time.Second, Now: now})
		if err != nil {
			t.Fatalf("LeaderElect(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	resign := func(name, holder string) {
		t.Helper()
		if err := b.s.LeaderResign(b.ctx, &storage.LeaderElectParams{Tenant: b.tenant, Name: name, Holder: holder}); err != nil {
			t.Fatalf("LeaderResign(%s, %s): %v", name, holder, err)
		}
	}
	want := func(what string, got, want bool) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: leads %v, want %v", what, got, want)
		}
	}
	want("A first", elect(b, "maint", "A", t0), true)
	want("B while A leads", elect(b, "maint", "B", at(time.Second)), false)
	want("A renews", elect(b, "maint", "A", at(5*time.Second)), true) // until 15 s
	want("B at the end of A's lease", elect(b, "maint", "B", at(15*time.Second)), false)
	want("B after A's lease", elect(b, "maint", "B", at(15*time.Second+time.Nanosecond)), true)
	want("A after the takeover", elect(b, "maint", "A", at(16*time.Second)), false)
	resign("maint", "A") // not the holder: nothing happens
	want("A after resigning what it did not hold", elect(b, "maint", "A", at(17*time.Second)), false)
	want("B renews", elect(b, "maint", "B", at(17*time.Second)), true)
	resign("maint", "B")
	want("A after B resigned", elect(b, "maint", "A", at(18*time.Second)), true)
	// A holder renews even a lease that ran out, if nobody took it.
	want("A renews late", elect(b, "maint", "A", at(time.Hour)), true)

	// Names and tenants are independent.
	want("B on another name", elect(b, "other", "B", at(time.Hour)), true)
	want("B in another tenant", elect(b.in(b.tenant+"-x"), "maint", "B", at(time.Hour)), true)

	// Bad input.
	for _, p := range []*storage.LeaderElectParams{
		nil,
		{Tenant: b.tenant, Name: "maint", Holder: "A", Lease: 0, Now: t0},
		{Tenant: b.tenant, Name: "maint", Holder: "", Lease: time.Second, Now: t0},
		{Tenant: b.tenant, Name: "", Holder: "A", Lease: time.Second, Now: t0},
	} {
		if _, err := b.s.LeaderElect(b.ctx, p); err == nil {
			t.Fatalf("LeaderElect(%+v) succeeded", p)
		}
	}
	if err := b.s.LeaderResign(b.ctx, nil); err == nil {
		t.Fatal("LeaderResign(nil) succeeded")
	}

	// Candidates racing for a free leadership: exactly one wins.
	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("h%d", i)
			ok, err := b.s.LeaderElect(b.ctx, &storage.LeaderElectParams{Tenant: b.tenant, Name: "race", Holder: holder, Lease: time.Minute, Now: t0})
			if err != nil {
				t.Errorf("LeaderElect(%s): %v", holder, err)
				return
			}
			if ok {
				mu.Lock()
				wins = append(wins, holder)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("winners of a race: %v, want exactly one", wins)
	}
}

// testCorrelatedWithdrawnDelivery: a delete-after-first put delivers to a
// wait while the instance's turn, claimed before the put, decides to
// withdraw that wait. The commit hands the event on: to the oldest other
// waiter, or, with none, it is stored again; the withdrawing instance keeps
// no message for the wait.
func testCorrelatedWithdrawnDelivery(b *bundle) {
	t := b.t
	b.putDef(heraldtype.EventDefinition{Name: def, Correlation: &heraldtype.CorrelationConfig{DeleteAfterFirstCorrelation: true}}, at(0))

	// raceCancel claims id's turn, puts payload on key (delivered to id's
	// wait seq 2), then commits the claimed turn withdrawing seq 2 (or
	// ending the instance). It returns the put's delivery.
	raceCancel := func(id, key, payload string, now time.Time, end func(*storage.TurnCommitParams)) heraldtype.ProducedEvent {
		t.Helper()
		turn := b.poke(id, now)
		c := b.corrPut(def, key, payload, true, now.Add(time.Millisecond))
		wantProduced(t, "put during "+id+"'s turn", c, id+":2")
		p := b.commitParams(turn, now.Add(2*time.Millisecond))
		p.CancelCorrelatedWaits = []int{2}
		if end != nil {
			p.CancelCorrelatedWaits = nil
			end(p)
		}
		b.commit(p)
		e := b.event(c.Produced[0].EventID)
		wantEqual(t, "withdrawn delivery Fate", e.Fate, history.FateDropped)
		wantEqual(t, "withdrawn delivery Reason", e.Reason, history.DropWithdrawnWait)
		return c.Produced[0]
	}

	// Another waiter: it receives the event (a new delivery), a nothing.
	b.startWaiting("a", at(1*time.Second), cw(2, "k", true))
	b.startWaiting("b", at(2*time.Second), cw(2, "k", true))
	old := raceCancel("a", "k", `1`, at(3*time.Second), nil)
	b.wantDelivered("a", at(4*time.Second))
	msgs := b.wantDelivered("b", at(4*time.Second), `2:k:1`)
	if msgs[0].EventID == old.EventID {
		t.Fatalf("handed-on delivery reuses event id %s", old.EventID)
	}
	b.wantCorrGone(def, "k")
	b.claimNone(at(4 * time.Second))

	// No other waiter: the correlated event is stored again, for the next
	// wait.
	b.startWaiting("c", at(5*time.Second), cw(2, "k2", true))
	raceCancel("c", "k2", `2`, at(6*time.Second), nil)
	b.wantDelivered("c", at(7*time.Second))
	c := b.mustCorrGet(def, "k2")
	wantJSON(t, "stored again payload", c.Payload, `2`)
	wantProduced(t, "stored again", c)
	b.startWaiting("d", at(8*time.Second), cw(2, "k2", true))
	b.wantDelivered("d", at(8*time.Second), `2:k2:2`)
	b.wantCorrGone(def, "k2")

	// A newer put stored meanwhile is kept.
	b.startWaiting("e", at(9*time.Second), cw(2, "k3", true))
	turn := b.poke("e", at(10*time.Second))
	b.corrPut(def, "k3", `3`, true, at(10*time.Second))
	b.corrPut(def, "k3", `4`, true, at(11*time.Second)) // nobody waits: stored
	p := b.commitParams(turn, at(12*time.Second))
	p.CancelCorrelatedWaits = []int{2}
	b.commit(p)
	b.wantDelivered("e", at(12*time.Second))
	wantJSON(t, "newer put kept", b.mustCorrGet(def, "k3").Payload, `4`)

	// A turn that ends the instance withdraws every wait.
	b.startWaiting("f", at(13*time.Second), cw(2, "k4", true))
	b.startWaiting("g", at(14*time.Second), cw(2, "k5", true))
	raceCancel("f", "k4", `5`, at(15*time.Second), func(p *storage.TurnCommitParams) { p.Status = heraldtype.StatusCompleted })
	wantJSON(t, "stored again after completion", b.mustCorrGet(def, "k4").Payload, `5`)
	raceCancel("g", "k5", `6`, at(16*time.Second), func(p *storage.TurnCommitParams) {
		started := ev(1, history.ExecutionStarted, at(16*time.Second))
		started.Workflow, started.Execution = "wf", 2
		p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{started}}
	})
	wantJSON(t, "stored again after continue-as-new", b.mustCorrGet(def, "k5").Payload, `6`)
	turn = b.turnOf("g", at(17*time.Second))
	for _, m := range turn.Messages {
		if m.Lane == history.LaneCorrelated {
			t.Fatalf("g's new execution got correlated message %s", corrMsg(m))
		}
	}
	b.commit(b.commitParams(turn, at(17*time.Second)))
	b.claimNone(at(17 * time.Second))

	// A turn that consumes its delivery and ends the instance hands nothing
	// on: a consumed message is not a delivery to a withdrawn wait.
	b.startWaiting("h", at(18*time.Second), cw(2, "k6", true))
	b.startWaiting("i", at(19*time.Second), cw(2, "k6", true))
	c6 := b.corrPut(def, "k6", `7`, true, at(20*time.Second))
	wantProduced(t, "put to h", c6, "h:2")
	turn = b.turnOf("h", at(21*time.Second))
	p = b.commitParams(turn, at(21*time.Second)) // consumes the delivery
	p.Status = heraldtype.StatusCompleted
	b.commit(p)
	b.wantDelivered("i", at(22*time.Second))
	b.wantCorrGone(def, "k6")
}

// testCorrelatedReturned: a turn gives back a correlated event its
// instance received (a wait lost a Select after receiving it;
// TurnCommitParams.ReturnedCorrelated). A delete-after-first event is
// handed on: to the oldest waiter (a wait of the returning turn included,
// but not of an instance the turn ends), or stored again unless a newer
// one is stored. A fan-out event, still stored, is left alone.
func testCorrelatedReturned(b *bundle) {
	t := b.t
	b.putDef(heraldtype.EventDefinition{Name: def, Correlation: &heraldtype.CorrelationConfig{DeleteAfterFirstCorrelation: true}}, at(0))

	// receive makes id receive the put's delivery and returns its copy.
	receive := func(id, key, payload string, now time.Time) storage.Message {
		t.Helper()
		b.corrPut(def, key, payload, true, now)
		msgs := b.wantDelivered(id, now.Add(time.Millisecond), "2:"+key+":"+payload)
		return msgs[0]
	}
	// giveBack commits a turn of id that returns the copy m.
	giveBack := func(id string, m storage.Message, now time.Time, change func(*storage.TurnCommitParams)) {
		t.Helper()
		p := b.commitParams(b.poke(id, now), now)
		p.ReturnedCorrelated = []storage.ReturnedCorrelated{{EventID: m.EventID, Def: def, Key: m.Key, Payload: m.Payload}}
		p.Fates = []storage.FateUpdate{{EventID: m.EventID, Fate: history.FateDropped, Reason: history.DropWithdrawnWait,
			Execution: 1, OriginExecution: 1}}
		if change != nil {
			change(p)
		}
		b.commit(p)
		e := b.event(m.EventID)
		wantEqual(t, "returned copy Fate", e.Fate, history.FateDropped)
	}

	// Another waiter receives it, under a new event id.
	b.startWaiting("a", at(1*time.Second), cw(2, "k", true))
	b.startWaiting("b", at(2*time.Second), cw(2, "k", true))
	m := receive("a", "k", `1`, at(3*time.Second))
	giveBack("a", m, at(4*time.Second), nil)
	msgs := b.wantDelivered("b", at(5*time.Second), "2:k:1")
	if msgs[0].EventID == m.EventID {
		t.Fatalf("handed-on event reuses event id %s", m.EventID)
	}
	b.wantDelivered("a", at(5*time.Second))
	b.wantCorrGone(def, "k")

	// No waiter: stored again for the next wait.
	b.startWaiting("c", at(6*time.Second), cw(2, "k2", true))
	m = receive("c", "k2", `2`, at(7*time.Second))
	giveBack("c", m, at(8*time.Second), nil)
	c := b.mustCorrGet(def, "k2")
	wantJSON(t, "stored again payload", c.Payload, `2`)
	wantProduced(t, "stored again", c)
	b.startWaiting("d", at(9*time.Second), cw(2, "k2", true))
	b.wantDelivered("d", at(9*time.Second), "2:k2:2")
	b.wantCorrGone(def, "k2")

	// A newer put stored meanwhile is kept.
	b.startWaiting("e", at(10*time.Second), cw(2, "k3", true))
	m = receive("e", "k3", `3`, at(11*time.Second))
	b.corrPut(def, "k3", `4`, true, at(12*time.Second))
	giveBack("e", m, at(13*time.Second), nil)
	wantJSON(t, "newer put kept", b.mustCorrGet(def, "k3").Payload, `4`)

	// A wait the returning turn makes receives it.
	b.startWaiting("f", at(14*time.Second), cw(2, "k4", true))
	m = receive("f", "k4", `5`, at(15*time.Second))
	giveBack("f", m, at(16*time.Second), func(p *storage.TurnCommitParams) {
		p.CorrelatedWaits = []storage.CorrelatedWait{cw(3, "k4", true)}
	})
	b.wantDelivered("f", at(17*time.Second), "3:k4:5")
	b.wantCorrGone(def, "k4")

	// A turn that ends its instance does not hand it to itself.
	b.startWaiting("g", at(18*time.Second), cw(2, "k5", true), cw(3, "k5", true))
	m = receive("g", "k5", `6`, at(19*time.Second))
	giveBack("g", m, at(20*time.Second), func(p *storage.TurnCommitParams) { p.Status = heraldtype.StatusCompleted })
	wantJSON(t, "stored again after completion", b.mustCorrGet(def, "k5").Payload, `6`)

	// Fan-out: the correlated event is still stored; nothing is handed on.
	const fan = "doc-seen"
	b.putDef(heraldtype.EventDefinition{Name: fan, Correlation: &heraldtype.CorrelationConfig{}}, at(21*time.Second))
	b.create("h", at(22*time.Second))
	p := b.commitParams(b.turnOf("h", at(22*time.Second)), at(22*time.Second))
	p.CorrelatedWaits = []storage.CorrelatedWait{{TaskSeq: 2, Def: fan, Key: "k"}}
	b.commit(p)
	b.corrPut(fan, "k", `7`, false, at(23*time.Second))
	turn := b.turnOf("h", at(24*time.Second))
	var copyOf *storage.Message
	for i := range turn.Messages {
		if turn.Messages[i].Lane == history.LaneCorrelated {
			copyOf = &turn.Messages[i]
		}
	}
	if copyOf == nil {
		t.Fatalf("fan-out put delivered nothing to h: %+v", turn.Messages)
	}
	b.commit(b.commitParams(turn, at(24*time.Second)))
	p = b.commitParams(b.poke("h", at(25*time.Second)), at(25*time.Second))
	p.ReturnedCorrelated = []storage.ReturnedCorrelated{{EventID: copyOf.EventID, Def: fan, Key: "k", Payload: copyOf.Payload}}
	b.commit(p)
	c = b.mustCorrGet(fan, "k")
	wantJSON(t, "fan-out event kept", c.Payload, `7`)
	wantProduced(t, "fan-out event", c, "h:2")
	b.claimNone(at(26 * time.Second))
}

// testCorrelatedHandOnDeletedDefinition: the hand-on of a delete-after-first
// event follows the definition as it is at the commit; one deleted since
// the event was delivered has no rule to follow, so nothing is handed on
// (the same on every backend): a withdrawn wait's delivery stays in the
// withdrawing instance's inbox for the engine to drop, a returned event is
// not stored again, and no other waiter receives either.
func testCorrelatedHandOnDeletedDefinition(b *bundle) {
	t := b.t
	b.putDef(heraldtype.EventDefinition{Name: def, Correlation: &heraldtype.CorrelationConfig{DeleteAfterFirstCorrelation: true}}, at(0))
	b.startWaiting("a", at(1*time.Second), cw(2, "k", true))
	b.startWaiting("b", at(2*time.Second), cw(2, "k", true))
	b.startWaiting("c", at(3*time.Second), cw(2, "k2", true))
	b.startWaiting("d", at(4*time.Second), cw(2, "k2", true))

	// A delivery to a wait withdrawn by the turn that was running.
	turn := b.poke("a", at(5*time.Second))
	put := b.corrPut(def, "k", `1`, true, at(5*time.Second))
	wantProduced(t, "put during a's turn", put, "a:2")
	// A returned event.
	m := b.corrPut(def, "k2", `2`, true, at(6*time.Second))
	wantProduced(t, "put to c", m, "c:2")
	msgs := b.wantDelivered("c", at(7*time.Second), "2:k2:2")

	if err := b.s.EventDefinitionDelete(b.ctx, &storage.EventDefinitionGetParams{Tenant: b.tenant, Name: def}); err != nil {
		t.Fatalf("delete definition: %v", err)
	}

	p := b.commitParams(turn, at(8*time.Second))
	p.CancelCorrelatedWaits = []int{2}
	b.commit(p)
	e := b.event(put.Produced[0].EventID)
	wantEqual(t, "delivery to the withdrawn wait, definition deleted: Fate", e.Fate, history.FatePending)
	b.wantDelivered("a", at(8*time.Second), "2:k:1")

	p = b.commitParams(b.poke("c", at(9*time.Second)), at(9*time.Second))
	p.ReturnedCorrelated = []storage.ReturnedCorrelated{{EventID: msgs[0].EventID, Def: def, Key: "k2", Payload: msgs[0].Payload}}
	p.Fates = []storage.FateUpdate{{EventID: msgs[0].EventID, Fate: history.FateDropped, Reason: history.DropWithdrawnWait,
		Execution: 1, OriginExecution: 1}}
	b.commit(p)

	b.wantDelivered("b", at(10*time.Second))
	b.wantDelivered("d", at(10*time.Second))
	b.wantCorrGone(def, "k")
	b.wantCorrGone(def, "k2")
}
