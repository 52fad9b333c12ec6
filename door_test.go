package herald_test

// What crosses the door: the checks every Client call makes before it
// stores anything (identifiers, payload depth and encoding, sentinels), and
// what the runtime does with a stored row it cannot read (it fails that
// instance and nothing else). Every test runs on the backend testStore
// picks, so CI runs them on SQLite and on PostgreSQL.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/storage"
)

// rawExec runs a statement on the database behind a store testStore opened,
// behind Herald's back: how a test plants a row that cannot be decoded.
func rawExec(t *testing.T, st storage.Store, query string, args ...any) int64 {
	t.Helper()
	raw, ok := storeLocations.Load(st)
	if !ok {
		t.Fatal("rawExec: store not opened by testStore")
	}
	loc, err := storeurl.Parse(raw.(string))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if loc.Backend == storeurl.Postgres {
		conn, err := pgx.Connect(ctx, loc.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{loc.Schema}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		// $1… placeholders are what both drivers accept.
		tag, err := conn.Exec(ctx, query, args...)
		if err != nil {
			t.Fatalf("raw exec %q: %v", query, err)
		}
		return tag.RowsAffected()
	}
	db, err := sql.Open("sqlite", loc.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA busy_timeout = 10000"); err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatalf("raw exec %q: %v", query, err)
	}
	n, _ := res.RowsAffected()
	return n
}

// doorWorkflows registers "echo" (returns the payload of its first event
// "x"), "queue-echo" (the same on queue "x"), and "done" (returns its input).
func doorWorkflows(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "echo", func(ctx *herald.Context, _ any) (json.RawMessage, error) {
		var raw json.RawMessage
		err := ctx.WaitEvent("x").Get(&raw)
		return raw, err
	})
	herald.RegisterWorkflow(rt, "queue-echo", func(ctx *herald.Context, _ any) (json.RawMessage, error) {
		var raw json.RawMessage
		err := ctx.Dequeue("x").Get(&raw)
		return raw, err
	})
	herald.RegisterWorkflow(rt, "done", func(ctx *herald.Context, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	})
}

func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

// requireHealthy starts n instances that each wait for an event, raises to
// each, and requires all of them to complete: the tenant is not held up.
func requireHealthy(t *testing.T, b *bundle, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("healthy-%d", i)
		if _, err := b.client.StartWorkflow(b.ctx, "echo", nil, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.client.RaiseEvent(b.ctx, id, "x", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		var got int
		b.result(fmt.Sprintf("healthy-%d", i), &got)
		if got != i {
			t.Fatalf("healthy-%d returned %d", i, got)
		}
	}
}

// The critical defect of the adversarial round: a payload nested 10,000
// levels deep was accepted and then failed every claim of its tenant. It is
// refused at the door now, on every call that takes JSON, and the tenant's
// other instances run.
func TestDeepPayloadRefusedAtTheDoor(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	b.start("echo", "bad", nil)
	deep := nested(10000)
	if _, err := b.client.RaiseEvent(b.ctx, "bad", "x", deep); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("RaiseEvent of a 10,000-deep payload: %v, want ErrEventInvalid", err)
	}
	if _, err := b.client.Enqueue(b.ctx, "bad", "x", deep); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("Enqueue of a 10,000-deep payload: %v, want ErrEventInvalid", err)
	}
	if _, err := b.client.StartWorkflow(b.ctx, "done", deep); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("StartWorkflow with a 10,000-deep input: %v, want ErrInvalidArgument", err)
	}
	if _, err := b.client.RaiseEvent(b.ctx, "new", "x", 1, herald.StartIfAbsent("done", deep)); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("StartIfAbsent with a 10,000-deep input: %v, want ErrEventInvalid", err)
	}
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "doc",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.PutCorrelatedEvent(b.ctx, "doc", "k", deep); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("PutCorrelatedEvent of a 10,000-deep payload: %v, want ErrEventInvalid", err)
	}
	// Nothing was stored.
	if evs, err := b.client.Events(b.ctx, "bad"); err != nil || len(evs) != 0 {
		t.Fatalf("events of bad: %v, %v; want none", evs, err)
	}
	if _, err := b.client.Status(b.ctx, "new"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("status of new: %v, want ErrNotFound", err)
	}
	// At the limit it is accepted and reaches the workflow unchanged.
	limit := nested(herald.DefaultMaxPayloadDepth)
	b.raise("bad", "x", limit, "")
	var got json.RawMessage
	b.result("bad", &got)
	if string(got) != string(limit) {
		t.Fatalf("payload at the depth limit came back as %.80s…", got)
	}
	requireHealthy(t, b, 20)
}

