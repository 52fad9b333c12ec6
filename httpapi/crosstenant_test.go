package httpapi_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

// mark is in every payload, name and source tenant B writes, so an answer
// that shows any of B's data to A contains it.
const mark = "bsecret7"

// TestAuth_CrossTenant: tenant A's key tries every tenant-scoped route of
// the OpenAPI document (so a route added later is tried too) against
// tenant B's instance, events, fates, definitions, correlated events,
// subscriptions, scripts, executions and dead letters. Nothing of B's is
// read (no answer holds B's mark) or changed (B's view of its data is the
// same before and after), and each answer about one of B's objects is the
// answer about an object that exists nowhere — status and problem code —
// so A cannot tell that B's exists. Naming B in Herald-Tenant is 403 on
// every route; malformed and revoked keys get 401 on every route.
func TestAuth_CrossTenant(t *testing.T) {
	s := newServer(t)
	ka, kb := s.key("tenant-a"), s.key("tenant-b")

	// B's objects.
	s.do(kb, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i1", Input: json.RawMessage(`"` + mark + `"`)}).ok(201, nil)
	s.do(kb, "POST", "/v1/instances/i1/events/early", wire.SendEventRequest{EventID: "e1", Payload: json.RawMessage(`"` + mark + `"`)}).ok(202, nil)
	s.do(kb, "POST", "/v1/instances/i1/queues/q", wire.SendEventRequest{EventID: "e2", Payload: json.RawMessage(`"` + mark + `"`)}).ok(202, nil)
	s.do(kb, "PUT", "/v1/definitions/d1", wire.PutDefinitionRequest{Correlation: &wire.CorrelationConfig{TTL: herald.Duration(3600e9)}}).ok(200, nil)
	s.do(kb, "PUT", "/v1/correlated/d1/k1", wire.PutCorrelatedRequest{Payload: json.RawMessage(`"` + mark + `"`)}).ok(200, nil)
	s.do(kb, "PUT", "/v1/scripts/sc1", wire.PutScriptRequest{Source: "throw new Error('" + mark + "');"}).ok(200, nil)
	s.do(kb, "PUT", "/v1/subscriptions/s1", wire.PutSubscriptionRequest{Pattern: "job.*", MaxRetries: ptr(0),
		Target: wire.Target{Kind: herald.TargetScript, Script: "sc1"}}).ok(200, nil)
	s.do(kb, "POST", "/v1/publish", wire.PublishRequest{Type: "job.run", EventID: "p1", Data: json.RawMessage(`"` + mark + `"`)}).ok(202, nil)
	dl := s.executionIs(kb, "p1", "s1", herald.ExecDeadLettered).DeadLetter

	bView := func() string {
		var b strings.Builder
		for _, p := range []string{"/v1/instances", "/v1/instances/i1", "/v1/instances/i1/history", "/v1/instances/i1/events",
			"/v1/events/e1", "/v1/events/e2", "/v1/definitions", "/v1/correlated/d1", "/v1/correlated/d1/k1",
			"/v1/subscriptions", "/v1/scripts", "/v1/scripts/sc1", "/v1/executions?subscription=s1", "/v1/executions?event_id=p1", "/v1/dead-letters",
			fmt.Sprint("/v1/dead-letters/", dl), "/v1/published/p1"} {
			a := s.do(kb, "GET", p, nil)
			fmt.Fprintf(&b, "%s %d %s\n", p, a.Status, a.Body)
		}
		return b.String()
	}
	before := bView()
	if !strings.Contains(before, mark) {
		t.Fatal("B's view does not show B's mark")
	}

	// The values of each path parameter: one of B's objects, and a twin
	// that exists nowhere.
	bValue := func(path, param string) string {
		switch {
		case param == "id" && strings.HasPrefix(path, "/v1/instances/"):
			return "i1"
		case param == "id" && strings.HasPrefix(path, "/v1/subscriptions/"):
			return "s1"
		case param == "id" && strings.HasPrefix(path, "/v1/scripts/"):
			return "sc1"
		case param == "id" && strings.HasPrefix(path, "/v1/dead-letters/"):
			return fmt.Sprint(dl)
		case param == "event_id" && strings.HasPrefix(path, "/v1/published/"):
			return "p1"
		case param == "event_id":
			return "e1"
		case param == "name" && strings.HasPrefix(path, "/v1/definitions/"), param == "def":
			return "d1"
		case param == "name":
			return "early"
		case param == "queue":
			return "q"
		case param == "key":
			return "k1"
		}
		t.Fatalf("%s: no value for path parameter %q; teach TestAuth_CrossTenant", path, param)
		return ""
	}
	twin := func(v string) string {
		if v == fmt.Sprint(dl) {
			return fmt.Sprint(dl + 1000)
		}
		return "zz-" + v
	}
	// Bodies that get past decoding, so the route reaches the store; ids
	// in a body are B's or their twins, like the path's (v maps a value of
	// B's to the variant being tried).
	bodies := map[string]func(v func(string) string) any{
		"startInstance":     func(v func(string) string) any { return wire.StartInstanceRequest{Workflow: "echo", ID: v("i1")} },
		"terminateInstance": func(v func(string) string) any { return map[string]string{"reason": "a's doing"} },
		"cancelInstance":    func(v func(string) string) any { return map[string]string{"reason": "a's doing"} },
		"raiseEvent":        func(v func(string) string) any { return wire.SendEventRequest{EventID: v("e1")} },
		"enqueueEvent":      func(v func(string) string) any { return wire.SendEventRequest{EventID: v("e2")} },
		"putCorrelated":     func(v func(string) string) any { return wire.PutCorrelatedRequest{} },
		"putDefinition":     func(v func(string) string) any { return map[string]any{} },
		"publish": func(v func(string) string) any {
			return wire.PublishRequest{Type: "job.run", EventID: v("p1")}
		},
		"putSubscription": func(v func(string) string) any {
			return wire.PutSubscriptionRequest{Pattern: "job.*", Target: wire.Target{Kind: herald.TargetScript, Script: v("sc1")}}
		},
		"putScript":      func(v func(string) string) any { return wire.PutScriptRequest{Source: "return 1;"} },
		"validateScript": func(v func(string) string) any { return wire.ValidateScriptRequest{Source: "return 1;"} },
		"testScript": func(v func(string) string) any {
			return wire.TestScriptRequest{Script: v("sc1"), Event: wire.SampleEvent{Type: "job.run"}}
		},
		"reprocessDeadLetters": func(v func(string) string) any {
			return wire.DeadLetterSelection{IDs: []int64{int64(atoi(v(fmt.Sprint(dl))))}}
		},
		"deleteDeadLetters": func(v func(string) string) any {
			return wire.DeadLetterSelection{IDs: []int64{int64(atoi(v(fmt.Sprint(dl))))}}
		},
	}
	same := func(x string) string { return x }

	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct{ Name, In string }
		} `json:"paths"`
	}
	s.do("", "GET", "/v1/openapi.json", nil).ok(200, &doc)
	type operation struct{ path, method string }
	var ops []operation
	for p, byMethod := range doc.Paths {
		for m := range byMethod {
			ops = append(ops, operation{p, strings.ToUpper(m)})
		}
	}
	// Reads first, on A's empty namespace; then writes, each made with
	// B's ids and with their twins, so A's namespace stays symmetric.
	sort.Slice(ops, func(i, j int) bool {
		ri, rj := ops[i].method == "GET", ops[j].method == "GET"
		if ri != rj {
			return ri
		}
		return ops[i].path+ops[i].method < ops[j].path+ops[j].method
	})
	tried := 0
	for _, o := range ops {
		path, method, op := o.path, o.method, doc.Paths[o.path][strings.ToLower(o.method)]
		scoped := false
		for _, p := range op.Parameters {
			scoped = scoped || (p.In == "header" && p.Name == httpapi.TenantHeader)
		}
		if !scoped {
			continue
		}
		tried++
		body := func(v func(string) string) any {
			if b := bodies[op.OperationID]; b != nil {
				return b(v)
			}
			if method == "PUT" || method == "POST" {
				return map[string]any{}
			}
			return nil
		}
		fill := func(v func(string) string) string {
			p := path
			for _, prm := range op.Parameters {
				if prm.In == "path" {
					p = strings.ReplaceAll(p, "{"+prm.Name+"}", v(bValue(path, prm.Name)))
				}
			}
			return p
		}
		onB, onNothing := fill(same), fill(twin)

		// Naming B is refused whatever the object.
		s.do(ka, method, onB, body(same), httpapi.TenantHeader, "tenant-b").problem(403, "forbidden")
		s.do(ka, method, onNothing, body(twin), httpapi.TenantHeader, "tenant-b").problem(403, "forbidden")
		s.do("hk_malformed", method, onB, body(same)).problem(401, "unauthorized")

		// With A's own tenant, B's object and no object get the same
		// answer, and neither shows B's data. (Writes act on A's own
		// namespace: A may create an instance "i1" of its own.)
		a1 := s.do(ka, method, onB, body(same))
		a2 := s.do(ka, method, onNothing, body(twin))
		if strings.Contains(string(a1.Body), mark) || strings.Contains(string(a2.Body), mark) {
			t.Errorf("%s %s: A's answer shows B's data: %s", method, onB, a1.Body)
		}
		if a1.Status != a2.Status || problemCode(a1) != problemCode(a2) {
			t.Errorf("%s %s: %d %s, but %d %s for an object that exists nowhere — the answer reveals B's object",
				method, path, a1.Status, problemCode(a1), a2.Status, problemCode(a2))
		}
	}
	if tried < 35 {
		t.Fatalf("only %d tenant-scoped operations tried", tried)
	}
	if after := bView(); after != before {
		t.Fatalf("B's data changed while A tried every route:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A revoked key gets 401 everywhere it used to work.
	var keys wire.Page[*wire.APIKey]
	s.do(s.admin, "GET", "/v1/keys?tenant=tenant-a", nil).ok(200, &keys)
	s.do(s.admin, "DELETE", "/v1/keys/"+keys.Items[0].ID, nil).ok(200, nil)
	for _, p := range []string{"/v1/instances", "/v1/subscriptions", "/v1/dead-letters"} {
		s.do(ka, "GET", p, nil).problem(401, "unauthorized")
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// problemCode is an answer's problem code, "" for a success.
func problemCode(a *answer) string {
	var p wire.Problem
	if a.Status < 400 || json.Unmarshal(a.Body, &p) != nil {
		return ""
	}
	return p.Code
}
