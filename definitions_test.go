package herald_test

// Tests of event definitions (docs/definitions.md; docs/events.md,
// Payloads; docs/queue.md, Latest-value queues): storage and validation of
// definitions, schema and size validation of payloads on both lanes,
// latest-value versus FIFO queues, tenant isolation, and the retention of
// events kept for instances that have not started.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/schema"
	"github.com/heraldwf/herald/storage"
)

// dfGateIn drives dfGated: optionally wait for the positional event "go",
// then Dequeue once per entry of Queues, then WaitEvent once per entry of
// Waits.
type dfGateIn struct {
	Gate   bool
	Queues []string
	Waits  []string
}

// dfGated returns the payloads it received, in the order it received them.
func dfGated(ctx *herald.Context, in dfGateIn) ([]json.RawMessage, error) {
	if in.Gate {
		if err := ctx.WaitEvent("go").Get(nil); err != nil {
			return nil, err
		}
	}
	var out []json.RawMessage
	for _, q := range in.Queues {
		var v json.RawMessage
		if err := ctx.Dequeue(q).Get(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	for _, w := range in.Waits {
		var v json.RawMessage
		if err := ctx.WaitEvent(w).Get(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// dfTry reports whether queue "q" had a message when the workflow first ran.
func dfTry(ctx *herald.Context, _ struct{}) (bool, error) { return ctx.TryDequeue("q", nil) }

func dfRegister(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "df-gated", dfGated)
	herald.RegisterWorkflow(rt, "df-try", dfTry)
}

// dfClient returns a client on a fresh store, for tests that need no runtime.
func dfClient(t *testing.T) *herald.Client {
	t.Helper()
	return mustClient(testStore(t), herald.DefaultTenant, nil)
}

// dfResult waits for id to complete and returns its payloads as compact
// JSON strings.
func dfResult(b *bundle, id string) []string {
	b.t.Helper()
	out := resultOf[[]json.RawMessage](b, id)
	s := make([]string, len(out))
	for i, v := range out {
		s[i] = dfCompact(v)
	}
	return s
}

func dfCompact(v []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return string(v)
	}
	return buf.String()
}

// dfBlob is a JSON string of exactly n bytes.
func dfBlob(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }

func TestDefinition_PutGetListDelete(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	ctx := t.Context()
	if defs, err := c.ListEventDefinitions(ctx); err != nil || len(defs) != 0 {
		t.Fatalf("list on an empty store: %v, %v", defs, err)
	}
	want := herald.EventDefinition{
		Name:            "order.paid",
		Schema:          json.RawMessage(`{"type": "object", "required": ["amount"]}`),
		Buffer:          "latest",
		Retention:       90 * time.Minute,
		MaxPayloadBytes: 4096,
		Correlation:     &herald.CorrelationConfig{TTL: time.Hour, DeleteAfterFirstCorrelation: true},
	}
	put := on(t, c).define(want)
	on(t, c).define(herald.EventDefinition{Name: "approval"}) // no schema, default buffer

	got, err := c.GetEventDefinition(ctx, "order.paid")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*herald.EventDefinition{put, got} {
		if d.Name != want.Name || d.Buffer != want.Buffer || d.Retention != want.Retention ||
			d.MaxPayloadBytes != want.MaxPayloadBytes || d.CreatedAt.IsZero() || d.UpdatedAt.IsZero() ||
			!reflect.DeepEqual(d.Correlation, want.Correlation) || dfCompact(d.Schema) != dfCompact(want.Schema) {
			t.Fatalf("definition %+v, want %+v", d, want)
		}
	}
	plain, err := c.GetEventDefinition(ctx, "approval")
	if err != nil || plain.Buffer != "fifo" || len(plain.Schema) != 0 || plain.Retention != 0 || plain.Correlation != nil {
		t.Fatalf("definition without options: %+v, %v; want buffer fifo and nothing else", plain, err)
	}
	// Names are case-sensitive.
	if _, err := c.GetEventDefinition(ctx, "Approval"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("get Approval: %v, want ErrNotFound", err)
	}

	defs, err := c.ListEventDefinitions(ctx)
	if err != nil || len(defs) != 2 || defs[0].Name != "approval" || defs[1].Name != "order.paid" {
		t.Fatalf("list: %+v, %v; want approval and order.paid by name", defs, err)
	}

	if err := c.DeleteEventDefinition(ctx, "order.paid"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetEventDefinition(ctx, "order.paid"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if defs, err := c.ListEventDefinitions(ctx); err != nil || len(defs) != 1 || defs[0].Name != "approval" {
		t.Fatalf("list after delete: %+v, %v", defs, err)
	}
	if err := c.DeleteEventDefinition(ctx, "order.paid"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if err := c.DeleteEventDefinition(ctx, "never"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("delete of an unknown name: %v, want ErrNotFound", err)
	}
}

func TestDefinition_ReplaceKeepsCreatedAt(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	c := mustClient(testStore(t), herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(clock.Now)})
	v1 := on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"object"}`)})
	clock.Advance(time.Minute)
	v2 := on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"array"}`), Buffer: "latest"})
	if !v2.CreatedAt.Equal(v1.CreatedAt) || v2.UpdatedAt.Sub(v1.UpdatedAt) < time.Minute {
		t.Fatalf("v1 %+v, v2 %+v; want CreatedAt kept and UpdatedAt moved", v1, v2)
	}
	if got, err := c.GetEventDefinition(t.Context(), "approval"); err != nil || got.Buffer != "latest" ||
		dfCompact(got.Schema) != `{"type":"array"}` {
		t.Fatalf("get after replace: %+v, %v", got, err)
	}
	// Another name is another definition.
	if other := on(t, c).define(herald.EventDefinition{Name: "other"}); other.CreatedAt.Before(v2.UpdatedAt) || other.Buffer != "fifo" {
		t.Fatalf("other: %+v, want created now with the default buffer", other)
	}
	// A put after a delete creates the definition anew.
	if err := c.DeleteEventDefinition(t.Context(), "approval"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if v3 := on(t, c).define(herald.EventDefinition{Name: "approval"}); !v3.CreatedAt.After(v1.CreatedAt) || v3.Buffer != "fifo" || len(v3.Schema) != 0 {
		t.Fatalf("put after delete: %+v, want it created anew", v3)
	}
}

func TestDefinition_InvalidRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		what string
		def  herald.EventDefinition
	}{
		{"schema that is not JSON", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`{"type": "object"`)}},
		{"schema with a wrong type keyword", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`{"type": 12}`)}},
		{"schema with an unknown type", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`{"type": "decimal"}`)}},
		{"schema with a negative minLength", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`{"minLength": -1}`)}},
		{"schema that is not an object", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`42`)}},
		{"schema with a remote $ref", herald.EventDefinition{Name: "x", Schema: json.RawMessage(`{"$ref": "https://example.com/s.json"}`)}},
		{"unknown buffer policy", herald.EventDefinition{Name: "x", Buffer: "lifo"}},
		{"buffer policy in the wrong case", herald.EventDefinition{Name: "x", Buffer: "Latest"}},
		{"negative retention", herald.EventDefinition{Name: "x", Retention: -time.Second}},
		{"negative payload cap", herald.EventDefinition{Name: "x", MaxPayloadBytes: -1}},
		{"negative correlation ttl", herald.EventDefinition{Name: "x", Correlation: &herald.CorrelationConfig{TTL: -time.Second}}},
		{"empty name", herald.EventDefinition{Name: ""}},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			c := dfClient(t)
			// A valid definition of another name, and of the same name in the
			// replace case, must survive the refused put unchanged.
			keep := on(t, c).define(herald.EventDefinition{Name: "keep", Schema: json.RawMessage(`{"type":"boolean"}`)})
			out, err := c.PutEventDefinition(t.Context(), tc.def)
			if !errors.Is(err, herald.ErrDefinitionInvalid) || out != nil {
				t.Fatalf("put: %+v, %v; want ErrDefinitionInvalid", out, err)
			}
			if tc.def.Name != "" {
				if d, err := c.GetEventDefinition(t.Context(), tc.def.Name); !errors.Is(err, herald.ErrNotFound) {
					t.Fatalf("refused definition stored: %+v, %v", d, err)
				}
			}
			defs, err := c.ListEventDefinitions(t.Context())
			if err != nil || len(defs) != 1 || defs[0].Name != "keep" {
				t.Fatalf("list after a refused put: %+v, %v", defs, err)
			}

			// Replacing a valid definition with an invalid one keeps the old.
			bad := tc.def
			bad.Name = "keep"
			if tc.def.Name == "" {
				return
			}
			if _, err := c.PutEventDefinition(t.Context(), bad); !errors.Is(err, herald.ErrDefinitionInvalid) {
				t.Fatalf("replace: %v, want ErrDefinitionInvalid", err)
			}
			got, err := c.GetEventDefinition(t.Context(), "keep")
			if err != nil || !got.UpdatedAt.Equal(keep.UpdatedAt) || dfCompact(got.Schema) != `{"type":"boolean"}` || got.Buffer != "fifo" {
				t.Fatalf("definition after a refused replace: %+v, %v; want %+v", got, err, keep)
			}
		})
	}
}