// The limit is configurable and refused above what Herald can store.
func TestMaxPayloadDepthConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadDepth: 3}}, doorWorkflows)
	b.start("echo", "i", nil)
	_, err := b.client.RaiseEvent(b.ctx, "i", "x", nested(4))
	var inv *herald.EventInvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "deeper than 3 levels") {
		t.Fatalf("4 levels with MaxPayloadDepth 3: %v", err)
	}
	// Brackets inside strings are not nesting.
	payload := json.RawMessage(`[[["[[[[[[{{{{"]]]`)
	b.raise("i", "x", payload, "")
	var got json.RawMessage
	b.result("i", &got)
	if string(got) != string(payload) {
		t.Fatalf("got %s, want %s", got, payload)
	}
	if _, err := herald.NewRuntime(b.store, &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadDepth: herald.MaxPayloadDepthLimit + 1}}); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("NewRuntime with MaxPayloadDepth over the limit: %v, want ErrInvalidArgument", err)
	}
}

// An activity whose result could not be stored fails (without retries)
// instead of writing a history row no turn could read; a workflow whose
// result could not be stored fails.
func TestDeepResultsFailTheirActivityOrWorkflow(t *testing.T) {
	t.Parallel()
	var attempts sync.Map
	b := setup(t, nil, func(rt *herald.Runtime) {
		doorWorkflows(rt)
		herald.RegisterActivity(rt, "deep", func(ctx context.Context, _ any) (json.RawMessage, error) {
			ai, _ := herald.ActivityInfoFrom(ctx)
			attempts.Store(ai.Attempt, true)
			return nested(5000), nil
		})
		herald.RegisterWorkflow(rt, "calls-deep", func(ctx *herald.Context, _ any) (string, error) {
			err := ctx.CallActivity("deep", nil).Get(nil)
			var ae *herald.ActivityError
			if errors.As(err, &ae) && strings.Contains(ae.Message, "deeper than") {
				return "refused", nil
			}
			return "", fmt.Errorf("activity returned %v", err)
		})
		herald.RegisterWorkflow(rt, "returns-deep", func(ctx *herald.Context, _ any) (json.RawMessage, error) {
			return nested(5000), nil
		})
	})
	id, err := b.client.StartWorkflow(b.ctx, "calls-deep", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	b.result(id, &got)
	if got != "refused" {
		t.Fatalf("got %q", got)
	}
	if _, again := attempts.Load(2); again {
		t.Fatal("the activity was retried")
	}
	id, err = b.client.StartWorkflow(b.ctx, "returns-deep", nil)
	if err != nil {
		t.Fatal(err)
	}
	info := b.waitDone(id)
	if info.Status != herald.StatusFailed || !strings.Contains(info.Err().Error(), "deeper than") {
		t.Fatalf("returns-deep ended %s: %v", info.Status, info.Err())
	}
	requireHealthy(t, b, 5)
}

// Defence in depth: a stored row that cannot be decoded (here planted behind
// Herald's back) fails its own instance — visibly, once — and never a claim
// batch, the tenant or the node.
func TestUndecodableRowFailsOnlyItsInstance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, corrupt string
	}{
		{"history", `UPDATE history SET event = '{"seq": [' WHERE instance_id = $1 AND seq = 1`},
		{"message", `UPDATE inbox SET failure = '{"kind": ' WHERE instance_id = $1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Without the history cache: with it, the store would not read
			// again the history rows it read for the first turns, and the
			// planted one would go unseen (the turns would run from the
			// good copy in memory).
			b := setupOn(t, testStoreUncached(t), nil, doorWorkflows)
			for i := range 3 {
				id := fmt.Sprintf("bad-%d", i)
				if _, err := b.client.StartWorkflow(b.ctx, "echo", nil, herald.WithInstanceID(id)); err != nil {
					t.Fatal(err)
				}
				b.waitHistory(id, history.EventSubscribed, "x", 1)
			}
			if err := b.rt.Stop(b.ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				id := fmt.Sprintf("bad-%d", i)
				if _, err := b.client.RaiseEvent(b.ctx, id, "x", i); err != nil {
					t.Fatal(err)
				}
				if n := rawExec(t, b.store, tc.corrupt, id); n == 0 {
					t.Fatalf("planted no row for %s", id)
				}
			}
			if err := b.rt.Start(b.ctx); err != nil {
				t.Fatal(err)
			}
			requireHealthy(t, b, 20)
			for i := range 3 {
				info := b.waitDone(fmt.Sprintf("bad-%d", i))
				var we *herald.WorkflowError
				if info.Status != herald.StatusFailed || !errors.As(info.Err(), &we) || we.Kind != "corrupt" {
					t.Fatalf("bad-%d ended %s: %v, want failed/corrupt", i, info.Status, info.Err())
				}
			}
			if n := b.obs.unreplayableCount(); n != 3 {
				t.Fatalf("InstancesUnreplayable = %d, want 3", n)
			}
			logged := 0
			for _, w := range b.logs.warnings() {
				if strings.Contains(w, "cannot be replayed") {
					logged++
				}
			}
			if logged != 3 {
				t.Fatalf("logged %d lines about unreplayable instances, want 3 (once each): %q", logged, b.logs.warnings())
			}
		})
	}
}

// badTexts are identifiers every backend must refuse alike.
var badTexts = map[string]string{
	"empty":        "",
	"NUL":          "a\x00b",
	"invalid UTF8": "a\xffb",
	"64 KiB":       strings.Repeat("x", 64<<10),
	"dot":          ".",
	"dot dot":      "..",
	"tab":          "a\tb",
	"newline":      "a\nb",
	"C1 control":   "a\u0085b",
	"RLO":          "invoice-\u202etxt.exe",
	"FSI":          "a\u2068b",
}

// Identifiers and names follow one rule on every backend: valid UTF-8, no
// NUL, within the documented caps, not "." or "..", no control or
// bidirectional-formatting characters. A write breaking it is refused with a
// typed error and stores nothing; a read of one finds nothing.
func TestIdentifierRules(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "doc",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	b.start("echo", "ok", nil)
	for what, bad := range badTexts {
		t.Run(what, func(t *testing.T) {
			wantInvalid := func(call string, err error, sentinel error) {
				t.Helper()
				if !errors.Is(err, sentinel) {
					t.Errorf("%s with %s: %v, want %v", call, what, err, sentinel)
				}
				if err != nil && len(err.Error()) > 2000 {
					t.Errorf("%s with %s: the error is %d bytes long", call, what, len(err.Error()))
				}
			}
			_, err := b.client.StartWorkflow(b.ctx, bad, nil)
			wantInvalid("StartWorkflow(workflow)", err, herald.ErrInvalidArgument)
			if what != "empty" { // "" asks for a generated id
				_, err = b.client.StartWorkflow(b.ctx, "done", nil, herald.WithInstanceID(bad))
				wantInvalid("StartWorkflow(instance id)", err, herald.ErrInvalidArgument)
			}
			_, err = b.client.RaiseEvent(b.ctx, bad, "x", 1)
			wantInvalid("RaiseEvent(instance)", err, herald.ErrEventInvalid)
			_, err = b.client.RaiseEvent(b.ctx, "ok", bad, 1)
			wantInvalid("RaiseEvent(name)", err, herald.ErrEventInvalid)
			if what != "empty" { // "" asks for a generated id
				_, err = b.client.RaiseEvent(b.ctx, "ok", "x", 1, herald.WithEventID(bad))
				wantInvalid("RaiseEvent(event id)", err, herald.ErrEventInvalid)
				_, err = b.client.Enqueue(b.ctx, "ok", "q", 1, herald.WithEventID(bad))
				wantInvalid("Enqueue(event id)", err, herald.ErrEventInvalid)
			}
			_, err = b.client.Enqueue(b.ctx, "ok", bad, 1)
			wantInvalid("Enqueue(queue)", err, herald.ErrEventInvalid)
			_, err = b.client.RaiseEvent(b.ctx, "new", "x", 1, herald.StartIfAbsent(bad, nil))
			wantInvalid("RaiseEvent(StartIfAbsent workflow)", err, herald.ErrEventInvalid)
			_, err = b.client.PutCorrelatedEvent(b.ctx, bad, "k", 1)
			wantInvalid("PutCorrelatedEvent(definition)", err, herald.ErrEventInvalid)
			_, err = b.client.PutCorrelatedEvent(b.ctx, "doc", bad, 1)
			wantInvalid("PutCorrelatedEvent(key)", err, herald.ErrEventInvalid)

			_, err = b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: bad})
			wantInvalid("PutEventDefinition", err, herald.ErrDefinitionInvalid)
			_, err = b.client.GetEventDefinition(b.ctx, bad)
			wantInvalid("GetEventDefinition", err, herald.ErrNotFound)
			err = b.client.DeleteEventDefinition(b.ctx, bad)
			wantInvalid("DeleteEventDefinition", err, herald.ErrNotFound)

			_, err = b.client.Status(b.ctx, bad)
			wantInvalid("Status", err, herald.ErrNotFound)
			_, err = b.client.History(b.ctx, bad, 0)
			wantInvalid("History", err, herald.ErrNotFound)
			_, err = b.client.EventFate(b.ctx, bad)
			wantInvalid("EventFate", err, herald.ErrNotFound)
			err = b.client.Terminate(b.ctx, bad, "")
			wantInvalid("Terminate", err, herald.ErrNotFound)
			_, err = b.client.GetCorrelatedEvent(b.ctx, "doc", bad)
			wantInvalid("GetCorrelatedEvent", err, herald.ErrNotFound)
			err = b.client.DeleteCorrelatedEvent(b.ctx, bad, "k")
			wantInvalid("DeleteCorrelatedEvent", err, herald.ErrNotFound)
			if evs, err := b.client.Events(b.ctx, bad); err != nil || len(evs) != 0 {
				t.Errorf("Events(%s) = %v, %v; want nothing", what, evs, err)
			}
			if evs, next, err := b.client.SearchCorrelatedEvents(b.ctx, bad, herald.CorrelatedSearch{}); err != nil || len(evs) != 0 || next != "" {
				t.Errorf("SearchCorrelatedEvents(%s) = %v, %q, %v; want nothing", what, evs, next, err)
			}
		})
	}
	// Nothing of it was stored.
	if evs, err := b.client.Events(b.ctx, "ok"); err != nil || len(evs) != 0 {
		t.Fatalf("events of ok: %v, %v; want none", evs, err)
	}
	if _, err := b.client.Status(b.ctx, "new"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("status of new: %v, want ErrNotFound", err)
	}
	requireHealthy(t, b, 3)
}

// The boundary values of the rule are stored and read back unchanged on
// every backend.
func TestIdentifierBoundaries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	// 255 bytes of two- and three-byte runes, quotes, slashes, percent
	// signs, dots, spaces and an emoji: what a careless or hostile caller
	// may send within the rules.
	id := capUTF8(`/%_'"`+". \u00a0🎉"+strings.Repeat("é€", 100), herald.MaxIDBytes)
	name := capUTF8(strings.Repeat("ñ", herald.MaxNameBytes), herald.MaxNameBytes)
	eventID := capUTF8("evt-🎉"+strings.Repeat("€", 100), herald.MaxIDBytes)
	key := capUTF8(strings.Repeat("k€y", herald.MaxKeyBytes), herald.MaxKeyBytes)
	herald.RegisterWorkflow(b.rt, name, func(ctx *herald.Context, _ any) (string, error) {
		var s string
		err := ctx.WaitEvent(name).Get(&s)
		return s, err
	})
	b.start(name, id, nil)
	b.raise(id, name, "hello", eventID)
	var got string
	info := b.result(id, &got)
	if got != "hello" || info.ID != id || info.Workflow != name {
		t.Fatalf("got %q, instance %q, workflow %q", got, info.ID, info.Workflow)
	}
	rec := b.fate(eventID)
	if rec.EventID != eventID || rec.InstanceID != id || rec.Name != name || rec.Fate != history.FateDelivered {
		t.Fatalf("fate: %+v", rec)
	}
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: name,
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.PutCorrelatedEvent(b.ctx, name, key, 1); err != nil {
		t.Fatalf("put a %d-byte key: %v", len(key), err)
	}
	ce, err := b.client.GetCorrelatedEvent(b.ctx, name, key)
	if err != nil || ce.Key != key || ce.Def != name {
		t.Fatalf("get: %+v, %v", ce, err)
	}
	page, next, err := b.client.SearchCorrelatedEvents(b.ctx, name, herald.CorrelatedSearch{Limit: 1})
	if err != nil || len(page) != 1 || page[0].Key != key || next != "" {
		t.Fatalf("search: %v, %q, %v", page, next, err)
	}
	// One byte over each cap is refused.
	if _, err := b.client.StartWorkflow(b.ctx, name, nil, herald.WithInstanceID(strings.Repeat("i", herald.MaxIDBytes+1))); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("a %d-byte id: %v", herald.MaxIDBytes+1, err)
	}
	if _, err := b.client.PutCorrelatedEvent(b.ctx, name, strings.Repeat("k", herald.MaxKeyBytes+1), 1); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("a %d-byte key: %v", herald.MaxKeyBytes+1, err)
	}
}

