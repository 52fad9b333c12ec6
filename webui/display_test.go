package webui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/webui"
)

// TestWaitTimesOutTomorrow: a wait whose timer fires in 24 h shows the
// date and how far it is ("times out at 2026-03-02 09:00:00 UTC (in
// 24h)"), not a time of day that reads as today's.
func TestWaitTimesOutTomorrow(t *testing.T) {
	var uiNow atomic.Int64 // the UI's clock, set once the timer is known
	s := newServerWith(t, func(o *webui.Options) {
		o.Now = func() time.Time {
			if n := uiNow.Load(); n != 0 {
				return time.Unix(0, n)
			}
			return time.Now()
		}
	})
	c := s.client(herald.DefaultTenant)
	id, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "desk", Amount: 5, Deadline: herald.Duration(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var fireAt time.Time
	eventually(t, "the approval to wait on its decision and its 24 h timer", func() bool {
		evs, err := c.History(s.ctx(), id, 0)
		if err != nil {
			return false
		}
		subscribed := false
		for _, ev := range evs {
			switch ev.Kind {
			case history.TimerCreated:
				fireAt = ev.FireAt
			case history.EventSubscribed:
				subscribed = true
			}
		}
		return subscribed && !fireAt.IsZero()
	})
	uiNow.Store(fireAt.Add(-24 * time.Hour).UnixNano())
	b := s.signIn(s.api.Admin)
	for _, path := range []string{"/instances/" + id, "/instances/" + id + "/live"} {
		body := html.UnescapeString(b.get(path, http.StatusOK))
		want := "times out at " + fireAt.UTC().Format("2006-01-02 15:04:05") + " UTC (in 24h)"
		if !strings.Contains(body, want) || !strings.Contains(body, "Waiting on") {
			t.Fatalf("%s: want %q in\n%s", path, want, body)
		}
	}
}

// TestInstanceBlocked: an instance of a workflow no runtime has
// registered says why it does not run, not "Not waiting for an event".
func TestInstanceBlocked(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	id, err := c.StartWorkflow(s.ctx(), "ghost", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the instance to be blocked", func() bool {
		info, err := c.Status(s.ctx(), id)
		return err == nil && info.Blocked != ""
	})
	b := s.signIn(s.api.Admin)
	for _, path := range []string{"/instances/" + id, "/instances/" + id + "/live"} {
		body := b.get(path, http.StatusOK)
		if !strings.Contains(body, `id="blocked"`) || !strings.Contains(body, "Blocked: no runtime has workflow ghost registered.") ||
			strings.Contains(body, "Not waiting for an event right now") {
			t.Fatalf("%s:\n%s", path, body)
		}
	}
}

var dryRunRe = regexp.MustCompile(`Dry run: succeeded in ([^<]+)</h2>`)

// TestScriptPageTexts: a dry run's duration reads as a duration (it was
// raw nanoseconds); a save refused for its syntax names the script being
// saved (it named it "validate").
func TestScriptPageTexts(t *testing.T) {
	s := newServer(t)
	b := s.signIn(s.api.Admin)
	a := b.post("/scripts/tag-order", url.Values{"csrf": {b.csrf}, "action": {"test"}, "source": {"return {type: ctx.event.type}"},
		"event_type": {"order.created"}, "data": {"{}"}})
	m := dryRunRe.FindStringSubmatch(a.body)
	if a.code != http.StatusOK || m == nil {
		t.Fatalf("dry run: %d\n%s", a.code, a.body)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d <= 0 {
		t.Fatalf("dry run duration %q is not a duration: %v", m[1], err)
	}
	a = b.post("/scripts/tag-order", url.Values{"csrf": {b.csrf}, "action": {"save"}, "source": {"return 1;\n\n  }"}})
	body := html.UnescapeString(a.body)
	if a.code != http.StatusBadRequest || !strings.Contains(body, `Not saved: herald: script "tag-order": `) || strings.Contains(body, "validate") {
		t.Fatalf("refused save: %d\n%s", a.code, body)
	}
	c := s.client(herald.DefaultTenant)
	if _, err := c.Script(s.ctx(), "tag-order", 0); err == nil {
		t.Fatal("the refused script was stored")
	}
}