// A definition's schema applies to the positional lane too; `buffer:
// latest` does not: positional events keep their FIFO pairing.
func TestDefinition_SchemaAppliesToRaiseEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, dfRegister)
	b.define(herald.EventDefinition{Name: "approval", Buffer: "latest", Schema: json.RawMessage(s1Schema)})

	// Refused whether the instance waits, has not started, or is running.
	b.refused(history.LanePositional, "i", "approval", map[string]any{"approved": "yes"}, "ev-bad", "/approved")
	b.refused(history.LanePositional, "i", "approval", nil, "ev-null", "/: ")
	b.send(history.LanePositional, "i", "approval", s1Approval{Approved: true}, "ev-1")
	b.send(history.LanePositional, "i", "approval", s1Approval{Approved: false}, "ev-2")
	// Signal-with-start does not start the instance for a refused event.
	_, err := b.client.RaiseEvent(b.ctx, "j", "approval", "yes", herald.WithEventID("ev-start"),
		herald.StartIfAbsent("df-gated", dfGateIn{}))
	if !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("raise with start: %v, want ErrEventInvalid", err)
	}
	if _, err := b.client.Status(b.ctx, "j"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("instance started by a refused event: %v", err)
	}
	// Another name is not validated by this definition.
	b.send(history.LanePositional, "i", "other", map[string]any{"approved": "yes"}, "ev-other")
	if ids := b.eventIDs("i"); !reflect.DeepEqual(ids, []string{"ev-1", "ev-2", "ev-other"}) {
		t.Fatalf("events %v", ids)
	}

	b.start("df-gated", "i", dfGateIn{Gate: true, Waits: []string{"approval", "approval", "approval"}})
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	b.refused(history.LanePositional, "i", "approval", map[string]any{"approved": 1}, "ev-bad-running", "/approved")
	b.send(history.LanePositional, "i", "go", nil, "ev-go")
	b.waitHistory("i", history.EventSubscribed, "approval", 3)
	// And while a wait is open.
	b.refused(history.LanePositional, "i", "approval", map[string]any{}, "ev-bad-waiting", "approved")
	b.send(history.LanePositional, "i", "approval", s1Approval{Approved: true}, "ev-3")

	got := dfResult(b, "i")
	if want := []string{`{"approved":true}`, `{"approved":false}`, `{"approved":true}`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
	for i, id := range []string{"ev-1", "ev-2", "ev-3"} {
		if rec := b.fate(id); rec.Fate != history.FateDelivered || rec.WaitNumber != i+1 {
			t.Fatalf("%s: %+v, want delivered to wait %d", id, rec, i+1)
		}
	}
	if n := countKind(b.history("i", 0), history.EventDropped, "approval"); n != 0 {
		t.Fatalf("%d approval events dropped on the positional lane", n)
	}
}

func TestDefinition_MaxPayloadBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadBytes: 200}}, dfRegister)
	b.define(herald.EventDefinition{Name: "small", MaxPayloadBytes: 20})
	b.define(herald.EventDefinition{Name: "big", MaxPayloadBytes: 2000, Schema: json.RawMessage(`{"type":"string"}`)})
	b.define(herald.EventDefinition{Name: "default-cap", Schema: json.RawMessage(`{"type":"string"}`)})

	for _, lane := range []history.Lane{history.LaneQueue, history.LanePositional} {
		l := string(lane)
		// A smaller cap than the runtime's.
		b.refused(lane, "target", "small", dfBlob(21), l+"-small-21", "over the 20-byte cap")
		b.send(lane, "target", "small", dfBlob(20), l+"-small-20")
		// A larger one.
		b.refused(lane, "target", "big", dfBlob(2001), l+"-big-2001", "over the 2000-byte cap")
		b.send(lane, "target", "big", dfBlob(2000), l+"-big-2000")
		// A definition without a cap, and no definition: the runtime's.
		b.refused(lane, "target", "default-cap", dfBlob(201), l+"-default-201", "over the 200-byte cap")
		b.send(lane, "target", "default-cap", dfBlob(200), l+"-default-200")
		b.refused(lane, "target", "none", dfBlob(201), l+"-none-201", "over the 200-byte cap")
		b.send(lane, "target", "none", dfBlob(200), l+"-none-200")
	}
	if n := len(b.eventIDs("target")); n != 8 {
		t.Fatalf("%d events stored, want the 8 accepted", n)
	}

	names := []string{"small", "big", "default-cap", "none"}
	b.start("df-gated", "target", dfGateIn{Queues: names, Waits: names})
	got := dfResult(b, "target")
	sizes := []int{20, 2000, 200, 200, 20, 2000, 200, 200}
	if len(got) != len(sizes) {
		t.Fatalf("received %d payloads, want %d", len(got), len(sizes))
	}
	for i, n := range sizes {
		if got[i] != string(dfBlob(n)) {
			t.Fatalf("payload %d: %d bytes, want %d", i, len(got[i]), n)
		}
	}
}

