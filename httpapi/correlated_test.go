package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

// TestCorrelated_PutGetDeleteSearch: correlated events through the API,
// with every refusal and paging through the search.
func TestCorrelated_PutGetDeleteSearch(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/definitions/signed", wire.PutDefinitionRequest{
		Schema: json.RawMessage(`{"type":"object","required":["by"]}`), MaxPayloadBytes: 100,
		Correlation: &wire.CorrelationConfig{TTL: heraldtype.Duration(time.Hour)}}).ok(200, nil)
	s.do(key, "PUT", "/v1/definitions/plain", wire.PutDefinitionRequest{}).ok(200, nil)

	var ce wire.CorrelatedEvent
	s.do(key, "PUT", "/v1/correlated/signed/DOC-1", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"ann"}`)}).ok(200, &ce)
	if ce.Def != "signed" || ce.Key != "DOC-1" || string(ce.Payload) != `{"by":"ann"}` || ce.ExpiresAt.Sub(ce.CreatedAt) != time.Hour {
		t.Fatalf("put %+v", ce)
	}
	s.do(key, "GET", "/v1/correlated/signed/DOC-1", nil).ok(200, &ce)
	if string(ce.Payload) != `{"by":"ann"}` {
		t.Fatalf("get %+v", ce)
	}
	// A key with a slash, a space and non-ASCII, path-escaped.
	odd := "a/b c?é"
	s.do(key, "PUT", "/v1/correlated/signed/"+url.PathEscape(odd), wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"bo"}`)}).ok(200, &ce)
	if ce.Key != odd {
		t.Fatalf("odd key %q", ce.Key)
	}
	s.do(key, "GET", "/v1/correlated/signed/"+url.PathEscape(odd), nil).ok(200, &ce)

	for _, c := range []struct {
		path string
		body any
		st   int
		code string
	}{
		{"/v1/correlated/none/K", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"x"}`)}, 400, "event_invalid"},
		{"/v1/correlated/plain/K", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"x"}`)}, 400, "event_invalid"},
		{"/v1/correlated/signed/K", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"who":"x"}`)}, 422, "schema_violation"},
		{"/v1/correlated/signed/K", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"` + strings.Repeat("x", 100) + `"}`)}, 413, "payload_too_large"},
		{"/v1/correlated/signed/%00", wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"x"}`)}, 400, "event_invalid"},
		{"/v1/correlated/signed/" + strings.Repeat("k", 2000), wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"x"}`)}, 400, "event_invalid"},
		{"/v1/correlated/signed/K", `{"payload":` + deepJSON(500) + `}`, 400, "event_invalid"},
		{"/v1/correlated/signed/K", `{"payload":{"by":"x"},"ttl":"1h"}`, 400, "bad_request"},
	} {
		s.do(key, "PUT", c.path, c.body).problem(c.st, c.code)
	}
	s.do(key, "GET", "/v1/correlated/signed/K", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/correlated/signed/%00", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/correlated/signed/"+strings.Repeat("k", 100<<10), nil).problem(404, "not_found")
	other := s.key("other")
	s.do(other, "GET", "/v1/correlated/signed/DOC-1", nil).problem(404, "not_found")
	s.do(other, "DELETE", "/v1/correlated/signed/DOC-1", nil).problem(404, "not_found")

	s.do(key, "DELETE", "/v1/correlated/signed/"+url.PathEscape(odd), nil).ok(204, nil)
	s.do(key, "GET", "/v1/correlated/signed/"+url.PathEscape(odd), nil).problem(404, "not_found")
	s.do(key, "DELETE", "/v1/correlated/signed/"+url.PathEscape(odd), nil).problem(404, "not_found")

	// Search, a page at a time.
	for i := range 4 {
		s.do(key, "PUT", fmt.Sprintf("/v1/correlated/signed/P-%d", i), wire.PutCorrelatedRequest{Payload: json.RawMessage(`{"by":"p"}`)}).ok(200, nil)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.CorrelatedEvent]
		s.do(key, "GET", "/v1/correlated/signed?limit=2&has_correlated_events=false&cursor="+url.QueryEscape(cursor), nil).ok(200, &page)
		pages++
		for _, e := range page.Items {
			if seen[e.Key] {
				t.Fatalf("%s listed twice", e.Key)
			}
			seen[e.Key] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 5 || pages != 3 {
		t.Fatalf("searched %d correlated events in %d pages, want 5 in 3: %v", len(seen), pages, seen)
	}
	var page wire.Page[*wire.CorrelatedEvent]
	s.do(key, "GET", "/v1/correlated/signed?has_correlated_events=true", nil).ok(200, &page)
	if len(page.Items) != 0 {
		t.Fatalf("produced %+v", page.Items)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	s.do(key, "GET", "/v1/correlated/signed?earliest="+future, nil).ok(200, &page)
	if len(page.Items) != 0 || !strings.Contains(string(s.do(key, "GET", "/v1/correlated/signed?earliest="+future, nil).Body), `"items":[]`) {
		t.Fatalf("created after an hour from now: %+v", page.Items)
	}
	s.do(key, "GET", "/v1/correlated/signed?latest="+future, nil).ok(200, &page)
	if len(page.Items) != 5 {
		t.Fatalf("created before an hour from now: %d", len(page.Items))
	}
	s.do(other, "GET", "/v1/correlated/signed", nil).ok(200, &page)
	if len(page.Items) != 0 {
		t.Fatalf("another tenant searches %+v", page.Items)
	}
	for _, q := range []string{"?has_correlated_events=maybe", "?earliest=today", "?latest=1", "?limit=0", "?limit=1001",
		"?cursor=not-a-bookmark", "?cursor=%00"} {
		s.do(key, "GET", "/v1/correlated/signed"+q, nil).problem(400, "invalid_argument")
	}

	// The Go client.
	c := s.apiClient(key)
	if got, err := c.PutCorrelated(s.ctx, "signed", "c/1", json.RawMessage(`{"by":"c"}`)); err != nil || got.Key != "c/1" {
		t.Fatalf("client put %+v, %v", got, err)
	}
	if got, err := c.Correlated(s.ctx, "signed", "c/1"); err != nil || string(got.Payload) != `{"by":"c"}` {
		t.Fatalf("client get %+v, %v", got, err)
	}
	no := false
	if pg, err := c.SearchCorrelated(s.ctx, "signed", client.CorrelatedSearch{HasCorrelatedEvents: &no, Limit: 3}); err != nil ||
		len(pg.Items) != 3 || pg.NextCursor == "" {
		t.Fatalf("client search %+v, %v", pg, err)
	}
	if err := c.DeleteCorrelated(s.ctx, "signed", "c/1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCorrelated(s.ctx, "signed", "c/1"); client.Code(err) != "not_found" {
		t.Fatalf("client delete again: %v", err)
	}
	if _, err := c.PutCorrelated(s.ctx, "signed", "c/2", json.RawMessage(`{}`)); client.Code(err) != "schema_violation" {
		t.Fatalf("client put refused: %v", err)
	}
}
