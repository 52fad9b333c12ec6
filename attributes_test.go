package herald_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

var since = time.Date(2026, 11, 24, 9, 30, 0, 123456789, time.UTC)

type tagInput struct {
	Customer string
	Priority int
}

// registerTagged registers "tagged": it sets attributes from its input,
// then on each "update" event sets priority to the payload and removes vip,
// until "done".
func registerTagged(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "tagged", func(ctx *herald.Context, in tagInput) (map[string]any, error) {
		if err := ctx.SetAttributes(map[string]any{"customer": in.Customer, "priority": in.Priority,
			"vip": in.Priority > 5, "since": since}); err != nil {
			return nil, err
		}
		for {
			upd := ctx.WaitEvent("update")
			done := ctx.WaitEvent("done")
			if ctx.Select(upd, done) == 1 {
				return ctx.Attributes(), nil
			}
			var p int
			if err := upd.Get(&p); err != nil {
				return nil, err
			}
			if err := ctx.SetAttributes(map[string]any{"priority": p, "vip": nil}); err != nil {
				return nil, err
			}
		}
	})
}

func (b *bundle) list(f herald.InstanceFilter) []string {
	b.t.Helper()
	var ids []string
	for {
		page, err := b.client.ListInstances(b.ctx, f)
		if err != nil {
			b.t.Fatalf("list %+v: %v", f, err)
		}
		for _, in := range page.Instances {
			ids = append(ids, in.ID)
		}
		if page.Next == "" {
			slices.Sort(ids)
			return ids
		}
		f.Cursor = page.Next
	}
}

func TestAttributes_SetUpdateList(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, registerTagged)
	var acme, acmeP2 []string
	for i := range 7 {
		id := fmt.Sprintf("acme-%d", i)
		b.start("tagged", id, tagInput{"acme", i % 3})
		acme = append(acme, id)
		if i%3 == 2 {
			acmeP2 = append(acmeP2, id)
		}
	}
	for i := range 3 {
		b.start("tagged", fmt.Sprintf("other-%d", i), tagInput{"other", 2})
	}
	// The same instances in another tenant never match this tenant's
	// filters.
	t2, err := b.rt.Client("t2")
	if err != nil {
		t.Fatal(err)
	}
	b2 := b.as(t2)
	b2.start("tagged", "acme-0", tagInput{"acme", 0})
	b2.start("tagged", "acme-t2", tagInput{"acme", 2})
	for _, id := range append(slices.Clone(acme), "other-0", "other-1", "other-2") {
		b.waitHistory(id, history.EventSubscribed, "done", 1)
	}
	b2.waitHistory("acme-t2", history.EventSubscribed, "done", 1)

	info := b.status("acme-2")
	want := map[string]any{"customer": "acme", "priority": int64(2), "vip": false, "since": since}
	if !maps.EqualFunc(info.Attributes, want, attrEqual) {
		t.Fatalf("attributes %#v, want %#v", info.Attributes, want)
	}
	for _, limit := range []int{2, 3, 100} {
		if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"customer": "acme"}, Limit: limit}); !slices.Equal(got, acme) {
			t.Fatalf("customer=acme, pages of %d: %v, want %v", limit, got, acme)
		}
	}
	for _, f := range []struct {
		attrs map[string]any
		want  []string
	}{
		{map[string]any{"customer": "acme", "priority": 2}, acmeP2},
		{map[string]any{"customer": "acme", "priority": int8(2), "since": since}, acmeP2},
		{map[string]any{"customer": "acme", "priority": uint64(2), "vip": false}, acmeP2},
		{map[string]any{"priority": "2"}, nil}, // another type
		{map[string]any{"customer": "ACME"}, nil},
		{map[string]any{"since": since.Add(time.Nanosecond)}, nil},
		{map[string]any{"since": since.In(time.FixedZone("x", 3600))}, append(slices.Clone(acme), "other-0", "other-1", "other-2")},
		{map[string]any{"nokey": "x"}, nil},
	} {
		if got := b.list(herald.InstanceFilter{Attributes: f.attrs, Limit: 2}); !slices.Equal(got, f.want) {
			t.Fatalf("filter %v: %v, want %v", f.attrs, got, f.want)
		}
	}
	if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"priority": 2}, Workflow: "tagged", Status: herald.StatusRunning}); len(got) != len(acmeP2)+3 {
		t.Fatalf("priority=2 with workflow and status: %v", got)
	}
	if got := b2.list(herald.InstanceFilter{Attributes: map[string]any{"customer": "acme"}}); !slices.Equal(got, []string{"acme-0", "acme-t2"}) {
		t.Fatalf("tenant t2: %v", got)
	}

	// An update replaces a value and removes a key; the filters follow.
	b.raise("acme-2", "update", 9, "")
	b.waitHistory("acme-2", history.EventSubscribed, "done", 2)
	info = b.status("acme-2")
	want = map[string]any{"customer": "acme", "priority": int64(9), "since": since}
	if !maps.EqualFunc(info.Attributes, want, attrEqual) {
		t.Fatalf("after the update: %#v, want %#v", info.Attributes, want)
	}
	if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"priority": 9}}); !slices.Equal(got, []string{"acme-2"}) {
		t.Fatalf("priority=9: %v", got)
	}
	if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"vip": false, "customer": "acme"}}); slices.Contains(got, "acme-2") || len(got) != len(acme)-1 {
		t.Fatalf("vip=false after acme-2 removed it: %v", got)
	}
	// More turns (events that change nothing) do not write the attributes
	// again: each SetAttributes is one decision in history.
	b.raise("acme-2", "update", 9, "")
	b.waitHistory("acme-2", history.EventSubscribed, "done", 3)
	b.raise("acme-2", "done", nil, "")
	res := resultOf[map[string]any](b, "acme-2")
	if res["priority"] != float64(9) || res["customer"] != "acme" || len(res) != 3 {
		t.Fatalf("ctx.Attributes at the end: %v", res)
	}
	evs := b.history("acme-2", 0)
	if n := countKind(evs, history.AttributesUpserted, ""); n != 3 {
		t.Fatalf("%d AttributesUpserted in history, want 3 (one per SetAttributes):%s", n, dumpHistory(evs))
	}
	b.replayAll("acme-2")
	if got := b.status("acme-2"); got.Status != herald.StatusCompleted || got.Attributes["priority"] != int64(9) {
		t.Fatalf("a completed instance keeps its attributes: %+v", got)
	}
}

