package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

// The event bus's routes: publishing, published events, subscriptions,
// attempt records (scripts: busscripts_test.go; dead letters:
// busdlq_test.go).

// published polls GET /v1/published/{id} until cond holds (or the test's
// deadline passes).
func (s *server) published(key, id string, cond func(*wire.PublishedEvent) bool) *wire.PublishedEvent {
	s.t.Helper()
	var ev wire.PublishedEvent
	s.eventually("published event "+id, func() bool {
		a := s.do(key, "GET", "/v1/published/"+url.PathEscape(id), nil)
		if a.Status == 404 {
			return false
		}
		ev = wire.PublishedEvent{}
		a.ok(200, &ev)
		return cond(&ev)
	})
	return &ev
}

// execution returns the execution of sub in ev (nil if none).
func execution(ev *wire.PublishedEvent, sub string) *herald.Execution {
	for _, r := range ev.Routes {
		if r.Subscription == sub {
			return r.Execution
		}
	}
	return nil
}

// executionIs waits until sub's execution of event id has status.
func (s *server) executionIs(key, id, sub string, status herald.ExecutionStatus) *herald.Execution {
	s.t.Helper()
	ev := s.published(key, id, func(ev *wire.PublishedEvent) bool {
		x := execution(ev, sub)
		return x != nil && x.Status == status
	})
	return execution(ev, sub)
}

func TestBus_Publish(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	var rec wire.PublishReceipt
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "order.paid", Data: json.RawMessage(`{"n":1}`), EventID: "e1"}).ok(202, &rec)
	if rec.EventID != "e1" || rec.Duplicate || rec.PublishedAt.IsZero() {
		t.Fatalf("receipt %+v", rec)
	}
	var dup wire.PublishReceipt
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "order.paid", EventID: "e1"}).ok(202, &dup)
	if !dup.Duplicate || !dup.PublishedAt.Equal(rec.PublishedAt) {
		t.Fatalf("duplicate receipt %+v", dup)
	}
	var gen wire.PublishReceipt
	s.do(key, "POST", "/v1/publish", `{"type":"order.created"}`).ok(202, &gen)
	if gen.EventID == "" || gen.EventID == "e1" {
		t.Fatalf("generated id %+v", gen)
	}

	// No subscription: the event is routed to no_match, and says so.
	ev := s.published(key, "e1", func(ev *wire.PublishedEvent) bool { return ev.Fate == herald.BusNoMatch })
	if ev.Type != "order.paid" || string(ev.Data) != `{"n":1}` || ev.Source != "client" {
		t.Fatalf("published event %+v", ev)
	}

	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "order.refunded", EventID: "e1"}).problem(409, "event_id_conflict")
	for _, typ := range []string{"", "order.*", "a..b", "a\x00b", strings.Repeat("t", 300)} {
		p := s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: typ}).problem(400, "event_invalid")
		if len(p.Reasons) == 0 {
			t.Errorf("type %q: no reasons: %+v", typ, p)
		}
	}
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "a.b", EventID: strings.Repeat("i", 10_000)}).problem(400, "event_invalid")
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "a.b",
		Data: json.RawMessage(strings.Repeat("[", 200) + strings.Repeat("]", 200))}).problem(400, "event_invalid")
	s.do(key, "POST", "/v1/publish", `{"type":"a.b","data":}`).problem(400, "bad_request")
	s.do(key, "POST", "/v1/publish", `{"type":"a.b","extra":1}`).problem(400, "bad_request")

	s.do(key, "GET", "/v1/published/nope", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/published/"+strings.Repeat("x", 5000), nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/published/a%00b", nil).problem(404, "not_found")
	// Another tenant's event is not found either.
	s.do(s.key("other"), "GET", "/v1/published/e1", nil).problem(404, "not_found")
}