// capUTF8 cuts s to at most n bytes at a rune boundary.
func capUTF8(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// Every error a caller can branch on has a sentinel.
func TestDoorSentinels(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	if _, err := b.client.StartWorkflow(b.ctx, "", nil); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("empty workflow name: %v", err)
	}
	if _, err := b.client.StartWorkflow(b.ctx, "done", make(chan int)); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("input that cannot be encoded: %v", err)
	}
	if _, err := b.client.StartWorkflow(b.ctx, "done", json.RawMessage("{nope")); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("input that is not JSON: %v", err)
	}
	if _, err := b.client.StartWorkflow(b.ctx, "done", json.RawMessage("\"\xff\"")); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("input that is not UTF-8: %v", err)
	}
	b.start("echo", "i", nil)
	if _, err := b.client.RaiseEvent(b.ctx, "i", "x", json.RawMessage("\"\xff\"")); !errors.Is(err, herald.ErrEventInvalid) {
		t.Errorf("payload that is not UTF-8: %v", err)
	}
	if _, err := b.client.RaiseEvent(b.ctx, "i", "x", func() {}); !errors.Is(err, herald.ErrEventInvalid) {
		t.Errorf("payload that cannot be encoded: %v", err)
	}
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "doc",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	for _, bm := range []string{"nope", "!!!", "YzE6eDpr", strings.Repeat("A", 1<<20),
		// Well-formed base64 of "c1:1:" and a key with a NUL or bad UTF-8.
		"YzE6MTprAGs", "YzE6MTpr_2s"} {
		if _, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc", herald.CorrelatedSearch{Bookmark: bm}); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("bookmark %.20q: %v, want ErrInvalidArgument", bm, err)
		}
	}
}