// Changing a definition applies to events sent from then on: events already
// buffered under the old schema are delivered as they are.
func TestDefinition_ChangeDoesNotTouchBufferedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, dfRegister)
	b.define(herald.EventDefinition{Name: "approval", Buffer: "latest", Schema: json.RawMessage(s1Schema)})
	b.start("df-gated", "i", dfGateIn{Gate: true, Queues: []string{"approval"}, Waits: []string{"approval"}})
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	b.send(history.LaneQueue, "i", "approval", s1Approval{Approved: false}, "ev-q")
	b.send(history.LanePositional, "i", "approval", s1Approval{Approved: false}, "ev-p")
	b.waitFate("ev-q", history.FateBuffered)
	b.waitFate("ev-p", history.FateBuffered)

	tight := `{"type":"object","properties":{"approved":{"const":true},"approver":{"type":"string"}},"required":["approved","approver"]}`
	if d := b.define(herald.EventDefinition{Name: "approval", Buffer: "latest", Schema: json.RawMessage(tight)}); d.Buffer != "latest" {
		t.Fatalf("buffer %q, want latest", d.Buffer)
	}
	// The new schema is in force (the compiled old one is not reused)...
	b.refused(history.LaneQueue, "i", "approval", s1Approval{Approved: false}, "ev-new", "approver")
	b.refused(history.LanePositional, "i", "approval", s1Approval{Approved: false}, "ev-new", "approver")
	// ...and the buffered events, invalid under it, are untouched.
	for _, id := range []string{"ev-q", "ev-p"} {
		if rec := b.fate(id); rec.Fate != history.FateBuffered {
			t.Fatalf("%s after the change: %+v, want still buffered", id, rec)
		}
	}
	b.send(history.LanePositional, "i", "go", nil, "ev-go")
	got := dfResult(b, "i")
	if want := []string{`{"approved":false}`, `{"approved":false}`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("received %v, want the events buffered before the change %v", got, want)
	}
	for _, id := range []string{"ev-q", "ev-p"} {
		if rec := b.fate(id); rec.Fate != history.FateDelivered || rec.WaitNumber != 1 {
			t.Fatalf("%s: %+v, want delivered", id, rec)
		}
	}
}

func TestDefinition_DeleteRemovesValidation(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(s1Schema), MaxPayloadBytes: 30})
	// The client has compiled and cached version 1.
	on(t, c).refused(history.LaneQueue, "i", "approval", map[string]any{"approved": "yes"}, "ev-1", "/approved")
	on(t, c).send(history.LaneQueue, "i", "approval", s1Approval{Approved: true}, "ev-ok")

	if err := c.DeleteEventDefinition(t.Context(), "approval"); err != nil {
		t.Fatal(err)
	}
	on(t, c).send(history.LaneQueue, "i", "approval", map[string]any{"approved": "yes"}, "ev-1")
	on(t, c).send(history.LanePositional, "i", "approval", dfBlob(100), "ev-2") // the definition's cap is gone too

	// A new definition of the name after the delete (version 2) is the one
	// in force, not the cached version 1.
	on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"string"}`)})
	on(t, c).refused(history.LaneQueue, "i", "approval", s1Approval{Approved: true}, "ev-3", "/: ")
	on(t, c).send(history.LaneQueue, "i", "approval", "yes", "ev-4")
	if ids := on(t, c).eventIDs("i"); !reflect.DeepEqual(ids, []string{"ev-ok", "ev-1", "ev-2", "ev-4"}) {
		t.Fatalf("events %v", ids)
	}
}

// A definition belongs to its tenant: it neither validates nor buffers
// another tenant's events, even for the same instance id and event ids.
func TestDefinition_TenantIsolation(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	a := setupOn(t, st, &herald.Config{Tenants: []string{"a"}}, dfRegister)
	bRT := setupOn(t, st, &herald.Config{Tenants: []string{"b"}}, dfRegister)
	ca := mustClient(st, "a", nil)
	cb := mustClient(st, "b", nil)

	on(t, ca).define(herald.EventDefinition{Name: "approval", Buffer: "latest", Schema: json.RawMessage(s1Schema), MaxPayloadBytes: 30})
	if _, err := cb.GetEventDefinition(t.Context(), "approval"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a's definition seen from b: %v", err)
	}
	if _, err := cb.GetEventDefinition(t.Context(), "sneaky"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("sneaky seen from b: %v", err)
	}
	if defs, err := cb.ListEventDefinitions(t.Context()); err != nil || len(defs) != 0 {
		t.Fatalf("b's definitions: %+v, %v; want none", defs, err)
	}
	if err := cb.DeleteEventDefinition(t.Context(), "approval"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("b deleting a's definition: %v, want ErrNotFound", err)
	}

	// Tenant a: validated and latest-value.
	on(t, ca).refused(history.LaneQueue, "same", "approval", map[string]any{"approved": "maybe"}, "ev-x", "/approved")
	on(t, ca).send(history.LaneQueue, "same", "approval", s1Approval{Approved: false}, "ev-1")
	on(t, ca).send(history.LaneQueue, "same", "approval", s1Approval{Approved: true}, "ev-2")
	// Tenant b, same instance id and event ids: no schema, no cap, FIFO.
	on(t, cb).send(history.LaneQueue, "same", "approval", map[string]any{"approved": "maybe"}, "ev-x")
	on(t, cb).send(history.LaneQueue, "same", "approval", map[string]any{"approved": "maybe", "note": strings.Repeat("n", 40)}, "ev-1")
	on(t, cb).send(history.LaneQueue, "same", "approval", s1Approval{Approved: true}, "ev-2")

	a.start("df-gated", "same", dfGateIn{Queues: []string{"approval"}})
	bRT.start("df-gated", "same", dfGateIn{Queues: []string{"approval", "approval", "approval"}})
	if got := dfResult(a.as(ca), "same"); !reflect.DeepEqual(got, []string{`{"approved":true}`}) {
		t.Fatalf("a received %v, want the latest message only", got)
	}
	gotB := dfResult(bRT.as(cb), "same")
	if len(gotB) != 3 || gotB[0] != `{"approved":"maybe"}` || gotB[2] != `{"approved":true}` {
		t.Fatalf("b received %v, want all three in order", gotB)
	}
	if rec := a.fate("ev-1"); rec.Fate != history.FateDropped || rec.Reason != history.DropSuperseded {
		t.Fatalf("a's ev-1: %+v, want dropped/superseded", rec)
	}
	if rec := bRT.fate("ev-1"); rec.Fate != history.FateDelivered || rec.WaitNumber != 2 {
		t.Fatalf("b's ev-1: %+v, want delivered to receive 2", rec)
	}
	if _, err := ca.EventFate(t.Context(), "ev-x"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a's refused ev-x: %v, want ErrNotFound (b's ev-x is b's)", err)
	}

	// b defines the same name its own way; a is not affected.
	on(t, cb).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"object","properties":{"approved":{"type":"string"}}}`)})
	on(t, cb).refused(history.LaneQueue, "other", "approval", s1Approval{Approved: true}, "ev-y", "/approved")
	on(t, ca).send(history.LaneQueue, "other", "approval", s1Approval{Approved: true}, "ev-y")
	if d, err := ca.GetEventDefinition(t.Context(), "approval"); err != nil || d.Buffer != "latest" || d.MaxPayloadBytes != 30 {
		t.Fatalf("a's definition after b's put: %+v, %v", d, err)
	}
}