func attrEqual(a, b any) bool {
	if ta, ok := a.(time.Time); ok {
		tb, ok := b.(time.Time)
		return ok && ta.Equal(tb)
	}
	return a == b
}

// Bad attributes are refused with a typed error inside the workflow and
// nothing is stored; bad filters are refused by ListInstances.
func TestAttributes_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "bad", func(ctx *herald.Context, _ int) ([]string, error) {
			tooMany := map[string]any{}
			for i := range herald.MaxAttributes + 1 {
				tooMany[fmt.Sprintf("k%02d", i)] = i
			}
			var out []string
			for _, attrs := range []map[string]any{
				{"": "x"},
				{"bad key": 1},
				{"1abc": 1},
				{"k\x00": 1},
				{strings.Repeat("k", herald.MaxAttributeKeyBytes+1): 1},
				{"f": 1.5},
				{"m": map[string]any{}},
				{"s": strings.Repeat("x", herald.MaxAttributeValueBytes+1)},
				{"s": "a\x00b"},
				{"s": string([]byte{0xff})},
				{"u": uint64(1) << 63},
				{"t": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
				{"ok": 1, "bad": 1.5}, // one bad value: none is set
				tooMany,
			} {
				err := ctx.SetAttributes(attrs)
				if !errors.Is(err, herald.ErrInvalidArgument) {
					return nil, fmt.Errorf("SetAttributes(%.40v): %v, want ErrInvalidArgument", attrs, err)
				}
				out = append(out, err.Error())
			}
			// At the cap is fine; one more key is not, a removal of a
			// missing key and an update of a present one are.
			atCap := map[string]any{}
			for i := range herald.MaxAttributes {
				atCap[fmt.Sprintf("k%02d", i)] = i
			}
			if err := ctx.SetAttributes(atCap); err != nil {
				return nil, err
			}
			if err := ctx.SetAttributes(map[string]any{"one-more": 1}); !errors.Is(err, herald.ErrInvalidArgument) {
				return nil, fmt.Errorf("key %d: %v", herald.MaxAttributes+1, err)
			}
			if err := ctx.SetAttributes(map[string]any{"missing": nil, "k00": "changed"}); err != nil {
				return nil, err
			}
			return out, nil
		})
		herald.RegisterWorkflow(rt, "fails", func(ctx *herald.Context, _ int) (int, error) {
			return 0, ctx.SetAttributes(map[string]any{"f": 1.5})
		})
	})
	b.start("bad", "bad-1", 0)
	reasons := resultOf[[]string](b, "bad-1")
	for i, frag := range []string{"is empty", "'_', '-', '.'", "does not start with an ASCII letter", `'\x00'`, "over the 64-byte cap",
		"float64 value", "map[string]interface {} value", "over the 256-byte cap", "NUL byte", "not valid UTF-8",
		"over the int64 range", "outside years", "float64", "over the cap of 32"} {
		if !strings.Contains(reasons[i], frag) {
			t.Errorf("refusal %d: %q does not say %q", i, reasons[i], frag)
		}
	}
	info := b.status("bad-1")
	if len(info.Attributes) != herald.MaxAttributes || info.Attributes["k00"] != "changed" || info.Attributes["k31"] != int64(31) {
		t.Fatalf("attributes: %v", info.Attributes)
	}
	if n := countKind(b.history("bad-1", 0), history.AttributesUpserted, ""); n != 2 {
		t.Fatalf("%d AttributesUpserted, want 2 (the refused calls record nothing)", n)
	}

	b.start("fails", "fails-1", 0)
	info = b.waitDone("fails-1")
	if info.Status != herald.StatusFailed || !strings.Contains(info.Failure.Message, "float64") || info.Attributes != nil {
		t.Fatalf("a workflow returning the refusal: %+v %+v", info, info.Failure)
	}

	for _, attrs := range []map[string]any{
		{"bad key": 1}, {"f": 1.5}, {"x": nil}, {"s": strings.Repeat("x", herald.MaxAttributeValueBytes+1)},
	} {
		if _, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{Attributes: attrs}); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Fatalf("filter %.40v: %v, want ErrInvalidArgument", attrs, err)
		}
	}
}