// A stopped runtime can be started again; starting a running one says so.
func TestRuntimeRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	if err := b.rt.Start(b.ctx); !errors.Is(err, herald.ErrRuntimeStarted) {
		t.Fatalf("second Start: %v, want ErrRuntimeStarted", err)
	}
	for round := range 3 {
		if err := b.rt.Stop(b.ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.rt.Stop(b.ctx); err != nil {
			t.Fatalf("Stop of a stopped runtime: %v", err)
		}
		id := fmt.Sprintf("after-stop-%d", round)
		if _, err := b.client.StartWorkflow(b.ctx, "done", round, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		if err := b.rt.Start(b.ctx); err != nil {
			t.Fatalf("Start after Stop: %v", err)
		}
		var got int
		b.result(id, &got)
		if got != round {
			t.Fatalf("got %d", got)
		}
	}
	// A runtime whose context ended may be started again too.
	ctx, cancel := context.WithCancel(b.ctx)
	if err := b.rt.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	b.waitFor("Start after its context ended", func() bool {
		err := b.rt.Start(b.ctx)
		if err != nil && !errors.Is(err, herald.ErrRuntimeStarted) {
			t.Fatalf("Start after its context ended: %v", err)
		}
		return err == nil
	})
	requireHealthy(t, b, 2)
}

// An ended instance whose stored failure does not decode (damaged behind
// Herald's back) is still listed and shown, its failure saying what is
// wrong: one damaged row never hides the tenant's other instances.
func TestUnreadableFailureStillListed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, doorWorkflows)
	for i := range 3 {
		id := fmt.Sprintf("ended-%d", i)
		b.start("echo", id, nil)
		if err := b.client.Terminate(b.ctx, id, "done with it"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rawExec(t, b.store, `UPDATE instances SET failure = '{"kind": ' WHERE id = $1`, "ended-1"); n == 0 {
		t.Fatal("planted no row")
	}
	page, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{})
	if err != nil {
		t.Fatalf("ListInstances with one damaged row: %v", err)
	}
	if len(page.Instances) != 3 {
		t.Fatalf("listed %d instances, want 3", len(page.Instances))
	}
	info, err := b.client.Status(b.ctx, "ended-1")
	if err != nil {
		t.Fatalf("Status of the damaged instance: %v", err)
	}
	var we *herald.WorkflowError
	if info.Status != herald.StatusTerminated || !errors.As(info.Err(), &we) || we.Kind != "corrupt" ||
		!strings.Contains(we.Message, "does not decode") {
		t.Fatalf("damaged instance: %s, %v; want terminated with a corrupt failure", info.Status, info.Err())
	}
	if ok, err := b.client.Status(b.ctx, "ended-0"); err != nil || ok.Err() == nil || !strings.Contains(ok.Err().Error(), "done with it") {
		t.Fatalf("an intact neighbour: %v, %v", ok, err)
	}
}
