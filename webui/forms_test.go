package webui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/signing"
)

// postRefused checks that path refuses a form without its CSRF token (or
// with another) with 403.
func postRefused(t *testing.T, b *browserless, path string, form url.Values) {
	t.Helper()
	for _, token := range []string{"", "not-the-token"} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Del("csrf")
		if token != "" {
			f.Set("csrf", token)
		}
		if a := b.post(path, f); a.code != http.StatusForbidden {
			t.Fatalf("POST %s with csrf %q: %d, want 403\n%s", path, token, a.code, a.body)
		}
	}
}

// Event definitions: create, edit, a refusal shown by the form with the
// input kept, CSRF, delete with confirmation, and another tenant's
// definition not found.
func TestDefinitionForm(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	b := s.signIn(s.api.Admin)

	if body := b.get("/definitions/order-paid", http.StatusOK); !strings.Contains(body, "A new event definition") {
		t.Fatalf("an unknown name opens the new-definition form:\n%s", body)
	}
	ok := url.Values{"csrf": {b.csrf}, "schema": {`{"type":"object","required":["order_id"]}`}, "buffer": {"latest"},
		"retention": {"36h"}, "max_payload_bytes": {"4096"}, "correlation": {"on"}, "ttl": {"72h"}, "delete_after_first": {"on"}}
	postRefused(t, b, "/definitions/order-paid", ok)
	if _, err := c.GetEventDefinition(s.ctx(), "order-paid"); err == nil {
		t.Fatal("a refused (CSRF) post stored the definition")
	}
	a := b.post("/definitions/order-paid", ok)
	if a.code != http.StatusOK || !strings.Contains(a.body, "Saved.") {
		t.Fatalf("create: %d\n%s", a.code, a.body)
	}
	d, err := c.GetEventDefinition(s.ctx(), "order-paid")
	if err != nil {
		t.Fatal(err)
	}
	if d.Buffer != "latest" || d.Retention != 36*time.Hour || d.MaxPayloadBytes != 4096 || d.Correlation == nil ||
		d.Correlation.TTL != 72*time.Hour || !d.Correlation.DeleteAfterFirstCorrelation || !strings.Contains(string(d.Schema), "order_id") {
		t.Fatalf("stored definition %+v (correlation %+v)", d, d.Correlation)
	}
	// The edit form shows what is stored; the list lists it.
	body := b.get("/definitions/order-paid", http.StatusOK)
	for _, want := range []string{`value="36h0m0s"`, `value="4096"`, `value="72h0m0s"`, "order_id", `<option value="latest" selected>`} {
		if !strings.Contains(body, want) {
			t.Fatalf("edit form lacks %q:\n%s", want, body)
		}
	}
	if body := b.get("/definitions", http.StatusOK); !strings.Contains(body, `href="/definitions/order-paid"`) {
		t.Fatalf("the list lacks order-paid:\n%s", body)
	}
	// Edit: correlation off, buffer fifo, no schema.
	edit := url.Values{"csrf": {b.csrf}, "schema": {""}, "buffer": {"fifo"}}
	if a := b.post("/definitions/order-paid", edit); a.code != http.StatusOK || !strings.Contains(a.body, "Saved.") {
		t.Fatalf("edit: %d\n%s", a.code, a.body)
	}
	if d, _ := c.GetEventDefinition(s.ctx(), "order-paid"); d.Correlation != nil || d.Buffer != "fifo" || len(d.Schema) != 0 {
		t.Fatalf("after edit: %+v", d)
	}

	// Refusals: the library's reasons (a schema that is not a JSON Schema,
	// an unknown buffer, a negative cap) and the form's own (a retention
	// that is not a duration) are shown by the form, which keeps the
	// input; nothing changes.
	bad := url.Values{"csrf": {b.csrf}, "schema": {`{"type": 12}`}, "buffer": {"lifo"}, "max_payload_bytes": {"-5"}}
	a = b.post("/definitions/order-paid", bad)
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, `id="reasons"`) || !strings.Contains(a.body, "schema:") ||
		!strings.Contains(a.body, "buffer &#34;lifo&#34;") || !strings.Contains(a.body, "negative max payload bytes") {
		t.Fatalf("refused definition: %d, want 400 with the reasons\n%s", a.code, a.body)
	}
	if !strings.Contains(a.body, `{&#34;type&#34;: 12}`) || !strings.Contains(a.body, `value="-5"`) {
		t.Fatalf("the refused form lost the input:\n%s", a.body)
	}
	a = b.post("/definitions/order-paid", url.Values{"csrf": {b.csrf}, "retention": {"a day"}, "buffer": {"fifo"}})
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, "is not a duration") || !strings.Contains(a.body, `value="a day"`) {
		t.Fatalf("bad retention: %d\n%s", a.code, a.body)
	}
	if d, _ := c.GetEventDefinition(s.ctx(), "order-paid"); d.Buffer != "fifo" || d.Retention != 0 {
		t.Fatalf("a refused save changed the definition: %+v", d)
	}

	// Another tenant: not found, and cannot delete.
	cb := s.client("beta")
	if _, err := cb.PutEventDefinition(s.ctx(), herald.EventDefinition{Name: "beta-secret-def", Schema: []byte(`{"title":"beta-secret-schema"}`)}); err != nil {
		t.Fatal(err)
	}
	_, alpha := s.key("alpha")
	ab := s.signIn(alpha)
	if body := ab.get("/definitions/beta-secret-def", http.StatusOK); strings.Contains(body, "beta-secret-schema") || !strings.Contains(body, "A new event definition") {
		t.Fatalf("alpha sees beta's definition:\n%s", body)
	}
	if body := ab.get("/definitions", http.StatusOK); strings.Contains(body, "beta-secret") {
		t.Fatal("alpha's list shows beta's definition")
	}
	if a := ab.post("/definitions/beta-secret-def/delete", url.Values{"csrf": {ab.csrf}, "confirm": {"yes"}}); a.code != http.StatusNotFound {
		t.Fatalf("alpha deleting beta's definition: %d, want 404", a.code)
	}
	if _, err := cb.GetEventDefinition(s.ctx(), "beta-secret-def"); err != nil {
		t.Fatalf("beta's definition after alpha's attempt: %v", err)
	}

	// Delete asks first, refuses without CSRF, then deletes.
	postRefused(t, b, "/definitions/order-paid/delete", url.Values{"confirm": {"yes"}})
	if a := b.post("/definitions/order-paid/delete", url.Values{"csrf": {b.csrf}}); a.code != http.StatusOK || !strings.Contains(a.body, `id="confirm"`) {
		t.Fatalf("delete without confirmation: %d, want the confirmation page", a.code)
	}
	if _, err := c.GetEventDefinition(s.ctx(), "order-paid"); err != nil {
		t.Fatal("the confirmation page deleted the definition")
	}
	if a := b.post("/definitions/order-paid/delete", url.Values{"csrf": {b.csrf}, "confirm": {"yes"}}); a.code != http.StatusOK || !strings.Contains(a.body, "Deleted event definition order-paid.") {
		t.Fatalf("confirmed delete: %d\n%s", a.code, a.body)
	}
	if _, err := c.GetEventDefinition(s.ctx(), "order-paid"); err == nil {
		t.Fatal("still there after delete")
	}
}