// Without a definition (or with `buffer: fifo`) a queue keeps every
// message, in order.
func TestDefinition_FIFOQueueWithoutDefinitionKeepsEveryMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, dfRegister)
	b.define(herald.EventDefinition{Name: "tasks", Buffer: "fifo", Schema: json.RawMessage(`{"type":"integer"}`)})
	b.start("df-gated", "i", dfGateIn{Gate: true, Queues: []string{"jobs", "jobs", "jobs", "tasks", "tasks"}})
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	for i, id := range []string{"j1", "j2", "j3"} {
		b.send(history.LaneQueue, "i", "jobs", i+1, id)
	}
	b.send(history.LaneQueue, "i", "tasks", 10, "t1")
	b.send(history.LaneQueue, "i", "tasks", 20, "t2")
	for _, id := range []string{"j1", "j2", "j3", "t1", "t2"} {
		b.waitFate(id, history.FateBuffered)
	}
	b.send(history.LanePositional, "i", "go", nil, "ev-go")
	if got := dfResult(b, "i"); !reflect.DeepEqual(got, []string{"1", "2", "3", "10", "20"}) {
		t.Fatalf("received %v, want every message in order", got)
	}
	if ids := b.eventIDs("i", herald.EventFilter{Fate: history.FateDropped}); len(ids) != 0 {
		t.Fatalf("dropped: %v", ids)
	}
	delivered := b.eventIDs("i", herald.EventFilter{Lane: history.LaneQueue, Fate: history.FateDelivered})
	if !reflect.DeepEqual(delivered, []string{"j1", "j2", "j3", "t1", "t2"}) {
		t.Fatalf("delivered: %v", delivered)
	}
}

// Events for an instance that never starts expire after the retention:
// fate dropped/expired, a WARN line, a count, and a late start does not
// receive them. The clock is moved past the retention, so nothing depends
// on how fast the machine is.
func TestDefinition_RetentionExpiresEventsForInstanceThatNeverStarts(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	b := setup(t, &herald.Config{ClientConfig: atRetention(clock.Now, time.Hour), ExpiryInterval: 20 * time.Millisecond}, dfRegister)
	b.define(herald.EventDefinition{Name: "soon", Retention: 30 * time.Minute})
	b.send(history.LaneQueue, "ghost", "q", "hello", "ev-q")
	b.send(history.LanePositional, "ghost", "p", "hello", "ev-p")
	b.send(history.LaneQueue, "ghost-2", "soon", "hello", "ev-soon")
	for _, id := range []string{"ev-q", "ev-p", "ev-soon"} {
		if rec := b.fate(id); rec.Fate != history.FatePending {
			t.Fatalf("%s: %+v, want pending", id, rec)
		}
	}

	// Before the retention has passed nothing expires: the expiry loop has
	// run (ev-soon's shorter retention is over), ev-q and ev-p stay.
	clock.Advance(59 * time.Minute)
	if rec := b.waitFate("ev-soon", history.FateDropped); rec.Reason != history.DropExpired {
		t.Fatalf("ev-soon: %+v, want dropped/expired", rec)
	}
	for _, id := range []string{"ev-q", "ev-p"} {
		if rec := b.fate(id); rec.Fate != history.FatePending {
			t.Fatalf("%s before its retention: %+v, want pending", id, rec)
		}
	}

	clock.Advance(2 * time.Minute)
	for _, id := range []string{"ev-q", "ev-p"} {
		rec := b.waitFate(id, history.FateDropped)
		if rec.Reason != history.DropExpired || rec.InstanceID != "ghost" {
			t.Fatalf("%s: %+v, want dropped/expired", id, rec)
		}
		if age := rec.UpdatedAt.Sub(rec.ReceivedAt); age < time.Hour {
			t.Fatalf("%s expired after %v, before its retention", id, age)
		}
		b.wantWarn("herald: event dropped", "event_id="+id, "reason=expired")
	}
	if n := b.obs.droppedBy(string(history.DropExpired)); n != 3 {
		t.Fatalf("expired drops counted: %d, want 3", n)
	}
	if ids := b.eventIDs("ghost", herald.EventFilter{Fate: history.FateDropped}); !reflect.DeepEqual(ids, []string{"ev-q", "ev-p"}) {
		t.Fatalf("dropped events of ghost: %v", ids)
	}
	// The id stays known: sending it again is a duplicate, not a new event.
	rec, err := b.client.Enqueue(b.ctx, "ghost", "q", "hello", herald.WithEventID("ev-q"))
	if err != nil || !rec.Duplicate {
		t.Fatalf("resend of an expired event: %+v, %v; want a duplicate receipt", rec, err)
	}
	// Starting the instance now does not resurrect them.
	b.start("df-try", "ghost", nil)
	info := b.waitDone("ghost")
	var got bool
	if err := info.Result(&got); err != nil || got {
		t.Fatalf("late start found a message: %v, %v", got, err)
	}
	if rec := b.fate("ev-q"); rec.Fate != history.FateDropped || rec.Reason != history.DropExpired {
		t.Fatalf("ev-q after the start: %+v", rec)
	}
}

