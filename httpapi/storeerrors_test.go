package httpapi_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// backendText is what a backend's or driver's text looks like in a
// message: a backend name, a SQLSTATE, a SQLite result code, the driver's
// words.
var backendText = regexp.MustCompile(`sqlite:|postgres:|SQLSTATE|FATAL|\(\d+\)$|preprocessing|pgx|database or disk`)

// TestStoreErrors_BusRecordsInHeraldsWords: a bus delivery to an instance
// that has ended is recorded (attempt and dead letter) in Herald's words,
// the same on every backend: no "sqlite: raise event …" prefix.
func TestStoreErrors_BusRecordsInHeraldsWords(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "bm-0"}).ok(201, nil)
	s.do(key, "POST", "/v1/instances/bm-0/terminate", `{"reason":"test"}`).ok(200, nil)
	s.do(key, "PUT", "/v1/subscriptions/sig", wire.PutSubscriptionRequest{Pattern: "order.paid", MaxRetries: ptr(0),
		Target: wire.Target{Kind: herald.TargetSignal, InstanceID: "bm-0", Name: "go"}}).ok(200, nil)
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "order.paid", EventID: "o1", Data: json.RawMessage(`{}`)}).ok(202, nil)
	x := s.executionIs(key, "o1", "sig", herald.ExecDeadLettered)

	var attempts wire.Page[*wire.Attempt]
	s.do(key, "GET", fmt.Sprint("/v1/executions?execution=", x.ID), nil).ok(200, &attempts)
	if len(attempts.Items) != 1 {
		t.Fatalf("attempts %+v", attempts.Items)
	}
	var d wire.DeadLetter
	s.do(key, "GET", fmt.Sprint("/v1/dead-letters/", x.DeadLetter), nil).ok(200, &d)
	for what, msg := range map[string]string{"attempt": attempts.Items[0].Error, "dead letter": d.Error} {
		if msg == "" || backendText.MatchString(msg) {
			t.Errorf("%s error %q: want Herald's words, without backend text", what, msg)
		}
	}
	if d.ErrorKind != herald.ErrorPermanent || !regexp.MustCompile(`instance "bm-0" is terminated`).MatchString(d.Error) {
		t.Errorf("dead letter %s %q", d.ErrorKind, d.Error)
	}
}
