package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/timeline"
)

// waitStatus waits until instance id (of key's tenant) has status.
func (s *server) waitStatus(key, id string, status herald.Status) *wire.Instance {
	s.t.Helper()
	var in wire.Instance
	s.eventually(id+" "+string(status), func() bool {
		s.do(key, "GET", "/v1/instances/"+id, nil).ok(200, &in)
		return in.Status == status
	})
	return &in
}

// apiClient is the Go client of s with key.
func (s *server) apiClient(key string) *client.Client {
	s.t.Helper()
	c, err := client.New(s.srv.URL, key, client.WithHTTPClient(s.srv.Client()))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// TestInstances_HistoryAndTimeline: an instance that continued as new has
// a history per execution; the timeline route gives what the CLI renders,
// the same text as the library's timeline.
func TestInstances_HistoryAndTimeline(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "meter", ID: "m-1",
		Input: json.RawMessage(`{"per_run":1,"max_runs":2}`)}).ok(201, nil)
	for i := 1; i <= 2; i++ {
		if i == 2 { // an event of another name: buffered, then dropped when the instance ends
			s.do(key, "POST", "/v1/instances/m-1/events/note", wire.SendEventRequest{EventID: "n-1"}).ok(202, nil)
		}
		s.do(key, "POST", "/v1/instances/m-1/events/reading", wire.SendEventRequest{
			Payload: json.RawMessage(fmt.Sprint(i * 10)), EventID: fmt.Sprintf("r-%d", i)}).ok(202, nil)
		s.eventually("reading delivered", func() bool {
			var rec wire.EventRecord
			s.do(key, "GET", fmt.Sprintf("/v1/events/r-%d", i), nil).ok(200, &rec)
			return rec.Fate == history.FateDelivered
		})
	}
	s.waitStatus(key, "m-1", herald.StatusCompleted)

	var h wire.History
	s.do(key, "GET", "/v1/instances/m-1/history", nil).ok(200, &h)
	kinds := map[history.Kind]bool{}
	for _, ev := range h.Events {
		kinds[ev.Kind] = true
	}
	if h.InstanceID != "m-1" || h.Execution != 2 || len(h.Events) == 0 || h.Events[0].Kind != history.ExecutionStarted ||
		!kinds[history.ExecutionCompleted] || !kinds[history.EventDropped] {
		t.Fatalf("current history %+v", h)
	}
	s.do(key, "GET", "/v1/instances/m-1/history?execution=1", nil).ok(200, &h)
	if h.Execution != 1 || h.Events[len(h.Events)-1].Kind != history.ExecutionContinuedAsNew {
		t.Fatalf("history of execution 1 %+v", h)
	}
	var raised *wire.HistoryEvent
	for i := range h.Events {
		if h.Events[i].Kind == history.EventRaised {
			raised = &h.Events[i]
		}
	}
	if raised == nil || raised.EventID != "r-1" || string(raised.Payload) != "10" || raised.Lane != history.LanePositional {
		t.Fatalf("EventRaised %+v", raised)
	}
	// Good JSON for users: snake_case, omitted zero fields, the payload as
	// the JSON it was.
	a := s.do(key, "GET", "/v1/instances/m-1/history?execution=1", nil)
	for _, want := range []string{`"kind":"EventRaised"`, `"event_id":"r-1"`, `"payload":10`, `"wait_number":1`} {
		if !strings.Contains(string(a.Body), want) {
			t.Errorf("history JSON lacks %s: %s", want, a.Body)
		}
	}
	if strings.Contains(string(a.Body), `"fire_at"`) || strings.Contains(string(a.Body), "0001-01-01") {
		t.Errorf("history JSON holds zero times: %s", a.Body)
	}
	s.do(key, "GET", "/v1/instances/m-1/history?execution=3", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/instances/m-1/history?execution=-1", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances/m-1/history?execution=two", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances/nope/history", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/instances/nope/timeline", nil).problem(404, "not_found")
	// Another tenant sees nothing.
	other := s.key("other")
	s.do(other, "GET", "/v1/instances/m-1/history", nil).problem(404, "not_found")
	s.do(other, "GET", "/v1/instances/m-1/timeline", nil).problem(404, "not_found")

	// The timeline: decoded strictly into the renderer's input, it renders
	// exactly as the library's own timeline.
	a = s.do(key, "GET", "/v1/instances/m-1/timeline", nil).ok(200, nil)
	var in timeline.Instance
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("timeline %s: %v", a.Body, err)
	}
	var got, want bytes.Buffer
	if err := timeline.Write(&got, &in); err != nil {
		t.Fatal(err)
	}
	lib, err := s.rt.Client("acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := timeline.Print(s.ctx, &want, lib, "m-1"); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("timeline through the API:\n%s\nthe library's:\n%s", got.String(), want.String())
	}
	if len(in.Executions) != 2 || len(in.Events) != 3 || !strings.Contains(got.String(), "n-1") {
		t.Fatalf("timeline:\n%s", got.String())
	}
	// The Go client.
	c := s.apiClient(key)
	tl, err := c.Timeline(s.ctx, "m-1")
	if err != nil || tl.Status != "completed" || len(tl.Executions) != 2 {
		t.Fatalf("client timeline %+v, %v", tl, err)
	}
	ch, err := c.History(s.ctx, "m-1", 1)
	if err != nil || ch.Execution != 1 {
		t.Fatalf("client history %+v, %v", ch, err)
	}
	if _, err := c.History(s.ctx, "nope", 0); client.Code(err) != "not_found" {
		t.Fatalf("client history of nope: %v", err)
	}
}

