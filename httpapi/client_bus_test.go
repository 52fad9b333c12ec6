package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

// TestBus_GoClient: the Go client's bus methods reach their routes and
// return problems as *client.Error with the code.
func TestBus_GoClient(t *testing.T) {
	s := newServer(t)
	c, err := client.New(s.srv.URL, s.key("acme"), client.WithHTTPClient(s.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := s.ctx
	if _, err := c.PutScript(ctx, "w/1", "return ("); client.Code(err) != "script_syntax" {
		t.Fatalf("syntax: %v", err)
	}
	if _, err := c.PutScript(ctx, "w/1", flakySource(false)); err != nil {
		t.Fatal(err)
	}
	if sc, err := c.Script(ctx, "w/1", 1); err != nil || sc.ID != "w/1" || sc.Version != 1 {
		t.Fatalf("script: %+v, %v", sc, err)
	}
	if v, err := c.ValidateScript(ctx, "}"); err != nil || v.OK || v.SyntaxError == nil {
		t.Fatalf("validate: %+v, %v", v, err)
	}
	res, err := c.TestScript(ctx, wire.TestScriptRequest{Script: "w/1", Event: wire.SampleEvent{Type: "a.b", ID: "e"}})
	if err != nil || res.Succeeded || res.Error != "not ready for e" {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	sub, err := c.PutSubscription(ctx, "s 1", wire.PutSubscriptionRequest{Pattern: "a.b", MaxRetries: ptr(0),
		Target: wire.Target{Kind: herald.TargetScript, Script: "w/1"}})
	if err != nil || sub.ID != "s 1" {
		t.Fatalf("put subscription: %+v, %v", sub, err)
	}
	if sub, err = c.SetSubscriptionEnabled(ctx, "s 1", false); err != nil || sub.Enabled {
		t.Fatalf("disable: %+v, %v", sub, err)
	}
	if sub, err = c.SetSubscriptionEnabled(ctx, "s 1", true); err != nil || !sub.Enabled {
		t.Fatalf("enable: %+v, %v", sub, err)
	}
	if p, err := c.ListSubscriptions(ctx, 10, ""); err != nil || len(p.Items) != 1 {
		t.Fatalf("list subscriptions: %+v, %v", p, err)
	}
	if p, err := c.ListScripts(ctx, 10, ""); err != nil || len(p.Items) != 1 || p.Items[0].ID != "w/1" {
		t.Fatalf("list scripts: %+v, %v", p, err)
	}
	rec, err := c.Publish(ctx, wire.PublishRequest{Type: "a.b", EventID: "ev/1", Data: json.RawMessage(`1`)})
	if err != nil || rec.EventID != "ev/1" {
		t.Fatalf("publish: %+v, %v", rec, err)
	}
	var x *herald.Execution
	s.eventually("dead letter", func() bool {
		ev, err := c.PublishedEvent(ctx, "ev/1")
		if err != nil {
			return false
		}
		x = execution(ev, "s 1")
		return x != nil && x.Status == herald.ExecDeadLettered
	})
	if p, err := c.Attempts(ctx, client.AttemptFilter{Execution: x.ID}); err != nil || len(p.Items) != 1 {
		t.Fatalf("attempts: %+v, %v", p, err)
	}
	if p, err := c.DeadLetters(ctx, client.DeadLetterFilter{Subscription: "s 1", IDs: []int64{x.DeadLetter}, ErrorKind: "runtime"}); err != nil || len(p.Items) != 1 {
		t.Fatalf("dead letters: %+v, %v", p, err)
	}
	if d, err := c.DeadLetter(ctx, x.DeadLetter); err != nil || d.EventID != "ev/1" {
		t.Fatalf("dead letter: %+v, %v", d, err)
	}
	if _, err := c.ReprocessDeadLetters(ctx, wire.DeadLetterSelection{}); client.Code(err) != "invalid_argument" {
		t.Fatalf("empty selection: %v", err)
	}
	if _, err := c.PutScript(ctx, "w/1", flakySource(true)); err != nil {
		t.Fatal(err)
	}
	if err := c.ReprocessDeadLetter(ctx, x.DeadLetter); err != nil {
		t.Fatal(err)
	}
	if err := c.ReprocessDeadLetter(ctx, x.DeadLetter); client.Code(err) != "already_reprocessed" {
		t.Fatalf("second reprocess: %v", err)
	}
	if n, err := c.ReprocessDeadLetters(ctx, wire.DeadLetterSelection{All: true}); err != nil || n != 0 {
		t.Fatalf("reprocess all: %d, %v", n, err)
	}
	if err := c.DeleteDeadLetter(ctx, x.DeadLetter); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DeleteDeadLetters(ctx, wire.DeadLetterSelection{All: true, IncludeReprocessed: true}); err != nil || n != 0 {
		t.Fatalf("delete all: %d, %v", n, err)
	}
	if err := c.DeleteSubscription(ctx, "s 1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteScript(ctx, "w/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscription(ctx, "s 1"); client.Code(err) != "not_found" {
		t.Fatalf("deleted subscription: %v", err)
	}
}