// A definition's Retention overrides the runtime's, in both directions.
func TestDefinition_RetentionOverridesDefault(t *testing.T) {
	t.Parallel()
	t.Run("longer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{EventRetention: 200 * time.Millisecond}, ExpiryInterval: 50 * time.Millisecond}, dfRegister)
		b.define(herald.EventDefinition{Name: "keep", Retention: time.Hour})
		b.define(herald.EventDefinition{Name: "plain"}) // Retention 0: the runtime's
		b.send(history.LaneQueue, "ghost", "keep", 1, "ev-keep")
		b.send(history.LanePositional, "ghost", "keep", 1, "ev-keep-p")
		b.send(history.LaneQueue, "ghost", "plain", 1, "ev-plain")
		b.send(history.LaneQueue, "ghost", "undefined", 1, "ev-undefined")
		for _, id := range []string{"ev-plain", "ev-undefined"} {
			if rec := b.waitFate(id, history.FateDropped); rec.Reason != history.DropExpired {
				t.Fatalf("%s: %+v, want dropped/expired", id, rec)
			}
		}
		for _, id := range []string{"ev-keep", "ev-keep-p"} {
			if rec := b.fate(id); rec.Fate != history.FatePending {
				t.Fatalf("%s with a one-hour retention: %+v, want still pending", id, rec)
			}
		}
	})
	t.Run("shorter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &herald.Config{ExpiryInterval: 50 * time.Millisecond}, dfRegister) // default retention 24 h
		b.define(herald.EventDefinition{Name: "brief", Retention: 150 * time.Millisecond})
		b.send(history.LaneQueue, "ghost", "plain", 1, "ev-plain")
		b.send(history.LaneQueue, "ghost", "brief", 1, "ev-brief")
		if rec := b.waitFate("ev-brief", history.FateDropped); rec.Reason != history.DropExpired {
			t.Fatalf("ev-brief: %+v, want dropped/expired", rec)
		}
		b.wantWarn("herald: event dropped", "event_id=ev-brief", "reason=expired")
		if rec := b.fate("ev-plain"); rec.Fate != history.FatePending {
			t.Fatalf("ev-plain with the default retention: %+v, want still pending", rec)
		}
	})
}

// An event kept for an instance that starts before its retention has passed
// is delivered, and once the instance exists the retention no longer
// applies: the clock is moved past it while the event waits in the inbox.
func TestDefinition_EventBeforeStartDeliveredWhenInstanceStarts(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	b := setup(t, &herald.Config{ClientConfig: atRetention(clock.Now, time.Hour), ExpiryInterval: 20 * time.Millisecond}, dfRegister)
	b.define(herald.EventDefinition{Name: "approval", Buffer: "latest", Schema: json.RawMessage(s1Schema), Retention: 2 * time.Hour})
	b.send(history.LaneQueue, "late", "approval", s1Approval{Approved: true}, "ev-q")
	b.send(history.LanePositional, "late", "p", "hi", "ev-p")
	b.send(history.LaneQueue, "never", "approval", s1Approval{Approved: true}, "ev-never")

	b.start("df-gated", "late", dfGateIn{Gate: true, Queues: []string{"approval"}, Waits: []string{"p"}})
	b.waitHistory("late", history.EventSubscribed, "go", 1)
	for _, id := range []string{"ev-q", "ev-p"} {
		rec := b.waitFate(id, history.FateBuffered)
		if rec.Execution != 1 {
			t.Fatalf("%s: %+v, want buffered in execution 1", id, rec)
		}
	}
	evs := b.history("late", 0)
	for _, id := range []string{"ev-q", "ev-p"} {
		if r := withID(ofKind(evs, history.EventRaised, "", ""), id); len(r) != 1 || !r[0].AtStart {
			t.Fatalf("%s not placed at the start of execution 1:%s", id, dumpHistory(evs))
		}
	}

	// Past every retention: the event of the instance that never started
	// expires, the started instance's events do not.
	clock.Advance(3 * time.Hour)
	if rec := b.waitFate("ev-never", history.FateDropped); rec.Reason != history.DropExpired {
		t.Fatalf("ev-never: %+v, want dropped/expired", rec)
	}
	for _, id := range []string{"ev-q", "ev-p"} {
		if rec := b.fate(id); rec.Fate != history.FateBuffered {
			t.Fatalf("%s of a started instance after its retention: %+v, want still buffered", id, rec)
		}
	}

	b.send(history.LanePositional, "late", "go", nil, "ev-go")
	if got := dfResult(b, "late"); !reflect.DeepEqual(got, []string{`{"approved":true}`, `"hi"`}) {
		t.Fatalf("received %v", got)
	}
	for _, id := range []string{"ev-q", "ev-p"} {
		if rec := b.fate(id); rec.Fate != history.FateDelivered || rec.WaitNumber != 1 || rec.Execution != 1 {
			t.Fatalf("%s: %+v, want delivered", id, rec)
		}
	}
}

// Event names are arbitrary case-sensitive strings (docs/events.md), so a name
// must not decide whether its schema compiles. BUG: compileSchema builds
// the resource URL as "herald:///definitions/"+name+".json" without
// escaping, so a name with '#' or a bare '%' is refused with a misleading
// "schema:" error.
func TestDefinition_NameWithURLCharactersAccepted(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	for _, name := range []string{"order#paid", "100%", "a%zz"} {
		if _, err := c.PutEventDefinition(t.Context(), herald.EventDefinition{Name: name, Schema: json.RawMessage(`{"type":"boolean"}`)}); err != nil {
			t.Errorf("put %q: %v", name, err)
			continue
		}
		on(t, c).refused(history.LaneQueue, "i", name, "no", "ev-"+name, "want boolean")
		on(t, c).send(history.LaneQueue, "i", name, true, "ok-"+name)
	}
}

// BUG: a payload refused by a schema through a $ref gets the reason
// "/approved: validation failed" instead of what is wrong: schemaReasons
// reads jsonschema's BasicOutput, which (v6.0.2) labels the flattened cause
// of a $ref with the reference's "validation failed" message; the
// ValidationError's own text has "got string, want boolean".
func TestDefinition_ReasonsThroughRefSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	on(t, c).define(herald.EventDefinition{Name: "approval",
		Schema: json.RawMessage(`{"$defs":{"flag":{"type":"boolean"}},"properties":{"approved":{"$ref":"#/$defs/flag"}}}`)})
	on(t, c).refused(history.LaneQueue, "i", "approval", map[string]any{"approved": "yes"}, "ev-1", "/approved: got string, want boolean")
}

// docs/events.md, Event ids and dedup: sending the same event id again for
// the same target is a no-op that returns the first receipt. A bug once
// validated the payload against the current definition before looking the
// id up, so a client retrying an event that was accepted (say after a
// timeout) got ErrEventInvalid once the definition had been tightened,
// although the event was stored.
func TestDefinition_ResendAfterDefinitionChangeIsDuplicate(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(s1Schema)})
	on(t, c).send(history.LaneQueue, "i", "approval", s1Approval{Approved: true}, "ev-1")
	on(t, c).define(herald.EventDefinition{Name: "approval", Schema: json.RawMessage(`{"type":"string"}`)})
	rec, err := c.Enqueue(t.Context(), "i", "approval", s1Approval{Approved: true}, herald.WithEventID("ev-1"))
	if err != nil || !rec.Duplicate {
		t.Fatalf("resend of an accepted event: %+v, %v; want its first receipt (Duplicate)", rec, err)
	}
}