// Attributes carry across continue-as-new: the row keeps them, and each
// execution's history starts with them, so its code sees them.
func TestAttributes_ContinueAsNew(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "gen", func(ctx *herald.Context, n int) (map[string]any, error) {
			attrs := map[string]any{"gen": ctx.Execution()}
			if ctx.Execution() == 1 {
				attrs["origin"] = "first"
				attrs["temp"] = true
			}
			if ctx.Execution() == 2 {
				attrs["temp"] = nil
			}
			if err := ctx.SetAttributes(attrs); err != nil {
				return nil, err
			}
			if ctx.Execution() < 3 {
				return nil, ctx.ContinueAsNew(n + 1)
			}
			if err := ctx.WaitEvent("done").Get(nil); err != nil {
				return nil, err
			}
			return ctx.Attributes(), nil
		})
	})
	b.start("gen", "g1", 0)
	b.waitExec("g1", 3, history.EventSubscribed, "", "done", 1)
	info := b.status("g1")
	want := map[string]any{"gen": int64(3), "origin": "first"}
	if !maps.EqualFunc(info.Attributes, want, attrEqual) {
		t.Fatalf("execution 3: %v, want %v", info.Attributes, want)
	}
	if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"origin": "first", "gen": 3}}); !slices.Equal(got, []string{"g1"}) {
		t.Fatalf("filter across continue-as-new: %v", got)
	}
	if got := b.list(herald.InstanceFilter{Attributes: map[string]any{"temp": true}}); got != nil {
		t.Fatalf("temp removed in execution 2: %v", got)
	}
	evs := b.history("g1", 3)
	if len(evs) < 2 || evs[1].Kind != history.AttributesUpserted || !evs[1].AtStart {
		t.Fatalf("execution 3 does not start with the carried attributes:%s", dumpHistory(evs))
	}
	b.raise("g1", "done", nil, "")
	res := resultOf[map[string]any](b, "g1")
	if res["origin"] != "first" || res["gen"] != float64(3) || len(res) != 2 {
		t.Fatalf("ctx.Attributes in execution 3: %v", res)
	}
	b.replayAll("g1")
}
