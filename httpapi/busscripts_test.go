package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

func TestBus_Scripts(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	var v1, v2, got wire.Script
	s.do(key, "PUT", "/v1/scripts/greet", wire.PutScriptRequest{Source: `return "v1"`}).ok(200, &v1)
	s.do(key, "PUT", "/v1/scripts/greet", wire.PutScriptRequest{Source: `return "v2"`}).ok(200, &v2)
	if v1.Version != 1 || v2.Version != 2 || v2.Source != `return "v2"` {
		t.Fatalf("versions %+v %+v", v1, v2)
	}
	s.do(key, "GET", "/v1/scripts/greet", nil).ok(200, &got)
	if got.Version != 2 || got.Source != `return "v2"` {
		t.Fatalf("latest %+v", got)
	}
	got = wire.Script{}
	s.do(key, "GET", "/v1/scripts/greet?version=1", nil).ok(200, &got)
	if got.Version != 1 || got.Source != `return "v1"` {
		t.Fatalf("version 1 %+v", got)
	}
	s.do(key, "GET", "/v1/scripts/greet?version=3", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/scripts/greet?version=0", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/scripts/greet?version=x", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/scripts/nope", nil).problem(404, "not_found")

	// A syntax error is refused with its position, and stores nothing.
	p := s.do(key, "PUT", "/v1/scripts/greet", wire.PutScriptRequest{Source: "var a = 1;\nreturn (;"}).problem(400, "script_syntax")
	if len(p.Reasons) != 1 || !strings.HasPrefix(p.Reasons[0], "line 2, column ") {
		t.Fatalf("syntax problem %+v", p)
	}
	s.do(key, "GET", "/v1/scripts/greet?version=3", nil).problem(404, "not_found")
	s.do(key, "PUT", "/v1/scripts/greet", `{"source":"return 1\u0000"}`).problem(400, "invalid_argument")
	s.do(key, "PUT", "/v1/scripts/greet", wire.PutScriptRequest{Source: strings.Repeat(" ", herald.MaxScriptBytes+1)}).problem(400, "invalid_argument")
	s.do(key, "PUT", "/v1/scripts/"+strings.Repeat("s", 300), wire.PutScriptRequest{Source: "return 1"}).problem(400, "invalid_argument")
	s.do(key, "PUT", "/v1/scripts/greet", `{"source":1}`).problem(400, "bad_request")

	// Listing pages by id, without sources.
	for _, id := range []string{"c", "a", "b"} {
		s.do(key, "PUT", "/v1/scripts/"+id, wire.PutScriptRequest{Source: "return 1"}).ok(200, nil)
	}
	var ids []string
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.ScriptInfo]
		a := s.do(key, "GET", "/v1/scripts?limit=3&cursor="+cursor, nil).ok(200, &page)
		if strings.Contains(string(a.Body), "source") {
			t.Fatalf("a list holds sources: %s", a.Body)
		}
		pages++
		for _, x := range page.Items {
			ids = append(ids, x.ID)
			if x.ID == "greet" && (x.Version != 2 || x.Size != len(`return "v2"`)) {
				t.Fatalf("greet in the list: %+v", x)
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if strings.Join(ids, ",") != "a,b,c,greet" || pages != 2 {
		t.Fatalf("listed %v in %d pages", ids, pages)
	}

	s.do(key, "DELETE", "/v1/scripts/greet", nil).ok(204, nil)
	s.do(key, "GET", "/v1/scripts/greet", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/scripts/greet?version=1", nil).problem(404, "not_found")
	s.do(key, "DELETE", "/v1/scripts/greet", nil).problem(404, "not_found")
	s.do(s.key("other"), "GET", "/v1/scripts/a", nil).problem(404, "not_found")
	s.do(s.key("other"), "DELETE", "/v1/scripts/a", nil).problem(404, "not_found")
}

func TestBus_ScriptValidate(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	var v wire.ValidateScriptResponse
	s.do(key, "POST", "/v1/scripts/validate", wire.ValidateScriptRequest{Source: `log(ctx.event.type); return 1`}).ok(200, &v)
	if !v.OK || v.SyntaxError != nil {
		t.Fatalf("valid: %+v", v)
	}
	v = wire.ValidateScriptResponse{}
	s.do(key, "POST", "/v1/scripts/validate", wire.ValidateScriptRequest{Source: "return 1;\n\n  }"}).ok(200, &v)
	if v.OK || v.SyntaxError == nil || v.SyntaxError.Line != 3 || v.SyntaxError.Column < 1 || v.SyntaxError.Message == "" {
		t.Fatalf("invalid: %+v", v)
	}
	s.do(key, "POST", "/v1/scripts/validate", `{"source":"\u0000"}`).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/validate", `{"src":"return 1"}`).problem(400, "bad_request")
	var list wire.Page[*wire.ScriptInfo]
	s.do(key, "GET", "/v1/scripts", nil).ok(200, &list)
	if len(list.Items) != 0 {
		t.Fatalf("validate stored %+v", list.Items)
	}
}

// TestBus_ScriptDryRun: a dry run answers with the script's result and
// logs, or its failure with kind and stack; a script that loops forever or
// allocates without bound is a typed answer and the server stays up.
func TestBus_ScriptDryRun(t *testing.T) {
	s := newServer(t, func(c *herald.Config, _ *httpapi.Options) { c.Bus.ScriptMemory = 32 << 20 })
	key := s.key("acme")
	ev := wire.SampleEvent{Type: "order.paid", Data: json.RawMessage(`{"amount":1200}`)}
	run := func(req wire.TestScriptRequest) *wire.TestScriptResponse {
		t.Helper()
		var out wire.TestScriptResponse
		s.do(key, "POST", "/v1/scripts/test", req).ok(200, &out)
		return &out
	}

	res := run(wire.TestScriptRequest{Source: `log("amount", ctx.event.data.amount); return {tenant: ctx.tenant.id, id: ctx.event.id}`, Event: ev})
	if !res.Succeeded || string(res.Result) != `{"tenant":"acme","id":"dry-run"}` || len(res.Logs) != 1 || res.Logs[0] != "amount 1200" {
		t.Fatalf("success: %+v (%s)", res, res.Result)
	}
	res = run(wire.TestScriptRequest{Source: "log('a');\nfunction check() { throw new Error('too big'); }\ncheck();", Event: ev})
	if res.Succeeded || res.ErrorKind != "runtime" || res.Error != "too big" || !strings.Contains(res.Stack, "check") || len(res.Logs) != 1 {
		t.Fatalf("throw: %+v", res)
	}
	if res = run(wire.TestScriptRequest{Source: `throw new PermanentError("no")`, Event: ev}); res.ErrorKind != "permanent" {
		t.Fatalf("permanent: %+v", res)
	}

	// A stored script, latest or a version; nothing new is stored.
	s.do(key, "PUT", "/v1/scripts/s", wire.PutScriptRequest{Source: `return 1`}).ok(200, nil)
	s.do(key, "PUT", "/v1/scripts/s", wire.PutScriptRequest{Source: `return 2`}).ok(200, nil)
	if res = run(wire.TestScriptRequest{Script: "s", Event: ev}); string(res.Result) != "2" {
		t.Fatalf("stored latest: %+v", res)
	}
	if res = run(wire.TestScriptRequest{Script: "s", Version: 1, Event: ev}); string(res.Result) != "1" {
		t.Fatalf("stored version 1: %+v", res)
	}
	var sc wire.Script
	s.do(key, "GET", "/v1/scripts/s", nil).ok(200, &sc)
	if sc.Version != 2 {
		t.Fatalf("a dry run stored a version: %+v", sc)
	}

	// Hostile scripts: typed answers, bounded time, the server stays up.
	began := time.Now()
	res = run(wire.TestScriptRequest{Source: `while (true) {}`, Event: ev, Timeout: herald.Duration(300 * time.Millisecond)})
	if res.Succeeded || res.ErrorKind != "timeout" {
		t.Fatalf("endless loop: %+v", res)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("an endless loop with a 300ms timeout held the request %v", d)
	}
	res = run(wire.TestScriptRequest{Source: `var a = []; for (;;) a.push('x'.repeat(1024) + a.length);`, Event: ev,
		Timeout: herald.Duration(30 * time.Second)})
	if res.Succeeded || res.ErrorKind != "resource" {
		t.Fatalf("unbounded allocation: %+v", res)
	}
	if res = run(wire.TestScriptRequest{Source: `function f() { return f() + 1 } return f()`, Event: ev}); res.ErrorKind != "resource" {
		t.Fatalf("unbounded recursion: %+v", res)
	}
	s.do("", "GET", "/healthz", nil).ok(200, nil)
	if res = run(wire.TestScriptRequest{Source: `return "still here"`, Event: ev}); string(res.Result) != `"still here"` {
		t.Fatalf("after hostile scripts: %+v", res)
	}

	// Refusals.
	p := s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Source: "return (", Event: ev}).problem(400, "script_syntax")
	if len(p.Reasons) != 1 || !strings.HasPrefix(p.Reasons[0], "line 1, column ") {
		t.Fatalf("syntax: %+v", p)
	}
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Event: ev}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Source: "return 1", Script: "s", Event: ev}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Source: "return 1", Version: 2, Event: ev}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Script: "nope", Event: ev}).problem(404, "not_found")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Script: "s", Version: 9, Event: ev}).problem(404, "not_found")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Script: "s", Version: -1, Event: ev}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Source: "return 1", Event: wire.SampleEvent{Type: "a.>"}}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", wire.TestScriptRequest{Source: "return 1", Event: ev, Timeout: herald.Duration(time.Hour)}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", `{"source":"return 1","event":{"type":"a.b","data":`+
		strings.Repeat("[", 300)+strings.Repeat("]", 300)+`}}`).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/scripts/test", `{"source":"return 1","event":{"type":"a.b"},"timeout":"soon"}`).problem(400, "bad_request")
	// Another tenant's stored script is not found.
	s.do(s.key("other"), "POST", "/v1/scripts/test", wire.TestScriptRequest{Script: "s", Event: ev}).problem(404, "not_found")
}
