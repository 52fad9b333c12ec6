package webui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/signing"
	"github.com/heraldwf/herald/history"
)

// chromiumEnv names the browser the tests drive (default: chromium on
// PATH, then /usr/bin/chromium).
const chromiumEnv = "HERALD_CHROMIUM"

// screenshotsEnv set to 1 makes the browser tests write docs/screenshots.
const screenshotsEnv = "HERALD_UPDATE_SCREENSHOTS"

// chromium returns the browser's path. Without one the browser tests fail
// under CI=true and skip loudly otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv(chromiumEnv), "chromium", "/usr/bin/chromium", "chromium-browser", "google-chrome"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("no chromium found (install the chromium package or set %s) and CI=true: the browser tests must run, not skip", chromiumEnv)
	}
	fmt.Fprintf(os.Stderr, "\n*** no chromium found: the web UI's BROWSER TESTS ARE SKIPPED (install chromium or set %s) ***\n\n", chromiumEnv)
	t.Skip("no chromium: browser tests skipped")
	return ""
}

// browser starts headless chromium for the test and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // containers run tests as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitText waits until the element sel's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) string {
	t.Helper()
	var got string
	deadline := time.Now().Add(30 * time.Second)
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := chromedp.Run(tctx, chromedp.Text(sel, &got, chromedp.ByQuery))
		cancel()
		if err == nil && strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want text containing %q, have %q (err %v)", sel, want, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot saves the page to docs/screenshots/name.png when
// HERALD_UPDATE_SCREENSHOTS=1.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	var buf []byte
	run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(&buf, 100))
	path := filepath.Join("..", "docs", "screenshots", name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// signInBrowser signs in at the UI served at base (http://host:port).
func signInBrowser(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#key", chromedp.ByQuery),
		chromedp.SendKeys("#key", key, chromedp.ByQuery),
		chromedp.Submit("#key", chromedp.ByQuery),
		chromedp.WaitVisible("#signout", chromedp.ByQuery),
	)
}

