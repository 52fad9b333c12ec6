package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// flakySource is a script that fails until a version saved with ready =
// true replaces it.
func flakySource(ready bool) string {
	return fmt.Sprintf("const ready = %v;\nif (!ready) throw new Error('not ready for ' + ctx.event.id);\nreturn {done: ctx.event.id};", ready)
}

// TestBus_DeadLetters: a script that throws with no retries left produces
// real dead letters; they are listed (filtered, paged), inspected, and
// reprocessed through the API once the script is fixed, and then succeed;
// bulk actions need a filter or {"all": true}; letters are deleted.
func TestBus_DeadLetters(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/scripts/flaky", wire.PutScriptRequest{Source: flakySource(false)}).ok(200, nil)
	s.do(key, "PUT", "/v1/subscriptions/work", wire.PutSubscriptionRequest{Pattern: "job.*", MaxRetries: ptr(0),
		Target: wire.Target{Kind: herald.TargetScript, Script: "flaky"}}).ok(200, nil)
	ids := []string{"j0", "j1", "j2"}
	for _, id := range ids {
		s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "job.run", EventID: id, Data: json.RawMessage(`{"x":1}`)}).ok(202, nil)
	}
	letterOf := map[string]int64{}
	for _, id := range ids {
		x := s.executionIs(key, id, "work", herald.ExecDeadLettered)
		if x.DeadLetter == 0 || x.Attempts != 1 {
			t.Fatalf("%s: %+v", id, x)
		}
		letterOf[id] = x.DeadLetter
	}

	// Listed newest first, paged.
	var listed []int64
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.DeadLetter]
		s.do(key, "GET", "/v1/dead-letters?limit=2&cursor="+cursor, nil).ok(200, &page)
		pages++
		for _, d := range page.Items {
			listed = append(listed, d.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(listed) != 3 || pages != 2 || listed[0] < listed[1] || listed[1] < listed[2] {
		t.Fatalf("listed %v in %d pages", listed, pages)
	}
	var d wire.DeadLetter
	s.do(key, "GET", fmt.Sprint("/v1/dead-letters/", letterOf["j1"]), nil).ok(200, &d)
	if d.EventID != "j1" || d.Subscription != "work" || d.ErrorKind != herald.ErrorRuntime || d.Error != "not ready for j1" ||
		d.Stack == "" || d.EventType != "job.run" || string(d.EventData) != `{"x":1}` || d.Target.Script != "flaky" || d.Attempts != 1 {
		t.Fatalf("dead letter %+v", d)
	}
	count := func(query string) int {
		t.Helper()
		var page wire.Page[*wire.DeadLetter]
		s.do(key, "GET", "/v1/dead-letters?"+query, nil).ok(200, &page)
		return len(page.Items)
	}
	for q, want := range map[string]int{"error_kind=runtime": 3, "error_kind=timeout": 0, "subscription=work": 3,
		"subscription=other": 0, "event_type=job.run": 3, "event_type=job.other": 0,
		fmt.Sprintf("ids=%d,%d", letterOf["j0"], letterOf["j2"]): 2} {
		if n := count(q); n != want {
			t.Errorf("%s: %d letters, want %d", q, n, want)
		}
	}
	for _, q := range []string{"error_kind=bogus", "ids=1,x", "ids=0", "include_reprocessed=maybe", "cursor=-3", "limit=1001"} {
		s.do(key, "GET", "/v1/dead-letters?"+q, nil).problem(400, "invalid_argument")
	}
	s.do(key, "GET", "/v1/dead-letters?ids="+strings.Repeat("1,", 1000)+"1", nil).problem(400, "invalid_argument")

	// Bulk actions refuse an empty selection and "all" with a filter.
	for _, body := range []string{`{}`, `{"include_reprocessed":true}`, `{"all":false}`, `{"all":true,"subscription":"work"}`,
		`{"ids":[0]}`, `{"error_kind":"bogus"}`} {
		s.do(key, "POST", "/v1/dead-letters/reprocess", body).problem(400, "invalid_argument")
		s.do(key, "POST", "/v1/dead-letters/delete", body).problem(400, "invalid_argument")
	}
	if n := count(""); n != 3 {
		t.Fatalf("a refused bulk action changed letters: %d left", n)
	}

	// Fix the script (a new version), reprocess one letter, then the rest.
	s.do(key, "PUT", "/v1/scripts/flaky", wire.PutScriptRequest{Source: flakySource(true)}).ok(200, nil)
	var rep wire.ReprocessResponse
	s.do(key, "POST", fmt.Sprint("/v1/dead-letters/", letterOf["j0"], "/reprocess"), nil).ok(200, &rep)
	if rep.Reprocessed != 1 {
		t.Fatalf("reprocess one: %+v", rep)
	}
	x := s.executionIs(key, "j0", "work", herald.ExecSucceeded)
	if string(x.Result) != `{"done":"j0"}` || x.Reprocessed != 1 {
		t.Fatalf("j0 after reprocess: %+v", x)
	}
	s.do(key, "POST", fmt.Sprint("/v1/dead-letters/", letterOf["j0"], "/reprocess"), nil).problem(409, "already_reprocessed")
	s.do(key, "GET", fmt.Sprint("/v1/dead-letters/", letterOf["j0"]), nil).ok(200, &d)
	if d.ReprocessedAt.IsZero() {
		t.Fatalf("reprocessed letter %+v", d)
	}
	rep = wire.ReprocessResponse{}
	s.do(key, "POST", "/v1/dead-letters/reprocess", wire.DeadLetterSelection{Subscription: "work"}).ok(200, &rep)
	if rep.Reprocessed != 2 {
		t.Fatalf("reprocess by subscription: %+v", rep)
	}
	for _, id := range ids[1:] {
		s.executionIs(key, id, "work", herald.ExecSucceeded)
	}
	rep = wire.ReprocessResponse{Reprocessed: -1}
	s.do(key, "POST", "/v1/dead-letters/reprocess", wire.DeadLetterSelection{All: true}).ok(200, &rep)
	if rep.Reprocessed != 0 {
		t.Fatalf("reprocess all after all were: %+v", rep)
	}
	if n := count(""); n != 0 {
		t.Fatalf("%d letters wait for a decision after reprocessing", n)
	}
	if n := count("include_reprocessed=true"); n != 3 {
		t.Fatalf("%d reprocessed letters kept, want 3", n)
	}

	// Delete one, then all (reprocessed included).
	var del wire.DeleteResponse
	s.do(key, "DELETE", fmt.Sprint("/v1/dead-letters/", letterOf["j1"]), nil).ok(200, &del)
	if del.Deleted != 1 {
		t.Fatalf("delete one: %+v", del)
	}
	s.do(key, "DELETE", fmt.Sprint("/v1/dead-letters/", letterOf["j1"]), nil).problem(404, "not_found")
	s.do(key, "GET", fmt.Sprint("/v1/dead-letters/", letterOf["j1"]), nil).problem(404, "not_found")
	s.do(key, "POST", fmt.Sprint("/v1/dead-letters/", letterOf["j1"], "/reprocess"), nil).problem(404, "not_found")
	del = wire.DeleteResponse{}
	s.do(key, "POST", "/v1/dead-letters/delete", wire.DeadLetterSelection{All: true, IncludeReprocessed: true}).ok(200, &del)
	if del.Deleted != 2 || count("include_reprocessed=true") != 0 {
		t.Fatalf("delete all: %+v", del)
	}

	// Ids that cannot name a letter.
	for _, id := range []string{"abc", "0", "-1", "99999999999999999999", "1.5"} {
		s.do(key, "GET", "/v1/dead-letters/"+id, nil).problem(400, "invalid_argument")
		s.do(key, "DELETE", "/v1/dead-letters/"+id, nil).problem(400, "invalid_argument")
		s.do(key, "POST", "/v1/dead-letters/"+id+"/reprocess", nil).problem(400, "invalid_argument")
	}
	s.do(key, "GET", "/v1/dead-letters/987654", nil).problem(404, "not_found")
}

// TestBus_DeadLettersOtherTenant: another tenant's letters are not found,
// not listed, and not touched by its bulk actions.
func TestBus_DeadLettersOtherTenant(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/scripts/fail", wire.PutScriptRequest{Source: `throw new PermanentError("no")`}).ok(200, nil)
	s.do(key, "PUT", "/v1/subscriptions/f", wire.PutSubscriptionRequest{Pattern: "a.b",
		Target: wire.Target{Kind: herald.TargetScript, Script: "fail"}}).ok(200, nil)
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "a.b", EventID: "p"}).ok(202, nil)
	x := s.executionIs(key, "p", "f", herald.ExecDeadLettered)
	other := s.key("other")
	path := fmt.Sprint("/v1/dead-letters/", x.DeadLetter)
	s.do(other, "GET", path, nil).problem(404, "not_found")
	s.do(other, "POST", path+"/reprocess", nil).problem(404, "not_found")
	s.do(other, "DELETE", path, nil).problem(404, "not_found")
	var rep wire.ReprocessResponse
	s.do(other, "POST", "/v1/dead-letters/reprocess", wire.DeadLetterSelection{All: true}).ok(200, &rep)
	var del wire.DeleteResponse
	s.do(other, "POST", "/v1/dead-letters/delete", wire.DeadLetterSelection{IDs: []int64{x.DeadLetter}}).ok(200, &del)
	var page wire.Page[*wire.DeadLetter]
	s.do(other, "GET", "/v1/dead-letters", nil).ok(200, &page)
	if rep.Reprocessed != 0 || del.Deleted != 0 || len(page.Items) != 0 {
		t.Fatalf("other tenant: reprocessed %d, deleted %d, listed %d", rep.Reprocessed, del.Deleted, len(page.Items))
	}
	var d wire.DeadLetter
	s.do(key, "GET", path, nil).ok(200, &d)
	if !d.ReprocessedAt.IsZero() || d.ErrorKind != herald.ErrorPermanent {
		t.Fatalf("owner's letter after the other tenant's calls: %+v", d)
	}
}