// TestInstances_Cancel: a cancel request (with a reason, twice, without a
// body); the workflow (which ignores it) then returns and the instance
// ends canceled; an ended, unknown, other tenant's or malformed request is
// refused and changes nothing.
func TestInstances_Cancel(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	for _, id := range []string{"c-1", "c-2"} {
		s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: id}).ok(201, nil)
	}
	s.waitStatus(key, "c-1", herald.StatusRunning)
	s.do(key, "POST", "/v1/instances/c-1/cancel", `{"reason":"bad\u0000reason"}`).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/instances/c-1/cancel", `{"reason":"x","force":true}`).problem(400, "bad_request")
	s.do(s.key("other"), "POST", "/v1/instances/c-1/cancel", nil).problem(404, "not_found")
	s.do(key, "POST", "/v1/instances/nope/cancel", nil).problem(404, "not_found")
	s.do(key, "POST", "/v1/instances/"+strings.Repeat("x", 100<<10)+"/cancel", nil).problem(404, "not_found")

	var in wire.Instance
	s.do(key, "POST", "/v1/instances/c-1/cancel", wire.CancelRequest{Reason: "by operator"}).ok(200, &in)
	if in.ID != "c-1" || in.Status.Terminal() {
		t.Fatalf("after the cancel request: %+v", in)
	}
	s.do(key, "POST", "/v1/instances/c-1/cancel", nil).ok(200, &in) // twice: nothing changes
	s.do(key, "POST", "/v1/instances/c-1/events/go", wire.SendEventRequest{EventID: "c-1/go"}).ok(202, nil)
	s.waitStatus(key, "c-1", herald.StatusCanceled)
	s.do(key, "GET", "/v1/instances/c-1", nil).ok(200, &in)
	if in.Failure == nil || in.Failure.Kind != "canceled" || in.Failure.Message != "by operator" {
		t.Fatalf("canceled: %+v", in)
	}
	s.do(key, "POST", "/v1/instances/c-1/cancel", nil).problem(409, "instance_not_running")
	var page wire.Page[*wire.Instance]
	s.do(key, "GET", "/v1/instances?status=canceled", nil).ok(200, &page)
	if len(page.Items) != 1 || page.Items[0].ID != "c-1" {
		t.Fatalf("canceled instances: %+v", page.Items)
	}
	// The Go client.
	c := s.apiClient(key)
	if got, err := c.Cancel(s.ctx, "c-2", "done"); err != nil || got.ID != "c-2" {
		t.Fatalf("client cancel: %+v, %v", got, err)
	}
	if _, err := c.Cancel(s.ctx, "c-1", "again"); client.Code(err) != "instance_not_running" {
		t.Fatalf("client cancel of an ended instance: %v", err)
	}
}

