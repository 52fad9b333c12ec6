package storagetest

import (
	"errors"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// testAttributes: a turn's attribute upserts are applied in order (set,
// replace, remove) with the commit, carried across continue-as-new, shown
// by InstanceGet and InstanceList, and matched by InstanceList's filter
// (type and value, every key, one tenant); an invalid upsert refuses the
// whole commit.
func testAttributes(b *bundle) {
	t := b.t
	attr := func(k string, typ storage.AttrType, v string) storage.Attribute {
		return storage.Attribute{Key: k, Type: typ, Value: v}
	}
	list := func(bb *bundle, as ...storage.Attribute) []string {
		t.Helper()
		var ids []string
		after := ""
		for {
			page, next, err := bb.s.InstanceList(bb.ctx, &storage.InstanceListParams{Tenant: bb.tenant, Attributes: as, Limit: 1, After: after})
			if err != nil {
				t.Fatalf("InstanceList %v: %v", as, err)
			}
			for _, in := range page {
				ids = append(ids, in.ID)
			}
			if next == "" {
				slices.Sort(ids)
				return ids
			}
			after = next
		}
	}
	wantIDs := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	now := t0
	commitAttrs := func(bb *bundle, id string, ups ...storage.Attribute) {
		t.Helper()
		now = now.Add(time.Second)
		turn := bb.claimOne(id, now)
		p := bb.commitParams(turn, now)
		p.Attributes = ups
		bb.commit(p)
	}
	poke := func(id string) {
		t.Helper()
		now = now.Add(time.Second)
		b.raise(id, id+now.String(), "poke", now)
	}

	b.create("a", t0)
	commitAttrs(b, "a", attr("team", storage.AttrString, "red"), attr("n", storage.AttrInt, "3"), attr("gone", storage.AttrBool, "true"),
		attr("team", storage.AttrString, "blue")) // the last upsert of a key wins
	b.create("b", t0)
	commitAttrs(b, "b", attr("team", storage.AttrString, "blue"), attr("n", storage.AttrInt, "4"))
	other := b.in(b.tenant + "-other")
	other.create("a", t0)
	commitAttrs(other, "a", attr("team", storage.AttrString, "blue"))

	wantAttrs := func(id string, want ...storage.Attribute) {
		t.Helper()
		if got := b.get(id).Attributes; !slices.Equal(got, want) {
			t.Fatalf("attributes of %s: %v, want %v", id, got, want)
		}
	}
	wantAttrs("a", attr("gone", storage.AttrBool, "true"), attr("n", storage.AttrInt, "3"), attr("team", storage.AttrString, "blue"))
	wantIDs("team=blue", list(b, attr("team", storage.AttrString, "blue")), "a", "b")
	wantIDs("team=blue, n=3", list(b, attr("n", storage.AttrInt, "3"), attr("team", storage.AttrString, "blue")), "a")
	wantIDs("n=\"3\" (a string)", list(b, attr("n", storage.AttrString, "3")))
	wantIDs("other tenant team=blue", list(other, attr("team", storage.AttrString, "blue")), "a")

	// Replace and remove.
	poke("a")
	commitAttrs(b, "a", attr("gone", "", ""), attr("n", storage.AttrInt, "5"), attr("missing", "", ""))
	wantAttrs("a", attr("n", storage.AttrInt, "5"), attr("team", storage.AttrString, "blue"))
	wantIDs("gone=true after removal", list(b, attr("gone", storage.AttrBool, "true")))
	wantIDs("n=5", list(b, attr("n", storage.AttrInt, "5")), "a")

	// An invalid upsert refuses the commit; nothing of it is written.
	poke("a")
	turn := b.claimOne("a", now)
	for _, bad := range []storage.Attribute{attr("bad key", storage.AttrInt, "1"), attr("n", storage.AttrInt, "01"),
		attr("n", "float", "1.5"), attr("s", storage.AttrString, "a\x00"), attr("t", storage.AttrTime, "2026-01-01T00:00:00+01:00")} {
		p := b.commitParams(turn, now)
		p.NewEvents = []history.Event{ev(len(b.history("a", 0))+1, history.TimerCreated, now)}
		p.Attributes = []storage.Attribute{attr("team", storage.AttrString, "green"), bad}
		if _, err := b.s.TurnCommit(b.ctx, p); !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Fatalf("commit with attribute %v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	wantAttrs("a", attr("n", storage.AttrInt, "5"), attr("team", storage.AttrString, "blue"))
	if _, _, err := b.s.InstanceList(b.ctx, &storage.InstanceListParams{Tenant: b.tenant,
		Attributes: []storage.Attribute{attr("bad key", storage.AttrInt, "1")}}); !errors.Is(err, heraldtype.ErrInvalidArgument) {
		t.Fatalf("list with a bad attribute: %v", err)
	}

	// Continue-as-new keeps the row's attributes.
	p := b.commitParams(turn, now)
	p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{{Seq: 1, Time: now, Kind: history.ExecutionStarted, Execution: 2}}}
	p.Attributes = []storage.Attribute{attr("gen", storage.AttrInt, "2")}
	b.commit(p)
	wantAttrs("a", attr("gen", storage.AttrInt, "2"), attr("n", storage.AttrInt, "5"), attr("team", storage.AttrString, "blue"))
	wantIDs("gen=2, team=blue", list(b, attr("gen", storage.AttrInt, "2"), attr("team", storage.AttrString, "blue")), "a")
}
