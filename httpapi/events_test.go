package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

// deepJSON is an array nested n levels deep.
func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestEvents_Raise: raise on the positional lane, idempotent by event id,
// signal-with-start, and every refusal with its status and code; a refused
// event leaves no fate.
func TestEvents_Raise(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "e-1"}).ok(201, nil)

	var rec wire.EventReceipt
	s.do(key, "POST", "/v1/instances/e-1/events/go", wire.SendEventRequest{EventID: "ev-1", Payload: json.RawMessage(`{"ok":true}`)}).ok(202, &rec)
	if rec.EventID != "ev-1" || rec.Duplicate || rec.ReceivedAt.IsZero() {
		t.Fatalf("receipt %+v", rec)
	}
	var dup wire.EventReceipt
	s.do(key, "POST", "/v1/instances/e-1/events/go", wire.SendEventRequest{EventID: "ev-1", Payload: json.RawMessage(`{"ok":true}`)}).ok(202, &dup)
	if !dup.Duplicate || !dup.ReceivedAt.Equal(rec.ReceivedAt) {
		t.Fatalf("duplicate receipt %+v, first %+v", dup, rec)
	}
	in := s.waitStatus(key, "e-1", herald.StatusCompleted)
	if string(in.Output) != `{"ok":true}` {
		t.Fatalf("output %s", in.Output)
	}
	var fate wire.EventRecord
	s.do(key, "GET", "/v1/events/ev-1", nil).ok(200, &fate)
	if fate.Fate != history.FateDelivered || fate.WaitNumber != 1 || fate.Execution != 1 || fate.InstanceID != "e-1" {
		t.Fatalf("fate %+v", fate)
	}

	// Without an event id the server chooses one; without a payload it is null.
	s.do(key, "POST", "/v1/instances/later/events/go", wire.SendEventRequest{}).ok(202, &rec)
	if rec.EventID == "" {
		t.Fatal("no event id chosen")
	}
	// Signal-with-start.
	s.do(key, "POST", "/v1/instances/w-1/events/go", wire.SendEventRequest{EventID: "ev-w", Payload: json.RawMessage(`7`),
		StartIfAbsent: &wire.StartIfAbsent{Workflow: "echo"}}).ok(202, &rec)
	if !rec.Started {
		t.Fatalf("signal-with-start receipt %+v", rec)
	}
	if in := s.waitStatus(key, "w-1", herald.StatusCompleted); string(in.Output) != "7" {
		t.Fatalf("w-1 output %s", in.Output)
	}

	// Definitions: a cap and a schema.
	s.do(key, "PUT", "/v1/definitions/small", wire.PutDefinitionRequest{MaxPayloadBytes: 10}).ok(200, nil)
	s.do(key, "PUT", "/v1/definitions/typed", wire.PutDefinitionRequest{Schema: json.RawMessage(`{"type":"object","required":["a"]}`)}).ok(200, nil)

	refused := []struct {
		path string
		body any
		st   int
		code string
	}{
		{"/v1/instances/e-1/events/go", wire.SendEventRequest{EventID: "late"}, 409, "instance_not_running"},
		{"/v1/instances/x/events/go", wire.SendEventRequest{EventID: "ev-1"}, 409, "event_id_conflict"},
		{"/v1/instances/e-1/events/other", wire.SendEventRequest{EventID: "ev-1"}, 409, "event_id_conflict"},
		{"/v1/instances/x/events/small", wire.SendEventRequest{EventID: "big", Payload: json.RawMessage(`"0123456789"`)}, 413, "payload_too_large"},
		{"/v1/instances/x/events/typed", wire.SendEventRequest{EventID: "bad", Payload: json.RawMessage(`{"b":1}`)}, 422, "schema_violation"},
		{"/v1/instances/x/events/typed", wire.SendEventRequest{EventID: "bad-start", Payload: json.RawMessage(`{"a":1}`),
			StartIfAbsent: &wire.StartIfAbsent{Workflow: ""}}, 400, "event_invalid"},
		// The attacker's inputs.
		{"/v1/instances/x/events/go", `{"event_id":"nul\u0000id"}`, 400, "event_invalid"},
		{"/v1/instances/x/events/go", "{\"event_id\":\"raw\x00nul\"}", 400, "bad_request"},
		// 10,000 levels with the envelope's: the JSON decoder's limit.
		{"/v1/instances/x/events/go", `{"event_id":"deep","payload":` + deepJSON(9999) + `}`, 400, "event_invalid"},
		{"/v1/instances/x/events/go", `{"event_id":"deeper","payload":` + deepJSON(10000) + `}`, 400, "bad_request"},
		{"/v1/instances/x/events/go", "{\"event_id\":\"utf8\",\"payload\":\"\xff\xfe\"}", 400, "bad_request"},
		{"/v1/instances/x/events/go", wire.SendEventRequest{EventID: strings.Repeat("i", 300)}, 400, "event_invalid"},
		{"/v1/instances/" + strings.Repeat("i", 100<<10) + "/events/go", wire.SendEventRequest{EventID: "huge-id"}, 400, "event_invalid"},
		{"/v1/instances/x/events/%00", wire.SendEventRequest{EventID: "nul-name"}, 400, "event_invalid"},
		{"/v1/instances/x/events/%FF", wire.SendEventRequest{EventID: "utf8-name"}, 400, "event_invalid"},
		{"/v1/instances/x/events/go", `{"event_id":"x","payload":1,"extra":2}`, 400, "bad_request"},
		{"/v1/instances/x/events/go", `{"payload":1}{}`, 400, "bad_request"},
		{"/v1/instances/x/events/go", ``, 400, "bad_request"},
	}
	for _, c := range refused {
		p := s.do(key, "POST", c.path, c.body).problem(c.st, c.code)
		if c.code == "schema_violation" && (len(p.Reasons) == 0 || !strings.Contains(strings.Join(p.Reasons, ";"), "a")) {
			t.Errorf("schema violation without reasons: %+v", p)
		}
	}
	for _, id := range []string{"late", "big", "bad", "bad-start", "deep", "deeper", "utf8", "huge-id", "nul-name", "utf8-name", "x"} {
		s.do(key, "GET", "/v1/events/"+id, nil).problem(404, "not_found")
	}
	s.do(key, "GET", "/v1/instances/x", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/instances/x/events", nil).ok(200, nil)
	var evs wire.Page[*wire.EventRecord]
	s.do(key, "GET", "/v1/instances/x/events", nil).ok(200, &evs)
	if len(evs.Items) != 0 {
		t.Fatalf("refused events stored: %+v", evs.Items)
	}

	// The Go client.
	c := s.apiClient(key)
	r, err := c.RaiseEvent(s.ctx, "later", "go", wire.SendEventRequest{EventID: "c-1"})
	if err != nil || r.EventID != "c-1" {
		t.Fatalf("client raise %+v, %v", r, err)
	}
	if _, err := c.RaiseEvent(s.ctx, "later", "typed", wire.SendEventRequest{Payload: json.RawMessage(`[]`)}); client.Code(err) != "schema_violation" {
		t.Fatalf("client raise refused: %v", err)
	}
}