// TestInstances_Terminate: terminate with and without a reason; the
// instance's waiting events are dropped; an ended, unknown or malformed
// request is refused and changes nothing.
func TestInstances_Terminate(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	for _, id := range []string{"e-1", "e-2", "e-3"} {
		s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: id}).ok(201, nil)
	}
	s.waitStatus(key, "e-1", herald.StatusRunning)
	s.do(key, "POST", "/v1/instances/e-1/events/other", wire.SendEventRequest{EventID: "e-1/other"}).ok(202, nil)
	s.do(key, "POST", "/v1/instances/e-1/queues/inbox", wire.SendEventRequest{EventID: "e-1/q"}).ok(202, nil)

	s.do(key, "POST", "/v1/instances/e-1/terminate", `{"reason":"bad\u0000reason"}`).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/instances/e-1/terminate", `{"reason":"x","force":true}`).problem(400, "bad_request")
	s.waitStatus(key, "e-1", herald.StatusRunning)

	var in wire.Instance
	s.do(key, "POST", "/v1/instances/e-1/terminate", wire.TerminateRequest{Reason: "by operator"}).ok(200, &in)
	if in.Status != herald.StatusTerminated || in.Failure == nil || !strings.Contains(in.Failure.Message, "by operator") {
		t.Fatalf("terminated %+v", in)
	}
	s.do(key, "POST", "/v1/instances/e-1/terminate", wire.TerminateRequest{}).problem(409, "instance_not_running")
	s.do(key, "POST", "/v1/instances/nope/terminate", wire.TerminateRequest{}).problem(404, "not_found")
	s.do(key, "POST", "/v1/instances/"+strings.Repeat("x", 100<<10)+"/terminate", nil).problem(404, "not_found")
	s.do(s.key("other"), "POST", "/v1/instances/e-2/terminate", nil).problem(404, "not_found")
	s.waitStatus(key, "e-2", herald.StatusRunning)
	// No body at all.
	s.do(key, "POST", "/v1/instances/e-2/terminate", nil).ok(200, &in)
	if in.Status != herald.StatusTerminated {
		t.Fatalf("terminated without a body: %+v", in)
	}
	// The Go client.
	c := s.apiClient(key)
	if got, err := c.Terminate(s.ctx, "e-3", "done"); err != nil || got.Status != herald.StatusTerminated {
		t.Fatalf("client terminate: %+v, %v", got, err)
	}
	if _, err := c.Terminate(s.ctx, "e-3", "again"); client.Code(err) != "instance_not_running" {
		t.Fatalf("client terminate again: %v", err)
	}

	// The events e-1 had waiting were dropped with the instance.
	var evs wire.Page[*wire.EventRecord]
	s.do(key, "GET", "/v1/instances/e-1/events", nil).ok(200, &evs)
	if len(evs.Items) != 2 {
		t.Fatalf("events %+v", evs.Items)
	}
	for _, r := range evs.Items {
		if r.Fate != history.FateDropped || r.Reason != history.DropInstanceTerminal {
			t.Fatalf("event %+v, want dropped instance_terminal", r)
		}
	}
}

// TestInstances_Events: an instance's events with their fates, filtered
// by lane, name, fate and limit.
func TestInstances_Events(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	// Sent before the instance exists: pending.
	s.do(key, "POST", "/v1/instances/x-1/events/go", wire.SendEventRequest{EventID: "go-1", Payload: json.RawMessage(`"hi"`)}).ok(202, nil)
	s.do(key, "POST", "/v1/instances/x-1/queues/q", wire.SendEventRequest{EventID: "q-1"}).ok(202, nil)
	s.do(key, "POST", "/v1/instances/x-1/queues/q", wire.SendEventRequest{EventID: "q-2"}).ok(202, nil)
	var evs wire.Page[*wire.EventRecord]
	s.do(key, "GET", "/v1/instances/x-1/events", nil).ok(200, &evs)
	if len(evs.Items) != 3 || evs.Items[0].EventID != "go-1" || evs.Items[0].Fate != history.FatePending || evs.NextCursor != "" {
		t.Fatalf("events %+v", evs)
	}
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "x-1"}).ok(201, nil)
	s.waitStatus(key, "x-1", herald.StatusCompleted)

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"go-1", "q-1", "q-2"}},
		{"?lane=queue", []string{"q-1", "q-2"}},
		{"?lane=positional&name=go", []string{"go-1"}},
		{"?fate=delivered", []string{"go-1"}},
		{"?fate=dropped&lane=queue", []string{"q-1", "q-2"}},
		{"?limit=1", []string{"go-1"}},
		{"?name=nothing", nil},
		{"?name=%00", nil},
	} {
		s.do(key, "GET", "/v1/instances/x-1/events"+c.query, nil).ok(200, &evs)
		var got []string
		for _, r := range evs.Items {
			got = append(got, r.EventID)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("events%s: %v, want %v", c.query, got, c.want)
		}
	}
	s.do(key, "GET", "/v1/instances/x-1/events?lane=bus", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances/x-1/events?fate=lost", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances/x-1/events?limit=0", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances/x-1/events?limit=1001", nil).problem(400, "invalid_argument")
	// An unknown instance, or another tenant's, has no events.
	s.do(key, "GET", "/v1/instances/nope/events", nil).ok(200, &evs)
	if len(evs.Items) != 0 || !strings.Contains(string(s.do(key, "GET", "/v1/instances/nope/events", nil).Body), `"items":[]`) {
		t.Fatalf("events of nope %+v", evs)
	}
	s.do(s.key("other"), "GET", "/v1/instances/x-1/events", nil).ok(200, &evs)
	if len(evs.Items) != 0 {
		t.Fatalf("another tenant sees %+v", evs.Items)
	}
	// The Go client.
	recs, err := s.apiClient(key).Events(s.ctx, "x-1", client.EventFilter{Lane: "queue", Limit: 1})
	if err != nil || len(recs) != 1 || recs[0].EventID != "q-1" {
		t.Fatalf("client events %+v, %v", recs, err)
	}
}