// dfUniqueSeq makes dfUnique's schemas differ across runs of a test in one
// process (-count).
var dfUniqueSeq atomic.Int64

// dfUnique returns an object schema with a $comment unique to this test
// run, so that schema.Compiles of its bytes counts this test's compiles
// alone, whatever runs in parallel.
func dfUnique(t *testing.T, schemaObject string) json.RawMessage {
	t.Helper()
	if !strings.HasPrefix(schemaObject, "{") {
		t.Fatalf("dfUnique: %.40s is not an object", schemaObject)
	}
	comment := fmt.Sprintf(`{"$comment":"%s %d"`, t.Name(), dfUniqueSeq.Add(1))
	if schemaObject == "{}" {
		return json.RawMessage(comment + "}")
	}
	return json.RawMessage(comment + "," + schemaObject[1:])
}

// dfDefRefused puts def through c, wants a *DefinitionInvalidError naming
// def with a reason containing want, and checks that nothing was stored.
func dfDefRefused(t *testing.T, c *herald.Client, def herald.EventDefinition, want string) {
	t.Helper()
	out, err := c.PutEventDefinition(t.Context(), def)
	var inv *herald.DefinitionInvalidError
	if !errors.Is(err, herald.ErrDefinitionInvalid) || !errors.As(err, &inv) || out != nil || inv.Name != def.Name {
		stored := "nothing stored"
		if out != nil {
			stored = fmt.Sprintf("stored (updated %s)", out.UpdatedAt)
		}
		t.Fatalf("put %s: %s, %.300v; want a *DefinitionInvalidError", def.Name, stored, err)
	}
	if !slices.ContainsFunc(inv.Reasons, func(r string) bool { return strings.Contains(r, want) }) {
		t.Fatalf("put %s: reasons %q, want one containing %q", def.Name, inv.Reasons, want)
	}
	if d, err := c.GetEventDefinition(t.Context(), def.Name); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("refused definition %s stored: %+v, %v", def.Name, d, err)
	}
}

// dfDefSendRefused sends to name through c and wants ErrDefinitionInvalid
// with a reason containing want, nothing stored for eventID.
func dfDefSendRefused(t *testing.T, c *herald.Client, name, eventID, want string) {
	t.Helper()
	_, err := c.Enqueue(t.Context(), "i", name, true, herald.WithEventID(eventID))
	var inv *herald.DefinitionInvalidError
	if !errors.Is(err, herald.ErrDefinitionInvalid) || !errors.As(err, &inv) ||
		!slices.ContainsFunc(inv.Reasons, func(r string) bool { return strings.Contains(r, want) }) {
		t.Fatalf("enqueue %s %s: %v; want a *DefinitionInvalidError saying %q", name, eventID, err, want)
	}
	if rec, err := c.EventFate(t.Context(), eventID); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("refused %s stored: %+v, %v", eventID, rec, err)
	}
}

// A schema is capped in size (Config.MaxSchemaBytes, default 256 KiB). A
// 2.3 MB schema took 38 s to compile at put and again at each client's first
// raise.
func TestDefinition_SchemaSizeCapped(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	c := mustClient(st, herald.DefaultTenant, nil)
	ctx := t.Context()
	described := func(n int) json.RawMessage { // a cheap schema of exactly n bytes
		const frame = `{"type":"boolean","description":""}`
		return json.RawMessage(frame[:len(frame)-2] + strings.Repeat("x", n-len(frame)) + `"}`)
	}
	dfDefRefused(t, c, herald.EventDefinition{Name: "big", Schema: described(256<<10 + 1)}, "262145 bytes, over the 262144-byte cap")
	on(t, c).define(herald.EventDefinition{Name: "at-cap", Schema: described(256 << 10)})

	// Config.MaxSchemaBytes sets the cap.
	small := mustClient(st, herald.DefaultTenant, &herald.ClientConfig{MaxSchemaBytes: 1024})
	dfDefRefused(t, small, herald.EventDefinition{Name: "mid", Schema: described(1025)}, "1025 bytes, over the 1024-byte cap")
	on(t, c).define(herald.EventDefinition{Name: "mid", Schema: described(1025)})

	// An event whose stored schema is over the sending client's cap is
	// refused, nothing stored; a client with a larger cap sends it.
	dfDefSendRefused(t, small, "mid", "ev-small", "over the 1024-byte cap")
	on(t, c).send(history.LaneQueue, "i", "mid", true, "ev-default")
	if _, err := c.Enqueue(ctx, "i", "mid", "yes"); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("payload against the stored schema: %v, want ErrEventInvalid", err)
	}
}

// A schema whose shape would make the compile slow is refused at put before
// the JSON Schema library sees it: the limits, not a clock, bound the time.
func TestDefinition_PathologicalSchemaRefusedBeforeCompiling(t *testing.T) {
	t.Parallel()
	schema.CountCompiles()
	c := dfClient(t)
	props := func(n int, v string) string {
		p := make([]string, n)
		for i := range p {
			p[i] = fmt.Sprintf(`"p%d":%s`, i, v)
		}
		return `{"properties":{` + strings.Join(p, ",") + `}}`
	}
	cases := []struct{ what, schema, reason string }{
		// 216 KB: about 3 s to compile before, quadratic in the subschemas.
		{"20,000 subschemas", props(20000, "{}"), "20002 objects and booleans (subschemas), over the limit of 4096"},
		// 20 KB: about 16 s before, cubic in the depth.
		{"nested 2,000 deep", strings.Repeat(`{"items":`, 2000) + "{}" + strings.Repeat("}", 2000), "nested more than 64 levels deep"},
		{"600 regular expressions", props(600, `{"pattern":"[\\p{L}\\p{N}]{1000}"}`), "600 regular expressions"},
		{"2,000 references", `{"$defs":{"a":{}},"allOf":[` + strings.Repeat(`{"$ref":"#/$defs/a"},`, 1999) + `{"$ref":"#/$defs/a"}]}`, "2000 references"},
	}
	for _, tc := range cases {
		raw := dfUnique(t, tc.schema)
		dfDefRefused(t, c, herald.EventDefinition{Name: "slow", Schema: raw}, tc.reason)
		if n := schema.Compiles(raw); n != 0 {
			t.Errorf("%s: reached the JSON Schema compiler %d times, want it refused before", tc.what, n)
		}
	}

	// Fan-out: 27 levels of allOf over two references is 2^27 evaluations of
	// every payload. It compiles at once, so it is refused after compiling.
	defs := make([]string, 27)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	fan := `{"$defs":{` + strings.Join(defs, ",") + `,"d27":{"type":"integer"}},"$ref":"#/$defs/d0"}`
	dfDefRefused(t, c, herald.EventDefinition{Name: "slow", Schema: json.RawMessage(fan)}, "evaluates more than 10000 subschemas")
}