// TestBus_BackPressure: past the backlog cap, publishing answers 429
// back_pressure and stores nothing.
func TestBus_BackPressure(t *testing.T) {
	s := newServer(t, func(c *herald.Config, _ *httpapi.Options) {
		c.Bus.Disabled = true // nothing drains the backlog
		c.BusMaxBacklog = 2
	})
	key := s.key("acme")
	for i := range 2 {
		s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "a.b", EventID: fmt.Sprint("bp", i)}).ok(202, nil)
	}
	p := s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "a.b", EventID: "bp2"}).problem(429, "back_pressure")
	if !strings.Contains(p.Detail, "backlog") {
		t.Fatalf("detail %q", p.Detail)
	}
	s.do(key, "GET", "/v1/published/bp2", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/published/bp1", nil).ok(200, nil)
}

func workflowTarget() wire.Target { return wire.Target{Kind: herald.TargetWorkflow, Workflow: "echo"} }

func TestBus_Subscriptions(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	var sub wire.Subscription
	s.do(key, "PUT", "/v1/subscriptions/orders", wire.PutSubscriptionRequest{Pattern: "order.>", Target: workflowTarget(),
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.amount","op":"gt","value":10}]}`), Timeout: herald.Duration(5e9)}).ok(200, &sub)
	if sub.ID != "orders" || !sub.Enabled || sub.Version != 1 || sub.Pattern != "order.>" || sub.Timeout != herald.Duration(5e9) {
		t.Fatalf("put: %+v", sub)
	}
	no := false
	sub = wire.Subscription{}
	s.do(key, "PUT", "/v1/subscriptions/orders", wire.PutSubscriptionRequest{Pattern: "order.*", Target: workflowTarget(),
		Enabled: &no, MaxRetries: new(int)}).ok(200, &sub)
	if sub.Version != 2 || sub.Enabled || sub.Pattern != "order.*" || sub.MaxRetries == nil || *sub.MaxRetries != 0 || len(sub.Filter) != 0 {
		t.Fatalf("replace: %+v", sub)
	}
	sub = wire.Subscription{}
	s.do(key, "POST", "/v1/subscriptions/orders/enable", nil).ok(200, &sub)
	if !sub.Enabled {
		t.Fatalf("enable: %+v", sub)
	}
	var got wire.Subscription
	s.do(key, "GET", "/v1/subscriptions/orders", nil).ok(200, &got)
	if !got.Enabled || got.Version != sub.Version {
		t.Fatalf("get: %+v", got)
	}
	sub = wire.Subscription{}
	s.do(key, "POST", "/v1/subscriptions/orders/disable", nil).ok(200, &sub)
	if sub.Enabled {
		t.Fatalf("disable: %+v", sub)
	}

	// Paging through more than one page, ordered by id.
	for _, id := range []string{"e", "a", "d", "b"} {
		s.do(key, "PUT", "/v1/subscriptions/"+id, wire.PutSubscriptionRequest{Pattern: "x." + id, Target: workflowTarget()}).ok(200, nil)
	}
	var ids []string
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.Subscription]
		s.do(key, "GET", "/v1/subscriptions?limit=2&cursor="+url.QueryEscape(cursor), nil).ok(200, &page)
		pages++
		for _, x := range page.Items {
			ids = append(ids, x.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if strings.Join(ids, ",") != "a,b,d,e,orders" || pages != 3 {
		t.Fatalf("paged ids %v in %d pages", ids, pages)
	}
	s.do(key, "GET", "/v1/subscriptions?limit=0", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/subscriptions?limit=x", nil).problem(400, "invalid_argument")

	// Refusals list every reason and store nothing.
	p := s.do(key, "PUT", "/v1/subscriptions/bad", wire.PutSubscriptionRequest{Pattern: "us*er",
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.x","op":"regex","value":"."}]}`), MaxRetries: ptr(99),
		Target: wire.Target{Kind: "email"}}).problem(400, "invalid_argument")
	if len(p.Reasons) < 4 {
		t.Fatalf("reasons %q", p.Reasons)
	}
	for _, want := range []string{"pattern", "filter $", "max_retries", "target.kind"} {
		if !strings.Contains(strings.Join(p.Reasons, "\n"), want) {
			t.Errorf("no reason about %s in %q", want, p.Reasons)
		}
	}
	s.do(key, "PUT", "/v1/subscriptions/bad", wire.PutSubscriptionRequest{Pattern: "a.b",
		Target: wire.Target{Kind: herald.TargetScript, Script: "missing"}}).problem(400, "invalid_argument")
	s.do(key, "PUT", "/v1/subscriptions/bad", `{"pattern":"a.b","target":{"kind":"workflow","workflow":"echo"},"timeout":"forever"}`).problem(400, "bad_request")
	s.do(key, "PUT", "/v1/subscriptions/bad", `{"pattern":"a.b","target":{"kind":"workflow","workflow":"echo"},"timeout":"1h"}`).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/subscriptions/bad", nil).problem(404, "not_found")

	s.do(key, "DELETE", "/v1/subscriptions/orders", nil).ok(204, nil)
	s.do(key, "GET", "/v1/subscriptions/orders", nil).problem(404, "not_found")
	s.do(key, "DELETE", "/v1/subscriptions/orders", nil).problem(404, "not_found")
	s.do(key, "POST", "/v1/subscriptions/orders/enable", nil).problem(404, "not_found")
	s.do(key, "POST", "/v1/subscriptions/orders/disable", nil).problem(404, "not_found")
	// Another tenant sees none of them.
	other := s.key("other")
	s.do(other, "GET", "/v1/subscriptions/a", nil).problem(404, "not_found")
	var empty wire.Page[*wire.Subscription]
	s.do(other, "GET", "/v1/subscriptions", nil).ok(200, &empty)
	if len(empty.Items) != 0 || empty.Items == nil {
		t.Fatalf("other tenant's list %+v", empty)
	}
}

func ptr[T any](v T) *T { return &v }

// TestBus_Executions: attempt records by event, subscription or
// execution, paged.
func TestBus_Executions(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/scripts/double", wire.PutScriptRequest{Source: `log("n", ctx.event.data.n); return ctx.event.data.n * 2`}).ok(200, nil)
	s.do(key, "PUT", "/v1/subscriptions/calc", wire.PutSubscriptionRequest{Pattern: "calc.run",
		Target: wire.Target{Kind: herald.TargetScript, Script: "double"}}).ok(200, nil)
	for i := range 3 {
		s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "calc.run", EventID: fmt.Sprint("c", i),
			Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}).ok(202, nil)
	}
	var execID int64
	for i := range 3 {
		x := s.executionIs(key, fmt.Sprint("c", i), "calc", herald.ExecSucceeded)
		if string(x.Result) != fmt.Sprint((i+1)*2) {
			t.Fatalf("c%d result %s", i, x.Result)
		}
		execID = x.ID
	}

	var page wire.Page[*wire.Attempt]
	s.do(key, "GET", "/v1/executions?event_id=c1", nil).ok(200, &page)
	if len(page.Items) != 1 || !page.Items[0].Succeeded || string(page.Items[0].Result) != "4" ||
		len(page.Items[0].Logs) != 1 || page.Items[0].Logs[0] != "n 2" || page.Items[0].Number != 1 {
		t.Fatalf("attempts of c1: %+v", page.Items)
	}
	s.do(key, "GET", fmt.Sprint("/v1/executions?execution=", execID), nil).ok(200, &page)
	if len(page.Items) != 1 || page.Items[0].Execution != execID {
		t.Fatalf("attempts of execution %d: %+v", execID, page.Items)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var p wire.Page[*wire.Attempt]
		s.do(key, "GET", "/v1/executions?subscription=calc&limit=2&cursor="+cursor, nil).ok(200, &p)
		pages++
		for _, a := range p.Items {
			seen[a.EventID] = true
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(seen) != 3 || pages != 2 {
		t.Fatalf("paged attempts of calc: %v in %d pages", seen, pages)
	}

	s.do(key, "GET", "/v1/executions", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/executions?execution=x", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/executions?execution=-1", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/executions?subscription=calc&cursor=abc", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/executions?subscription=calc&limit=5000", nil).problem(400, "invalid_argument")
	var none wire.Page[*wire.Attempt]
	s.do(key, "GET", "/v1/executions?event_id="+strings.Repeat("z", 4000), nil).ok(200, &none)
	if len(none.Items) != 0 {
		t.Fatalf("attempts of an impossible id: %+v", none)
	}
	s.do(s.key("other"), "GET", "/v1/executions?event_id=c1", nil).ok(200, &none)
	if len(none.Items) != 0 {
		t.Fatalf("another tenant's attempts: %+v", none)
	}
}

// TestBus_Hostile: NUL bytes, invalid UTF-8, huge ids and deep JSON get
// typed answers on every bus route, and the server stays up.
func TestBus_Hostile(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	huge := strings.Repeat("h", 64<<10)
	for _, id := range []string{"a%00b", "%FF%FE", huge, "%E2%82"} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/published/"}, {"GET", "/v1/subscriptions/"}, {"DELETE", "/v1/subscriptions/"},
			{"GET", "/v1/scripts/"}, {"DELETE", "/v1/scripts/"},
		} {
			s.do(key, r.method, r.path+id, nil).problem(404, "not_found")
		}
		s.do(key, "POST", "/v1/subscriptions/"+id+"/enable", nil).problem(404, "not_found")
		s.do(key, "GET", "/v1/dead-letters/"+id, nil).problem(400, "invalid_argument")
		s.do(key, "PUT", "/v1/subscriptions/"+id, wire.PutSubscriptionRequest{Pattern: "a.b", Target: workflowTarget()}).problem(400, "invalid_argument")
		s.do(key, "PUT", "/v1/scripts/"+id, wire.PutScriptRequest{Source: "return 1"}).problem(400, "invalid_argument")
		s.do(key, "GET", "/v1/executions?event_id="+id+"&subscription="+id, nil).ok(200, nil)
		s.do(key, "GET", "/v1/dead-letters?subscription="+id, nil).problem(400, "invalid_argument")
	}
	// Invalid UTF-8 (refused as a body, never turned into U+FFFD) and NUL
	// inside JSON strings.
	s.do(key, "POST", "/v1/publish", "{\"type\":\"a.\xff\"}").problem(400, "bad_request")
	s.do(key, "POST", "/v1/publish", `{"type":"a.b","event_id":"x\u0000y"}`).problem(400, "event_invalid")
	s.do(key, "POST", "/v1/publish", `{"type":"a.b","data":"\u0000"}`).ok(202, nil) // JSON text, not a NUL byte
	s.do(key, "PUT", "/v1/scripts/x", "{\"source\":\"return '\xff'\"}").problem(400, "bad_request")
	s.do(key, "PUT", "/v1/scripts/x", `{"source":"return 1\u0000"}`).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/validate", "{\"source\":\"\xff\"}").problem(400, "bad_request")
	s.do(key, "POST", "/v1/dead-letters/reprocess", `{"subscription":"a\u0000"}`).problem(400, "invalid_argument")
	// Deep JSON: past the decoder's nesting limit, and within it but past
	// the engine's.
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	s.do(key, "POST", "/v1/publish", `{"type":"a.b","data":`+deep+`}`).problem(400, "bad_request")
	s.do(key, "PUT", "/v1/subscriptions/d", `{"pattern":"a.b","target":{"kind":"workflow","workflow":"echo"},"filter":`+deep+`}`).problem(400, "bad_request")
	nested := `{"logic":"AND","conditions":[` + strings.Repeat(`{"logic":"AND","conditions":[`, 40) +
		`{"field":"data.x","op":"exists"}` + strings.Repeat(`]}`, 40) + `]}`
	s.do(key, "PUT", "/v1/subscriptions/d", `{"pattern":"a.b","target":{"kind":"workflow","workflow":"echo"},"filter":`+nested+`}`).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/subscriptions/d", nil).problem(404, "not_found")
	s.do("", "GET", "/healthz", nil).ok(200, nil)
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "still.up"}).ok(202, nil)
}