// TestEvents_EnqueueAndFate: messages into an instance's queues, their
// fates, and the fate of an event published to the bus.
func TestEvents_EnqueueAndFate(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/definitions/settings", wire.PutDefinitionRequest{Buffer: "latest"}).ok(200, nil)
	// Before the instance exists: pending; a latest-value queue keeps the newest.
	s.do(key, "POST", "/v1/instances/mb-1/queues/settings", wire.SendEventRequest{EventID: "s-1", Payload: json.RawMessage(`{"v":1}`)}).ok(202, nil)
	s.do(key, "POST", "/v1/instances/mb-1/queues/orders", wire.SendEventRequest{EventID: "o-1", Payload: json.RawMessage(`"A"`)}).ok(202, nil)
	var fate wire.EventRecord
	s.do(key, "GET", "/v1/events/o-1", nil).ok(200, &fate)
	if fate.Fate != history.FatePending || fate.Lane != history.LaneQueue || fate.Name != "orders" {
		t.Fatalf("fate %+v", fate)
	}
	var rec wire.EventReceipt
	s.do(key, "POST", "/v1/instances/mb-1/queues/orders", wire.SendEventRequest{EventID: "o-2", Payload: json.RawMessage(`"B"`),
		StartIfAbsent: &wire.StartIfAbsent{Workflow: "mailbox", Input: json.RawMessage(`{"per_run":2,"max_runs":1}`)}}).ok(202, &rec)
	if !rec.Started {
		t.Fatalf("receipt %+v", rec)
	}
	in := s.waitStatus(key, "mb-1", herald.StatusCompleted)
	var out struct {
		Orders   []string       `json:"orders"`
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal(in.Output, &out); err != nil || strings.Join(out.Orders, ",") != "A,B" || out.Settings["v"] != 1.0 {
		t.Fatalf("output %s: %v", in.Output, err)
	}
	s.do(key, "GET", "/v1/events/o-2", nil).ok(200, &fate)
	if fate.Fate != history.FateDelivered || fate.WaitNumber != 2 {
		t.Fatalf("fate of o-2 %+v", fate)
	}
	s.do(key, "POST", "/v1/instances/mb-1/queues/orders", wire.SendEventRequest{EventID: "o-3"}).problem(409, "instance_not_running")
	s.do(key, "POST", "/v1/instances/mb-2/queues/settings", wire.SendEventRequest{EventID: "o-1"}).problem(409, "event_id_conflict")
	s.do(key, "POST", "/v1/instances/mb-2/queues/%00", wire.SendEventRequest{}).problem(400, "event_invalid")
	s.do(key, "PUT", "/v1/definitions/tiny", wire.PutDefinitionRequest{MaxPayloadBytes: 2, Schema: json.RawMessage(`{"type":"integer"}`)}).ok(200, nil)
	s.do(key, "POST", "/v1/instances/mb-2/queues/tiny", wire.SendEventRequest{Payload: json.RawMessage(`123`)}).problem(413, "payload_too_large")
	s.do(key, "POST", "/v1/instances/mb-2/queues/tiny", wire.SendEventRequest{Payload: json.RawMessage(`""`)}).problem(422, "schema_violation")

	// Fates: unknown, malformed and another tenant's ids are not found.
	other := s.key("other")
	s.do(other, "GET", "/v1/events/o-1", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/events/nope", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/events/"+strings.Repeat("e", 100<<10), nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/events/%00", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/events/%FF", nil).problem(404, "not_found")

	// A published event's fate is looked up on the bus.
	lib, err := s.rt.Client("acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Publish(s.ctx, "order.paid", map[string]int{"n": 1}, herald.WithEventID("pub-1")); err != nil {
		t.Fatal(err)
	}
	s.do(key, "GET", "/v1/events/pub-1", nil).ok(200, &fate)
	if fate.Lane != "bus" || fate.Bus == nil || fate.Bus.Type != "order.paid" {
		t.Fatalf("bus fate %+v", fate)
	}
	s.do(other, "GET", "/v1/events/pub-1", nil).problem(404, "not_found")

	// The Go client.
	c := s.apiClient(key)
	if r, err := c.Enqueue(s.ctx, "mb-3", "orders", wire.SendEventRequest{EventID: "c-1"}); err != nil || r.EventID != "c-1" {
		t.Fatalf("client enqueue %+v, %v", r, err)
	}
	if f, err := c.EventFate(s.ctx, "c-1"); err != nil || f.Fate != history.FatePending {
		t.Fatalf("client fate %+v, %v", f, err)
	}
	if _, err := c.EventFate(s.ctx, "nope"); client.Code(err) != "not_found" {
		t.Fatalf("client fate of nope: %v", err)
	}
}
