package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

// TestDefinitions_PutGetListDelete: event definitions through the API,
// durations as strings, every refusal, and paging through the list.
func TestDefinitions_PutGetListDelete(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	req := wire.PutDefinitionRequest{Schema: json.RawMessage(`{"type":"object"}`), Buffer: "latest",
		Retention: heraldtype.Duration(90 * time.Minute), MaxPayloadBytes: 4096,
		Correlation: &wire.CorrelationConfig{TTL: heraldtype.Duration(10 * time.Minute), DeleteAfterFirstCorrelation: true}}
	var d wire.EventDefinition
	a := s.do(key, "PUT", "/v1/definitions/order", req).ok(200, &d)
	if d.Name != "order" || d.Buffer != "latest" || time.Duration(d.Retention) != 90*time.Minute || d.CreatedAt.IsZero() ||
		d.Correlation == nil || !d.Correlation.DeleteAfterFirstCorrelation {
		t.Fatalf("put %+v", d)
	}
	for _, want := range []string{`"retention":"1h30m0s"`, `"ttl":"10m0s"`, `"max_payload_bytes":4096`} {
		if !strings.Contains(string(a.Body), want) {
			t.Errorf("definition JSON lacks %s: %s", want, a.Body)
		}
	}
	// The wire form is the engine's JSON.
	lib, err := s.rt.Client("acme")
	if err != nil {
		t.Fatal(err)
	}
	ld, err := lib.GetEventDefinition(s.ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	var fromAPI, fromLib map[string]any
	a = s.do(key, "GET", "/v1/definitions/order", nil).ok(200, &fromAPI)
	libJSON, _ := json.Marshal(ld)
	if err := json.Unmarshal(libJSON, &fromLib); err != nil || !reflect.DeepEqual(fromAPI, fromLib) {
		t.Fatalf("definition through the API %s, the engine's %s", a.Body, libJSON)
	}
	// Replacing keeps created_at; a bare body takes the defaults.
	var d2 wire.EventDefinition
	s.do(key, "PUT", "/v1/definitions/order", `{}`).ok(200, &d2)
	if !d2.CreatedAt.Equal(d.CreatedAt) || d2.Buffer != "fifo" || d2.Correlation != nil || d2.Retention != 0 {
		t.Fatalf("replaced %+v", d2)
	}
	s.do(key, "PUT", "/v1/definitions/retained", `{"retention":"36h"}`).ok(200, &d2)
	if time.Duration(d2.Retention) != 36*time.Hour {
		t.Fatalf("retention %v", d2.Retention)
	}

	for _, c := range []struct {
		path string
		body any
		st   int
		code string
	}{
		{"/v1/definitions/x", `{"buffer":"lifo"}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"schema":{"type":5}}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"schema":{"$ref":"https://example.com/s.json"}}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"retention":"-1h"}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"max_payload_bytes":-1}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"correlation":{"ttl":"-1s"}}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"schema":` + deepJSON(100) + `}`, 400, "definition_invalid"},
		{"/v1/definitions/%00", `{}`, 400, "definition_invalid"},
		{"/v1/definitions/%FF", `{}`, 400, "definition_invalid"},
		{"/v1/definitions/" + strings.Repeat("n", 300), `{}`, 400, "definition_invalid"},
		{"/v1/definitions/x", `{"retention":"soon"}`, 400, "bad_request"},
		{"/v1/definitions/x", `{"name":"y"}`, 400, "bad_request"},
		{"/v1/definitions/x", `{"schema":` + deepJSON(10000) + `}`, 400, "bad_request"},
		{"/v1/definitions/x", ``, 400, "bad_request"},
	} {
		s.do(key, "PUT", c.path, c.body).problem(c.st, c.code)
	}
	s.do(key, "PUT", "/v1/definitions/x", `{}`, "Content-Type", "text/yaml").problem(415, "unsupported_media_type")
	for _, p := range []string{"x", "%00", "%FF", strings.Repeat("n", 100<<10)} {
		s.do(key, "GET", "/v1/definitions/"+p, nil).problem(404, "not_found")
	}
	other := s.key("other")
	s.do(other, "GET", "/v1/definitions/order", nil).problem(404, "not_found")
	s.do(other, "DELETE", "/v1/definitions/order", nil).problem(404, "not_found")

	// Paging by name.
	for i := range 5 {
		s.do(key, "PUT", fmt.Sprintf("/v1/definitions/p-%d", i), `{}`).ok(200, nil)
	}
	var names []string
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.EventDefinition]
		s.do(key, "GET", "/v1/definitions?limit=3&cursor="+url.QueryEscape(cursor), nil).ok(200, &page)
		pages++
		for _, d := range page.Items {
			names = append(names, d.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if want := "order p-0 p-1 p-2 p-3 p-4 retained"; strings.Join(names, " ") != want || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %s in 3", names, pages, want)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?cursor=%25%25%25", "?cursor=%00", "?cursor=" + url.QueryEscape("!!")} {
		s.do(key, "GET", "/v1/definitions"+q, nil).problem(400, "invalid_argument")
	}
	var page wire.Page[*wire.EventDefinition]
	s.do(other, "GET", "/v1/definitions", nil).ok(200, &page)
	if len(page.Items) != 0 || page.NextCursor != "" {
		t.Fatalf("another tenant lists %+v", page)
	}

	s.do(key, "DELETE", "/v1/definitions/order", nil).ok(204, nil)
	s.do(key, "GET", "/v1/definitions/order", nil).problem(404, "not_found")
	s.do(key, "DELETE", "/v1/definitions/order", nil).problem(404, "not_found")
	s.do(key, "DELETE", "/v1/definitions/%00", nil).problem(404, "not_found")

	// The Go client.
	c := s.apiClient(key)
	if got, err := c.PutDefinition(s.ctx, "a b/c", wire.PutDefinitionRequest{Buffer: "latest"}); err != nil || got.Name != "a b/c" {
		t.Fatalf("client put %+v, %v", got, err)
	}
	if got, err := c.Definition(s.ctx, "a b/c"); err != nil || got.Buffer != "latest" {
		t.Fatalf("client get %+v, %v", got, err)
	}
	if pg, err := c.Definitions(s.ctx, 2, ""); err != nil || len(pg.Items) != 2 || pg.NextCursor == "" {
		t.Fatalf("client list %+v, %v", pg, err)
	}
	if err := c.DeleteDefinition(s.ctx, "a b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Definition(s.ctx, "a b/c"); client.Code(err) != "not_found" {
		t.Fatalf("client get deleted: %v", err)
	}
	if _, err := c.PutDefinition(s.ctx, "bad", wire.PutDefinitionRequest{Buffer: "stack"}); client.Code(err) != "definition_invalid" {
		t.Fatalf("client put refused: %v", err)
	}
}

// TestDefinitions_UnusableStoredSchema: an event whose stored definition's
// schema the server cannot use is refused with definition_invalid (400),
// and nothing is stored.
func TestDefinitions_UnusableStoredSchema(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	// Put through a client with a larger schema cap than the server's.
	big, err := herald.NewClient(s.store, "acme", &herald.ClientConfig{MaxSchemaBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"description":"` + strings.Repeat("x", 300<<10) + `"}`
	if _, err := big.PutEventDefinition(s.ctx, herald.EventDefinition{Name: "huge", Schema: json.RawMessage(schema),
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	s.do(key, "POST", "/v1/instances/i/events/huge", wire.SendEventRequest{EventID: "h-1"}).problem(400, "definition_invalid")
	s.do(key, "POST", "/v1/instances/i/queues/huge", wire.SendEventRequest{EventID: "h-2"}).problem(400, "definition_invalid")
	s.do(key, "PUT", "/v1/correlated/huge/k", wire.PutCorrelatedRequest{}).problem(400, "definition_invalid")
	s.do(key, "GET", "/v1/events/h-1", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/correlated/huge/k", nil).problem(404, "not_found")
}

// TestProblems_EventKinds: the problem table answers each kind of refused
// event with its own status: the ONE place errors become statuses.
func TestProblems_EventKinds(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	for _, c := range []struct {
		kind herald.EventInvalidKind
		st   int
		code string
	}{
		{herald.EventMalformed, 400, "event_invalid"},
		{herald.EventTooLarge, 413, "payload_too_large"},
		{herald.EventSchemaViolation, 422, "schema_violation"},
	} {
		if c.kind.String() == "" {
			t.Fatalf("kind %d has no name", c.kind)
		}
		var body string
		switch c.kind {
		case herald.EventMalformed:
			body = `{"payload":` + deepJSON(200) + `}`
		case herald.EventTooLarge:
			body = `{"payload":"` + strings.Repeat("x", herald.DefaultMaxPayloadBytes) + `"}`
		case herald.EventSchemaViolation:
			s.do(key, "PUT", "/v1/definitions/k", `{"schema":{"type":"string"}}`).ok(200, nil)
			body = `{"payload":1}`
		}
		s.do(key, "POST", "/v1/instances/i/events/k", body).problem(c.st, c.code)
	}
}