// Correlated events: search by definition (one page at a time), by key,
// by time, orphans only; an event's page with its payload and the events
// it produced; delete with confirmation; another tenant's not found.
func TestCorrelatedPages(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	if _, err := c.PutEventDefinition(s.ctx(), herald.EventDefinition{Name: signing.DocumentSigned, Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartWorkflow(s.ctx(), "onboard", signing.Request{Party: "ann", Document: "doc-signed", Deadline: herald.Duration(time.Hour)},
		herald.WithInstanceID("onboard-ann")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutCorrelatedEvent(s.ctx(), signing.DocumentSigned, "doc-signed", signing.Signed{Document: "doc-signed", SignedBy: "<b>ann</b>"}); err != nil {
		t.Fatal(err)
	}
	for i := range pageSizeForTest + 2 {
		key := "orphan-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		if _, err := c.PutCorrelatedEvent(s.ctx(), signing.DocumentSigned, key, map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	var produced string
	eventually(t, "doc-signed to reach onboard-ann", func() bool {
		ce, err := c.GetCorrelatedEvent(s.ctx(), signing.DocumentSigned, "doc-signed")
		if err != nil || len(ce.Produced) == 0 {
			return false
		}
		produced = ce.Produced[0].EventID
		return true
	})
	b := s.signIn(s.api.Admin)
	if body := b.get("/correlated", http.StatusOK); !strings.Contains(body, "<option >document-signed</option>") && !strings.Contains(body, "<option>document-signed</option>") {
		t.Fatalf("the definition is not offered:\n%s", body)
	}
	// All, first page: doc-signed (oldest) and a next page.
	body := b.get("/correlated?def=document-signed", http.StatusOK)
	if !strings.Contains(body, ">doc-signed<") || !strings.Contains(body, "1 instance wait(s)") || !strings.Contains(body, `id="next"`) {
		t.Fatalf("first page:\n%s", body)
	}
	m := nextLinkRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no next link")
	}
	page2 := b.get(strings.ReplaceAll(m[1], "&amp;", "&"), http.StatusOK)
	if strings.Contains(page2, ">doc-signed<") || !strings.Contains(page2, "orphan-bz") {
		t.Fatalf("second page:\n%s", page2)
	}
	// Orphans only: no doc-signed; produced only: doc-signed alone.
	orphans := b.get("/correlated?def=document-signed&produced=no", http.StatusOK)
	if strings.Contains(orphans, ">doc-signed<") || !strings.Contains(orphans, "orphan-aa") {
		t.Fatalf("orphans:\n%s", orphans)
	}
	if body := b.get("/correlated?def=document-signed&produced=yes", http.StatusOK); !strings.Contains(body, ">doc-signed<") || strings.Contains(body, "orphan-aa") {
		t.Fatalf("produced only:\n%s", body)
	}
	// A time range in the future finds nothing; a bad time or bookmark
	// is refused.
	future := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02T15:04")
	if body := b.get("/correlated?def=document-signed&after="+future, http.StatusOK); !strings.Contains(body, "No correlated events.") {
		t.Fatalf("future range:\n%s", body)
	}
	b.get("/correlated?def=document-signed&after=yesterday", http.StatusBadRequest)
	b.get("/correlated?def=document-signed&bookmark=forged", http.StatusBadRequest)
	// By key: the event's page, its payload (escaped) and what it produced.
	ev := b.get("/correlated?def=document-signed&key=doc-signed", http.StatusOK)
	for _, want := range []string{`id="payload"`, "signed_by", produced, `href="/instances/onboard-ann"`} {
		if !strings.Contains(ev, want) {
			t.Fatalf("event page lacks %q:\n%s", want, ev)
		}
	}
	if strings.Contains(ev, "<b>ann</b>") {
		t.Fatal("payload rendered unescaped")
	}
	b.get("/correlated/event?def=document-signed&key=no-such-key", http.StatusNotFound)

	// Another tenant: not found, cannot delete.
	_, alpha := s.key("alpha")
	ab := s.signIn(alpha)
	if body := ab.get("/correlated/event?def=document-signed&key=doc-signed", http.StatusNotFound); strings.Contains(body, "ann") {
		t.Fatal("alpha sees the default tenant's correlated event")
	}
	if body := ab.get("/correlated?def=document-signed", http.StatusOK); strings.Contains(body, "doc-signed") || strings.Contains(body, "orphan-") {
		t.Fatal("alpha's search shows the default tenant's correlated events")
	}
	del := url.Values{"def": {"document-signed"}, "key": {"orphan-aa"}, "confirm": {"yes"}, "csrf": {ab.csrf}}
	if a := ab.post("/correlated/delete", del); a.code != http.StatusNotFound {
		t.Fatalf("alpha deleting: %d, want 404", a.code)
	}
	// Delete: CSRF, confirmation, then gone.
	postRefused(t, b, "/correlated/delete", del)
	del.Set("csrf", b.csrf)
	del.Del("confirm")
	if a := b.post("/correlated/delete", del); a.code != http.StatusOK || !strings.Contains(a.body, `id="confirm"`) {
		t.Fatalf("delete without confirmation: %d", a.code)
	}
	if _, err := c.GetCorrelatedEvent(s.ctx(), signing.DocumentSigned, "orphan-aa"); err != nil {
		t.Fatal("deleted before confirmation")
	}
	del.Set("confirm", "yes")
	if a := b.post("/correlated/delete", del); a.code != http.StatusOK || !strings.Contains(a.body, "Deleted correlated event") {
		t.Fatalf("confirmed delete: %d\n%s", a.code, a.body)
	}
	if _, err := c.GetCorrelatedEvent(s.ctx(), signing.DocumentSigned, "orphan-aa"); err == nil {
		t.Fatal("still there after delete")
	}
}

// Subscriptions: create and edit through the form, refusals shown by the
// form with the input kept, CSRF, another tenant's not found.
func TestSubscriptionForm(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	if _, err := c.PutScript(s.ctx(), "notify", `return {ok: true};`); err != nil {
		t.Fatal(err)
	}
	b := s.signIn(s.api.Admin)
	if body := b.get("/subscriptions/paid", http.StatusOK); !strings.Contains(body, "A new subscription") {
		t.Fatalf("an unknown id opens the new-subscription form:\n%s", body)
	}
	ok := url.Values{"csrf": {b.csrf}, "pattern": {"order.*"}, "filter": {`{"logic":"AND","conditions":[{"field":"data.amount","op":"gt","value":100}]}`},
		"kind": {"script"}, "script": {"notify"}, "workflow": {"ignored-for-a-script"}, "max_retries": {"2"}, "timeout": {"5s"}, "enabled": {"on"}}
	postRefused(t, b, "/subscriptions/paid", ok)
	if _, err := c.Subscription(s.ctx(), "paid"); err == nil {
		t.Fatal("a refused (CSRF) post stored the subscription")
	}
	a := b.post("/subscriptions/paid", ok)
	if a.code != http.StatusOK || !strings.Contains(a.body, "Saved version 1.") {
		t.Fatalf("create: %d\n%s", a.code, a.body)
	}
	sub, err := c.Subscription(s.ctx(), "paid")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Pattern != "order.*" || sub.Target.Kind != herald.TargetScript || sub.Target.Script != "notify" || sub.Target.Workflow != "" ||
		sub.MaxRetries == nil || *sub.MaxRetries != 2 || time.Duration(sub.Timeout) != 5*time.Second || !sub.Enabled || !strings.Contains(string(sub.Filter), "data.amount") {
		t.Fatalf("stored %+v", sub)
	}
	// Edit: a workflow target, disabled, retries back to the default.
	edit := url.Values{"csrf": {b.csrf}, "pattern": {"order.>"}, "kind": {"workflow"}, "workflow": {"approval"}, "instance_id": {"order-{data.order_id}"}}
	if a := b.post("/subscriptions/paid", edit); a.code != http.StatusOK || !strings.Contains(a.body, "Saved version 2.") {
		t.Fatalf("edit: %d\n%s", a.code, a.body)
	}
	sub, _ = c.Subscription(s.ctx(), "paid")
	if sub.Pattern != "order.>" || sub.Target.Kind != herald.TargetWorkflow || sub.Target.InstanceID != "order-{data.order_id}" || sub.Enabled || sub.MaxRetries != nil {
		t.Fatalf("after edit %+v", sub)
	}
	if body := b.get("/subscriptions", http.StatusOK); !strings.Contains(body, `href="/subscriptions/paid"`) {
		t.Fatalf("the list does not link the subscription:\n%s", body)
	}
	// Enable/disable still works from the list.
	if a := b.post("/subscriptions/paid/enabled", url.Values{"csrf": {b.csrf}, "enabled": {"true"}}); a.code != http.StatusOK {
		t.Fatalf("enable: %d", a.code)
	}
	sub, _ = c.Subscription(s.ctx(), "paid")

	// Refusals: the library's reasons, shown by the form, input kept.
	bad := url.Values{"csrf": {b.csrf}, "pattern": {"order..paid"}, "filter": {`{"logic":"AND","conditions":[{"field":"data.amount","op":"between"}]}`},
		"kind": {"signal"}, "max_retries": {"99"}, "timeout": {"5s"}}
	a = b.post("/subscriptions/paid", bad)
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, `id="reasons"`) || !strings.Contains(a.body, "pattern:") ||
		!strings.Contains(a.body, "filter") || !strings.Contains(a.body, "target.name is required") || !strings.Contains(a.body, "max_retries 99") {
		t.Fatalf("refused subscription: %d\n%s", a.code, a.body)
	}
	if !strings.Contains(a.body, `value="order..paid"`) || !strings.Contains(a.body, "between") || !strings.Contains(a.body, `value="99"`) {
		t.Fatalf("the refused form lost the input:\n%s", a.body)
	}
	a = b.post("/subscriptions/paid", url.Values{"csrf": {b.csrf}, "pattern": {"a.b"}, "kind": {"script"}, "script": {"notify"}, "timeout": {"soon"}, "filter": {"{"}})
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, "is not a duration") || !strings.Contains(a.body, "filter: not JSON") {
		t.Fatalf("bad timeout and filter: %d\n%s", a.code, a.body)
	}
	if sub2, _ := c.Subscription(s.ctx(), "paid"); sub2.Version != sub.Version || sub2.Pattern != "order.>" {
		t.Fatalf("a refused save changed the subscription: %+v", sub2)
	}

	// Another tenant.
	cb := s.client("beta")
	if _, err := cb.PutSubscription(s.ctx(), herald.Subscription{ID: "beta-secret-sub", Pattern: "beta.secret",
		Target: herald.Target{Kind: herald.TargetWorkflow, Workflow: "approval"}}); err != nil {
		t.Fatal(err)
	}
	_, alpha := s.key("alpha")
	ab := s.signIn(alpha)
	if body := ab.get("/subscriptions/beta-secret-sub", http.StatusOK); strings.Contains(body, "beta.secret") || !strings.Contains(body, "A new subscription") {
		t.Fatalf("alpha sees beta's subscription:\n%s", body)
	}
	if a := ab.post("/subscriptions/beta-secret-sub/enabled", url.Values{"csrf": {ab.csrf}, "enabled": {"true"}}); a.code != http.StatusNotFound {
		t.Fatalf("alpha enabling beta's subscription: %d, want 404", a.code)
	}
	if got, _ := cb.Subscription(s.ctx(), "beta-secret-sub"); got.Enabled || got.Pattern != "beta.secret" {
		t.Fatalf("beta's subscription changed: %+v", got)
	}
}

// The instance page shows the actions only while the instance runs; the
// polled fragment of an ended instance says it ended (and carries the
// data-final marker that hides the actions in the page, static/app.js).
func TestInstanceActionsHiddenWhenEnded(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	id, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "lamp", Amount: 5, Deadline: herald.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	b := s.signIn(s.api.Admin)
	eventually(t, "the instance to run", func() bool {
		info, _ := c.Status(s.ctx(), id)
		return info != nil && info.Status == herald.StatusRunning
	})
	page := b.get("/instances/"+id, http.StatusOK)
	if !strings.Contains(page, `id="actions" data-hide-when-final`) || strings.Contains(page, `id="ended"`) {
		t.Fatalf("running instance: want the actions\n%s", page)
	}
	if live := b.get("/instances/"+id+"/live", http.StatusOK); strings.Contains(live, "data-final") || strings.Contains(live, `id="ended"`) {
		t.Fatalf("running instance's fragment says it ended:\n%s", live)
	}
	if err := c.Terminate(s.ctx(), id, "test"); err != nil {
		t.Fatal(err)
	}
	live := b.get("/instances/"+id+"/live", http.StatusOK)
	if !strings.Contains(live, "data-final") || !strings.Contains(live, `id="ended"`) {
		t.Fatalf("ended instance's fragment: want data-final and the ended note\n%s", live)
	}
	if page := b.get("/instances/"+id, http.StatusOK); strings.Contains(page, `id="actions"`) || !strings.Contains(page, `id="ended"`) {
		t.Fatalf("ended instance's page shows actions:\n%s", page)
	}
}