// A schema no value can satisfy because it refers to itself without
// descending into the value ({"$ref":"#"}, a cycle of $refs) is refused at
// put; so is a reference that does not resolve. Recursion through a
// property is fine.
func TestDefinition_RefCycleRefusedAtPut(t *testing.T) {
	t.Parallel()
	c := dfClient(t)
	for _, tc := range []struct{ schema, reason string }{
		{`{"$ref":"#"}`, "reference cycle that never descends into the value"},
		{`{"type":"object","allOf":[{"$ref":"#"}]}`, "reference cycle"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
			"#/$defs/a → #/$defs/b → #/$defs/b/anyOf/1 → #/$defs/a"},
		{`{"$ref":"#/$defs/missing"}`, `reference to "#/$defs/missing" does not resolve`},
		{`{"properties":{"a":{"$ref":"#missing"}}}`, `reference "#missing" does not resolve`},
	} {
		dfDefRefused(t, c, herald.EventDefinition{Name: "loop", Schema: json.RawMessage(tc.schema)}, tc.reason)
	}

	on(t, c).define(herald.EventDefinition{Name: "list",
		Schema: json.RawMessage(`{"type":"object","properties":{"next":{"$ref":"#"}},"additionalProperties":false}`)})
	on(t, c).send(history.LaneQueue, "i", "list", map[string]any{"next": map[string]any{"next": map[string]any{}}}, "ev-ok")
	on(t, c).refused(history.LaneQueue, "i", "list", map[string]any{"next": map[string]any{"x": 1}}, "ev-bad", "/next")
}

// A definition stored before these checks (here: straight through the
// store) whose schema cannot be used refuses its events with
// ErrDefinitionInvalid, nothing stored, and is worked out once per process,
// not at every raise.
func TestDefinition_StoredUnusableSchemaRefusesEvents(t *testing.T) {
	t.Parallel()
	schema.CountCompiles()
	st := testStore(t)
	raw := dfUnique(t, `{"$ref":"#"}`)
	if _, err := st.EventDefinitionPut(t.Context(), &storage.EventDefinitionPutParams{Tenant: herald.DefaultTenant,
		Definition: heraldtype.EventDefinition{Name: "legacy", Schema: raw}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*herald.Client{mustClient(st, herald.DefaultTenant, nil), mustClient(st, herald.DefaultTenant, nil)} {
		for j := range 3 {
			dfDefSendRefused(t, c, "legacy", fmt.Sprintf("ev-%d-%d", i, j), "cannot be used: schema: reference cycle")
		}
	}
	if n := schema.Compiles(raw); n != 1 {
		t.Fatalf("compiled %d times, want once", n)
	}
}

// Every client over a store shares the compiled schemas: Runtime.Client and
// any number of NewClient compile a definition version once in the process,
// at put.
func TestDefinition_SchemaCompiledOncePerProcess(t *testing.T) {
	t.Parallel()
	schema.CountCompiles()
	st := testStore(t)
	putter := mustClient(st, herald.DefaultTenant, nil)
	b := setupOn(t, st, nil, nil)
	clients := []*herald.Client{putter, mustClient(st, herald.DefaultTenant, nil), b.client, mustClient(st, herald.DefaultTenant, &herald.ClientConfig{MaxPayloadBytes: 1 << 10})}
	versions := []struct {
		schema    string
		good, bad any
	}{
		{`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`, map[string]int{"n": 1}, map[string]string{"n": "x"}},
		{`{"type":"integer"}`, 2, "x"},
	}
	for v, version := range versions {
		raw := dfUnique(t, version.schema)
		on(t, putter).define(herald.EventDefinition{Name: "tick", Schema: raw})
		for i, c := range clients {
			for j := range 2 {
				on(t, c).send(history.LaneQueue, "i", "tick", version.good, fmt.Sprintf("ev-%d-%d-%d", v, i, j))
				on(t, c).refused(history.LaneQueue, "i", "tick", version.bad, fmt.Sprintf("bad-%d-%d-%d", v, i, j), "got string")
			}
		}
		if n := schema.Compiles(raw); n != 1 {
			t.Fatalf("version %d compiled %d times over %d clients, want once", v+1, n, len(clients))
		}
	}
}

// References outside the schema are refused at put, and nothing is ever
// fetched: not over HTTP, not from a file.
func TestDefinition_RemoteRefRefused(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write([]byte(`{"type":"boolean"}`))
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"boolean"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dfClient(t)
	for _, s := range []string{
		`{"$ref":"` + srv.URL + `/s.json"}`,
		`{"properties":{"approved":{"$ref":"` + srv.URL + `/s.json#/type"}}}`,
		`{"$id":"` + srv.URL + `/root.json","properties":{"approved":{"$ref":"s.json"}}}`,
		`{"$schema":"` + srv.URL + `/meta.json"}`,
		`{"$ref":"file://` + filepath.ToSlash(file) + `"}`,
		`{"$ref":"https://example.com/s.json"}`,
	} {
		dfDefRefused(t, c, herald.EventDefinition{Name: "remote", Schema: json.RawMessage(s)}, "herald never loads schemas from URLs or files")
	}
	if n := fetched.Load(); n != 0 {
		t.Fatalf("the schema server was asked %d times", n)
	}
	// A resource bundled in the schema under a remote-looking $id is used,
	// not fetched.
	on(t, c).define(herald.EventDefinition{Name: "bundled", Schema: json.RawMessage(
		`{"$defs":{"flag":{"$id":"` + srv.URL + `/flag.json","type":"boolean"}},"properties":{"approved":{"$ref":"` + srv.URL + `/flag.json"}}}`)})
	on(t, c).refused(history.LaneQueue, "i", "bundled", map[string]any{"approved": "yes"}, "ev-1", "/approved")
	if n := fetched.Load(); n != 0 {
		t.Fatalf("the schema server was asked %d times", n)
	}
}

// FuzzPutEventDefinitionSchema puts arbitrary bytes as a definition's
// schema: no panic; either a *DefinitionInvalidError with the stored
// definition unchanged, or a stored definition that reads back identically
// and whose events are accepted or refused with ErrEventInvalid; and the
// runtime keeps running other instances.
func FuzzPutEventDefinitionSchema(f *testing.F) {
	deep := func(n int) string { return strings.Repeat(`{"items":`, n) + "{}" + strings.Repeat("}", n) }
	for _, s := range []string{
		"", "{}", "true", "false", "null", "42", `"s"`, "[]", " ", "{", `{} {}`, "{\"title\":\"\xff\"}",
		s1Schema,
		`{"type":"object","properties":{"next":{"$ref":"#"}},"additionalProperties":false}`,
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$ref":"#/$defs/missing"}`,
		`{"$ref":"http://127.0.0.1:1/s.json"}`,
		`{"$ref":"file:///etc/passwd"}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","id":"#a","properties":{"x":{"$ref":"#a"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s"}`,
		`{"$dynamicAnchor":"n","items":{"$dynamicRef":"#n"}}`,
		`{"patternProperties":{"^a+$":{"pattern":"[\\p{L}]{100}"}}}`,
		`{"type":"string","format":"regex"}`,
		deep(63), deep(64),
		`{"$defs":{"d0":{"allOf":[{"$ref":"#/$defs/d1"},{"$ref":"#/$defs/d1"}]},"d1":{"anyOf":[{"$ref":"#/$defs/d2"},{"$ref":"#/$defs/d2"}]},"d2":{}},"$ref":"#/$defs/d0"}`,
	} {
		f.Add([]byte(s))
	}

	st := testStore(f)
	rt, err := herald.NewRuntime(st, &herald.Config{PollInterval: 20 * time.Millisecond, ClientConfig: herald.ClientConfig{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		f.Fatal(err)
	}
	herald.RegisterWorkflow(rt, "fz-wait", func(ctx *herald.Context, _ struct{}) (int, error) {
		var n int
		err := ctx.WaitEvent("fz-keep").Get(&n)
		return n, err
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := rt.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		cancel()
		stop, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = rt.Stop(stop)
	})
	c, other := mustRuntimeClient(rt, herald.DefaultTenant), mustClient(st, herald.DefaultTenant, nil)
	if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: "fz-keep", Schema: json.RawMessage(`{"type":"integer"}`)}); err != nil {
		f.Fatal(err)
	}
	var seq atomic.Int64

	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		before, err := other.GetEventDefinition(ctx, "fz")
		if err != nil && !errors.Is(err, herald.ErrNotFound) {
			t.Fatal(err)
		}
		out, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: "fz", Schema: raw})
		if err != nil {
			var inv *herald.DefinitionInvalidError
			if !errors.As(err, &inv) || out != nil || len(inv.Reasons) == 0 {
				t.Fatalf("put: %+v, %v; want a definition or a *DefinitionInvalidError", out, err)
			}
			after, err := other.GetEventDefinition(ctx, "fz")
			if (before == nil) != errors.Is(err, herald.ErrNotFound) || (before != nil && (after == nil || !after.UpdatedAt.Equal(before.UpdatedAt) || !bytes.Equal(after.Schema, before.Schema))) {
				t.Fatalf("refused put changed the definition: before %+v, after %+v, %v", before, after, err)
			}
		} else {
			got, err := other.GetEventDefinition(ctx, "fz")
			if err != nil || !got.UpdatedAt.Equal(out.UpdatedAt) || !bytes.Equal(got.Schema, raw) {
				t.Fatalf("read back: %+v, %v; want schema %q", got, err, raw)
			}
			for _, p := range []any{nil, 7, "s", map[string]any{"a": []any{1, "b", true}}} {
				if _, err := other.Enqueue(ctx, "fz-nobody", "fz", p); err != nil && !errors.Is(err, herald.ErrEventInvalid) {
					t.Fatalf("enqueue %v under the stored schema: %v; want it accepted or ErrEventInvalid", p, err)
				}
			}
		}

		id := fmt.Sprintf("fz-%d", seq.Add(1))
		if _, err := c.StartWorkflow(ctx, "fz-wait", nil, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := other.RaiseEvent(ctx, id, "fz-keep", 7); err != nil {
			t.Fatal(err)
		}
		info, err := c.WaitForCompletion(ctx, id)
		var n int
		if err != nil || info.Result(&n) != nil || n != 7 {
			t.Fatalf("another instance: %+v, %v; want it completed with 7", info, err)
		}
	})
}