// The browser tests: one server and one browser, signed in with the admin
// key on the default tenant, then tenant alpha's key.
func TestBrowser(t *testing.T) {
	s := newServer(t)
	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, s.api.Admin)
	c := s.client(herald.DefaultTenant)

	t.Run("timeline updates live", func(t *testing.T) {
		id, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "standing desk", Amount: 640,
			Deadline: herald.Duration(time.Hour), Escalation: herald.Duration(time.Second)}, herald.WithInstanceID("order-1"))
		if err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "open the instance", chromedp.Navigate(s.URL+"/instances?id="+id))
		wait := waitText(t, ctx, "#wait", "Waiting on")
		if !strings.Contains(wait, "decision") || !strings.Contains(wait, "wait #1") || !strings.Contains(wait, "times out at") {
			t.Fatalf("wait line %q: want decision, wait #1 and its timeout", wait)
		}
		waitText(t, ctx, "#timeline", "EventSubscribed")
		// The decision arrives while the page is open: the page shows it
		// without a reload.
		if _, err := c.RaiseEvent(s.ctx(), id, "decision", approval.Decision{Approved: true, By: "alice"}, herald.WithEventID("order-1/decision")); err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, "#status", "completed")
		waitText(t, ctx, "#timeline", "ExecutionCompleted")
		waitText(t, ctx, "#events", "delivered to wait #1 of execution 1")
		// The actions panel goes with the refresh that says it ended.
		waitText(t, ctx, "#ended", "has ended")
		run(t, ctx, "the actions hide", chromedp.WaitNotVisible("#actions", chromedp.ByQuery))
		screenshot(t, ctx, "instance-timeline")
	})

	t.Run("withdrawn-wait drop and its reason", func(t *testing.T) {
		// cmd/herald/demo.go's order-3: the deadline wins, the wait is
		// withdrawn; a late decision answers the withdrawn question.
		id, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "desk", Amount: 800,
			Deadline: herald.Duration(300 * time.Millisecond), Escalation: herald.Duration(3 * time.Second)}, herald.WithInstanceID("order-3"))
		if err != nil {
			t.Fatal(err)
		}
		waitHistory(t, s, c, id, history.EventSubscribedCancelled)
		if _, err := c.RaiseEvent(s.ctx(), id, "decision", approval.Decision{Approved: false, By: "late-dave"}, herald.WithEventID("order-3/late")); err != nil {
			t.Fatal(err)
		}
		waitHistory(t, s, c, id, history.EventDropped)
		run(t, ctx, "open order-3", chromedp.Navigate(s.URL+"/instances/"+id))
		row := waitText(t, ctx, "#events", "order-3/late")
		if !strings.Contains(row, "dropped") || !strings.Contains(row, "withdrawn_wait") {
			t.Fatalf("events table %q: want order-3/late dropped with reason withdrawn_wait", row)
		}
		waitText(t, ctx, "#timeline", "dropped: withdrawn_wait")
		// The event page says the same.
		run(t, ctx, "look up the event", chromedp.Navigate(s.URL+"/events?id=order-3/late"))
		waitText(t, ctx, "#fate", "withdrawn_wait")
		if _, err := c.RaiseEvent(s.ctx(), id, "decision", approval.Decision{Approved: true, By: "carol"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fix a script and reprocess its dead letter", func(t *testing.T) {
		if _, err := c.PutScript(s.ctx(), "fraud-check", `throw new Error("fraud service unreachable: " + ctx.event.data.order_id);`); err != nil {
			t.Fatal(err)
		}
		zero := 0
		if _, err := c.PutSubscription(s.ctx(), herald.Subscription{ID: "fraud", Pattern: "order.*", Enabled: true, MaxRetries: &zero,
			Target: herald.Target{Kind: herald.TargetScript, Script: "fraud-check"}}); err != nil {
			t.Fatal(err)
		}
		pub, err := c.Publish(s.ctx(), "order.paid", map[string]any{"order_id": "A-1001", "amount": 1200})
		if err != nil {
			t.Fatal(err)
		}
		var letter int64
		eventually(t, "the dead letter", func() bool {
			p, err := c.DeadLetters(s.ctx(), herald.DeadLetterFilter{})
			if err != nil || len(p.Letters) == 0 {
				return false
			}
			letter = p.Letters[0].ID
			return true
		})
		run(t, ctx, "dead letters", chromedp.Navigate(s.URL+"/dead-letters"))
		waitText(t, ctx, "#dead-letters", "fraud service unreachable")
		run(t, ctx, "inspect", chromedp.Click(fmt.Sprintf(`a[href="/dead-letters/%d"]`, letter), chromedp.ByQuery))
		waitText(t, ctx, "#error", "fraud service unreachable: A-1001")
		waitText(t, ctx, "#payload", "A-1001")
		waitText(t, ctx, "#stack", "fraud-check")
		screenshot(t, ctx, "dead-letter-review")

		// Edit the script: a syntax error is refused on save.
		run(t, ctx, "edit the script", chromedp.Click("#edit-script", chromedp.ByQuery), chromedp.WaitVisible("#source", chromedp.ByQuery),
			chromedp.SetValue("#source", `return {checked: ctx.event.data.order_id`, chromedp.ByQuery),
			chromedp.Click("#save", chromedp.ByQuery))
		waitText(t, ctx, ".error", "Not saved")
		// A dry run of the fix against a sample event shows its result.
		fixed := `log("checked", ctx.event.data.order_id); return {checked: ctx.event.data.order_id};`
		run(t, ctx, "dry-run the fix", chromedp.SetValue("#source", fixed, chromedp.ByQuery),
			chromedp.SetValue(`textarea[name="data"]`, `{"order_id":"SAMPLE-1"}`, chromedp.ByQuery),
			chromedp.Click("#dry-run", chromedp.ByQuery))
		waitText(t, ctx, "#test-result", "SAMPLE-1")
		waitText(t, ctx, "#test-result", "succeeded")
		run(t, ctx, "save the fix", chromedp.Click("#save", chromedp.ByQuery))
		waitText(t, ctx, ".notice", "Saved version 2")

		// Reprocess from the dead letter's page, with confirmation.
		run(t, ctx, "reprocess", chromedp.Navigate(fmt.Sprintf("%s/dead-letters/%d", s.URL, letter)),
			chromedp.Click("#reprocess button", chromedp.ByQuery),
			chromedp.WaitVisible("#confirm-yes", chromedp.ByQuery),
			chromedp.Click("#confirm-yes", chromedp.ByQuery))
		waitText(t, ctx, ".notice", "1 dead letter")
		deadline := time.Now().Add(30 * time.Second)
		for {
			var out string
			run(t, ctx, "reload", chromedp.Reload(), chromedp.Text("#outcome", &out, chromedp.ByQuery))
			if strings.Contains(out, "succeeded") {
				if !strings.Contains(out, "A-1001") {
					t.Fatalf("outcome %q: want the fixed script's result", out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reprocessed execution did not succeed: %q", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The event's path: its subscription and execution.
		run(t, ctx, "event path", chromedp.Navigate(s.URL+"/events?id="+pub.EventID))
		waitText(t, ctx, "#routes", "fraud")
		waitText(t, ctx, "#routes", "succeeded")
	})

	t.Run("define an event and search its correlated events", func(t *testing.T) {
		run(t, ctx, "open a new definition", chromedp.Navigate(s.URL+"/definitions"),
			chromedp.SendKeys(`#new-definition input[name="name"]`, signing.DocumentSigned, chromedp.ByQuery),
			chromedp.Submit(`#new-definition input[name="name"]`, chromedp.ByQuery),
			chromedp.WaitVisible("#schema", chromedp.ByQuery))
		// A schema that is not a JSON Schema: refused, the reason by the
		// form, the input kept.
		run(t, ctx, "save a bad schema", chromedp.SetValue("#schema", `{"type": "documnet"}`, chromedp.ByQuery),
			chromedp.Click("#correlation", chromedp.ByQuery),
			chromedp.SetValue("#ttl", "72h", chromedp.ByQuery),
			chromedp.Click("#save", chromedp.ByQuery))
		waitText(t, ctx, "#reasons", "schema:")
		var kept string
		run(t, ctx, "read the form", chromedp.Value("#schema", &kept, chromedp.ByQuery))
		if !strings.Contains(kept, "documnet") {
			t.Fatalf("the refused form lost the schema: %q", kept)
		}
		run(t, ctx, "fix and save", chromedp.SetValue("#schema", `{"type": "object", "required": ["signed_by"]}`, chromedp.ByQuery),
			chromedp.Click("#save", chromedp.ByQuery))
		waitText(t, ctx, ".notice", "Saved.")
		// One put reaches a waiting instance, one reaches none (an orphan).
		if _, err := c.StartWorkflow(s.ctx(), "onboard", signing.Request{Party: "ann", Document: "contract-7", Deadline: herald.Duration(time.Hour)},
			herald.WithInstanceID("onboard-ann")); err != nil {
			t.Fatal(err)
		}
		for _, doc := range []string{"contract-7", "contract-8"} {
			if _, err := c.PutCorrelatedEvent(s.ctx(), signing.DocumentSigned, doc, signing.Signed{Document: doc, SignedBy: "ann"}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "contract-7 to reach onboard-ann", func() bool {
			ce, err := c.GetCorrelatedEvent(s.ctx(), signing.DocumentSigned, "contract-7")
			return err == nil && len(ce.Produced) > 0
		})
		run(t, ctx, "search orphans", chromedp.Click("#search-correlated", chromedp.ByQuery),
			chromedp.WaitVisible("#correlated", chromedp.ByQuery),
			chromedp.SetValue("#produced", "no", chromedp.ByQuery),
			chromedp.Submit("#produced", chromedp.ByQuery))
		orphans := waitText(t, ctx, "#correlated", "contract-8")
		if strings.Contains(orphans, "contract-7") {
			t.Fatalf("orphans %q list contract-7, which reached an instance", orphans)
		}
		run(t, ctx, "all, then contract-7", chromedp.SetValue("#produced", "", chromedp.ByQuery), chromedp.Submit("#produced", chromedp.ByQuery))
		waitText(t, ctx, "#correlated", "contract-7")
		run(t, ctx, "open contract-7", chromedp.Click(`#correlated a`, chromedp.ByQuery))
		waitText(t, ctx, "#produced", "onboard-ann")
		waitText(t, ctx, "#payload", "signed_by")
		screenshot(t, ctx, "correlated-event")
		// Delete the orphan, with confirmation.
		run(t, ctx, "delete contract-8", chromedp.Navigate(s.URL+"/correlated/event?def="+signing.DocumentSigned+"&key=contract-8"),
			chromedp.Click("#delete button", chromedp.ByQuery),
			chromedp.WaitVisible("#confirm-yes", chromedp.ByQuery),
			chromedp.Click("#confirm-yes", chromedp.ByQuery))
		waitText(t, ctx, ".notice", "Deleted correlated event")
		if _, err := c.GetCorrelatedEvent(s.ctx(), signing.DocumentSigned, "contract-8"); err == nil {
			t.Fatal("contract-8 still there after the delete")
		}
	})

	t.Run("overview", func(t *testing.T) {
		run(t, ctx, "overview", chromedp.Navigate(s.URL+"/"))
		// The page's numbers are /metrics' numbers.
		// (sampled at most every 2 seconds: the page catches up by itself)
		want := gathered(t, s, "herald_events_accepted_total", herald.DefaultTenant)
		if want == 0 {
			t.Fatal("no accepted events in /metrics")
		}
		waitText(t, ctx, `#overview tr[data-key="accepted"] td.total`, strconv.FormatFloat(want, 'f', -1, 64))
		// It refreshes by itself.
		before := waitText(t, ctx, "#overview .hint", "sampled")
		if _, err := c.Publish(s.ctx(), "order.paid", map[string]any{"order_id": "A-1002"}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the overview to refresh", func() bool {
			var now string
			chromedp.Run(ctx, chromedp.Text("#overview .hint", &now, chromedp.ByQuery))
			return now != before
		})
		waitText(t, ctx, `#overview tr[data-key="published"] td.total`, "2")
		screenshot(t, ctx, "overview")
	})

	t.Run("cross-tenant URLs show nothing", func(t *testing.T) {
		cb := s.client("beta")
		if _, err := cb.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "beta-secret-item", Deadline: herald.Duration(time.Hour)},
			herald.WithInstanceID("beta-1")); err != nil {
			t.Fatal(err)
		}
		rec, err := cb.RaiseEvent(s.ctx(), "beta-1", "note", map[string]string{"text": "beta-secret-note"})
		if err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "sign out", chromedp.Click("#signout", chromedp.ByQuery), chromedp.WaitVisible("#key", chromedp.ByQuery))
		_, alpha := s.key("alpha")
		signInBrowser(t, ctx, s.URL, alpha)
		waitText(t, ctx, "#tenant", "alpha")
		for _, path := range []string{"/instances/beta-1", "/events?id=" + rec.EventID, "/instances?workflow=approval"} {
			var body string
			run(t, ctx, path, chromedp.Navigate(s.URL+path), chromedp.Text("main", &body, chromedp.ByQuery))
			if strings.Contains(body, "beta-secret") || strings.Contains(body, "beta-1") {
				t.Fatalf("%s with alpha's session shows beta's data: %q", path, body)
			}
			if path != "/instances?workflow=approval" && !strings.Contains(body, "Not found") && !strings.Contains(body, "No event with that id") {
				t.Fatalf("%s with alpha's session: %q, want not found", path, body)
			}
		}
	})
}

func waitHistory(t *testing.T, s *server, c *herald.Client, id string, kind history.Kind) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s in %s's history", kind, id), func() bool {
		evs, err := c.History(s.ctx(), id, 0)
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Kind == kind {
				return true
			}
		}
		return false
	})
}

// gathered sums the metric's series of tenant in the registry /metrics
// serves.
func gathered(t *testing.T, s *server, name, tenant string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if labelOf(m, "tenant") == tenant {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.Label {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
