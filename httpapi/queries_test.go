package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/httpapi/wire"
)

type tallyInput struct {
	Team  string `json:"team"`
	Level int    `json:"level"`
}

var tallySince = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// tally sets attributes from its input, counts "add" events until "stop"
// and answers queries.
func tally(ctx *herald.Context, in tallyInput) (int, error) {
	total := 0
	if err := herald.SetQuery(ctx, "total", func(struct{}) (int, error) { return total, nil }); err != nil {
		return 0, err
	}
	if err := herald.SetQuery(ctx, "plus", func(n int) (int, error) { return total + n, nil }); err != nil {
		return 0, err
	}
	if err := ctx.SetQueryHandler("fail", func(json.RawMessage) (any, error) {
		return nil, errors.New("not today")
	}); err != nil {
		return 0, err
	}
	if err := ctx.SetAttributes(map[string]any{"team": in.Team, "level": in.Level, "on": true, "since": tallySince}); err != nil {
		return 0, err
	}
	for {
		var n int
		if err := ctx.WaitEvent("add").Get(&n); err != nil {
			return 0, err
		}
		if n < 0 {
			return total, nil
		}
		total += n
	}
}

func TestQueries_HTTP(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "tally", ID: "t-1",
		Input: json.RawMessage(`{"team":"red","level":3}`)}).ok(201, nil)
	s.do(key, "POST", "/v1/instances/t-1/events/add", wire.SendEventRequest{Payload: json.RawMessage(`5`), EventID: "a-1"}).ok(202, nil)
	s.eventually("add delivered", func() bool {
		var rec wire.EventRecord
		s.do(key, "GET", "/v1/events/a-1", nil).ok(200, &rec)
		return rec.Fate == history.FateDelivered
	})
	var h1, h2 wire.History
	s.do(key, "GET", "/v1/instances/t-1/history", nil).ok(200, &h1)

	var got wire.QueryResponse
	s.do(key, "POST", "/v1/instances/t-1/queries/total", nil).ok(200, &got)
	if string(got.Result) != "5" {
		t.Fatalf("total: %s", got.Result)
	}
	s.do(key, "POST", "/v1/instances/t-1/queries/plus", "10").ok(200, &got)
	if string(got.Result) != "15" {
		t.Fatalf("plus 10: %s", got.Result)
	}
	p := s.do(key, "POST", "/v1/instances/t-1/queries/nope", nil).problem(404, "query_not_found")
	if len(p.Reasons) != 1 || !strings.Contains(p.Reasons[0], "fail, plus, total") {
		t.Fatalf("unknown query: %+v", p)
	}
	s.do(key, "POST", "/v1/instances/t-1/queries/plus", `"x"`).problem(400, "query_args_invalid")
	if p := s.do(key, "POST", "/v1/instances/t-1/queries/fail", nil).problem(422, "query_failed"); !strings.Contains(p.Detail, "not today") {
		t.Fatalf("handler error: %+v", p)
	}
	s.do(key, "POST", "/v1/instances/nope/queries/total", nil).problem(404, "not_found")
	s.do(key, "POST", "/v1/instances/t-1/queries/total", "{").problem(400, "bad_request")
	// Another tenant does not see the instance.
	s.do(s.key("globex"), "POST", "/v1/instances/t-1/queries/total", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/instances/t-1/history", nil).ok(200, &h2)
	if j1, j2 := mustJSON(t, h1), mustJSON(t, h2); j1 != j2 {
		t.Fatalf("queries changed the history:\n%s\n%s", j1, j2)
	}

	// Attributes in the instance and as filters.
	var in wire.Instance
	s.do(key, "GET", "/v1/instances/t-1", nil).ok(200, &in)
	if in.Attributes["team"] != "red" || in.Attributes["level"] != float64(3) || in.Attributes["on"] != true ||
		in.Attributes["since"] != tallySince.Format(time.RFC3339Nano) {
		t.Fatalf("attributes %#v", in.Attributes)
	}
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "tally", ID: "t-2",
		Input: json.RawMessage(`{"team":"3","level":4}`)}).ok(201, nil)
	s.eventually("t-2 has attributes", func() bool {
		in = wire.Instance{}
		s.do(key, "GET", "/v1/instances/t-2", nil).ok(200, &in)
		return in.Attributes != nil
	})
	for _, c := range []struct {
		q    string
		want string
	}{
		{"attr.team=red", "t-1"},
		{"attr.team=red&attr.level=3", "t-1"},
		{"attr.team=red&attr.level=4", ""},
		{"attr.team=" + url.QueryEscape(`"3"`), "t-2"},
		{"attr.team=3", ""}, // an int, and team is a string
		{"attr.level=4&attr.on=true", "t-2"},
		{"attr.since=" + url.QueryEscape(tallySince.Format(time.RFC3339)), "t-2,t-1"},
		{"attr.since=" + url.QueryEscape(`"`+tallySince.Format(time.RFC3339)+`"`), ""},
	} {
		var page wire.Page[*wire.Instance]
		s.do(key, "GET", "/v1/instances?"+c.q, nil).ok(200, &page)
		var ids []string
		for _, in := range page.Items {
			ids = append(ids, in.ID)
		}
		if strings.Join(ids, ",") != c.want {
			t.Fatalf("%s: %v, want %s", c.q, ids, c.want)
		}
	}
	s.do(key, "GET", "/v1/instances?attr.bad%20key=1", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances?attr.team=a&attr.team=b", nil).problem(400, "invalid_argument")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