// EventInvalidError.Kind says which check refused an event: the HTTP API
// answers a malformed event, a payload over its cap and a schema
// violation with different statuses.
func TestDefinition_EventInvalidKinds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := mustClient(testStore(t), herald.DefaultTenant, &herald.ClientConfig{MaxPayloadBytes: 100})
	for _, d := range []herald.EventDefinition{
		{Name: "typed", Schema: json.RawMessage(`{"type":"object","required":["a"]}`), MaxPayloadBytes: 50},
		{Name: "corr", Schema: json.RawMessage(`{"type":"string"}`), Correlation: &herald.CorrelationConfig{}},
	} {
		if _, err := c.PutEventDefinition(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	big := dfBlob(101)
	cases := []struct {
		what string
		call func() error
		want herald.EventInvalidKind
	}{
		{"empty name", func() error { _, err := c.RaiseEvent(ctx, "i", "", 1); return err }, herald.EventMalformed},
		{"not JSON", func() error { _, err := c.RaiseEvent(ctx, "i", "x", json.RawMessage(`{`)); return err }, herald.EventMalformed},
		{"over the client cap", func() error { _, err := c.RaiseEvent(ctx, "i", "x", big); return err }, herald.EventTooLarge},
		{"over the definition cap", func() error { _, err := c.Enqueue(ctx, "i", "typed", dfBlob(51)); return err }, herald.EventTooLarge},
		{"schema", func() error { _, err := c.RaiseEvent(ctx, "i", "typed", map[string]int{"b": 1}); return err }, herald.EventSchemaViolation},
		{"correlated schema", func() error { _, err := c.PutCorrelatedEvent(ctx, "corr", "k", 1); return err }, herald.EventSchemaViolation},
		{"correlated too large", func() error { _, err := c.PutCorrelatedEvent(ctx, "corr", "k", big); return err }, herald.EventTooLarge},
		{"correlated without definition", func() error { _, err := c.PutCorrelatedEvent(ctx, "none", "k", 1); return err }, herald.EventMalformed},
		{"publish too large", func() error { _, err := c.Publish(ctx, "order.paid", big); return err }, herald.EventTooLarge},
	}
	for _, tc := range cases {
		err := tc.call()
		var inv *herald.EventInvalidError
		if !errors.Is(err, herald.ErrEventInvalid) || !errors.As(err, &inv) {
			t.Fatalf("%s: %v, want an *EventInvalidError", tc.what, err)
		}
		if inv.Kind != tc.want {
			t.Errorf("%s: kind %v, want %v (%v)", tc.what, inv.Kind, tc.want, err)
		}
	}
	if evs, err := c.Events(ctx, "i"); err != nil || len(evs) != 0 {
		t.Fatalf("refused events stored: %v, %v", evs, err)
	}
}
