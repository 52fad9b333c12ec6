package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldwf/herald"
)

// eventData is the event lookup page: the fate and path of one event.
type eventData struct {
	ID     string
	Record *herald.EventRecord
	// Attempts of a bus event's executions (one page).
	Attempts []*herald.Attempt
}

func (u *UI) eventPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	d := &eventData{ID: id}
	pd := &pageData{Title: "Events", Nav: "events", Data: d}
	if id == "" {
		u.render(w, r, http.StatusOK, "event", s, pd)
		return
	}
	c := s.client
	rec, err := c.EventFate(r.Context(), id)
	if errors.Is(err, herald.ErrNotFound) {
		pd.Error = "No event with that id."
		u.render(w, r, http.StatusNotFound, "event", s, pd)
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d.Record = rec
	if rec.Bus != nil {
		if p, err := c.Attempts(r.Context(), herald.AttemptFilter{EventID: id, Limit: pageSize}); err == nil {
			d.Attempts = p.Attempts
		}
	}
	u.render(w, r, http.StatusOK, "event", s, pd)
}

type deadLettersData struct {
	Subscription, EventType, ErrorKind string
	All                                bool
	Letters                            []*herald.DeadLetter
	Next                               string
	Kinds                              []string
}

func (u *UI) deadLetterFilter(q url.Values) (herald.DeadLetterFilter, *deadLettersData) {
	d := &deadLettersData{Subscription: q.Get("subscription"), EventType: q.Get("event_type"), ErrorKind: q.Get("error_kind"),
		All: q.Get("all") == "on", Kinds: []string{"timeout", "runtime", "resource", "permanent", "validation", "permission"}}
	return herald.DeadLetterFilter{Subscription: d.Subscription, EventType: d.EventType, ErrorKind: herald.ErrorKind(d.ErrorKind),
		IncludeReprocessed: d.All}, d
}

func (u *UI) deadLettersPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f, d := u.deadLetterFilter(q)
	f.Limit = pageSize
	if cur := q.Get("cursor"); cur != "" {
		n, err := strconv.ParseInt(cur, 10, 64)
		if err != nil {
			u.errorPage(w, r, s, fmt.Errorf("cursor %q: %w", cur, herald.ErrInvalidArgument))
			return
		}
		f.Cursor = n
	}
	pd := &pageData{Title: "Dead letters", Nav: "dead-letters", Data: d, Notice: q.Get("done")}
	c := s.client
	page, err := c.DeadLetters(r.Context(), f)
	if errors.Is(err, herald.ErrInvalidArgument) {
		pd.Error = err.Error()
		u.render(w, r, http.StatusBadRequest, "dead_letters", s, pd)
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d.Letters = page.Letters
	if page.NextCursor != 0 {
		nq := url.Values{}
		for k, v := range q {
			if k != "cursor" && k != "done" {
				nq[k] = v
			}
		}
		nq.Set("cursor", strconv.FormatInt(page.NextCursor, 10))
		d.Next = "/dead-letters?" + nq.Encode()
	}
	u.render(w, r, http.StatusOK, "dead_letters", s, pd)
}

type deadLetterData struct {
	Letter    *herald.DeadLetter
	Payload   string
	Execution *herald.Execution // the execution now (after a reprocess: its outcome)
	Attempts  []*herald.Attempt
}

func (u *UI) deadLetterPage(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		u.errorPage(w, r, s, herald.ErrNotFound)
		return
	}
	c := s.client
	dl, err := c.DeadLetterByID(r.Context(), id)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	d := &deadLetterData{Letter: dl, Payload: indentJSON(dl.EventData)}
	if ev, err := c.PublishedEvent(r.Context(), dl.EventID); err == nil {
		for _, rt := range ev.Routes {
			if rt.Execution != nil && rt.Execution.ID == dl.Execution {
				d.Execution = rt.Execution
			}
		}
	}
	if p, err := c.Attempts(r.Context(), herald.AttemptFilter{Execution: dl.Execution, Limit: pageSize}); err == nil {
		d.Attempts = p.Attempts
	}
	u.render(w, r, http.StatusOK, "dead_letter", s, &pageData{Title: fmt.Sprintf("Dead letter %d", id), Nav: "dead-letters",
		Data: d, Notice: r.URL.Query().Get("done")})
}

// deadLettersAct reprocesses or deletes the letters the form names (its
// checked ids), after a confirmation page.
func (u *UI) deadLettersAct(w http.ResponseWriter, r *http.Request, s *session) {
	reprocess := strings.HasSuffix(r.URL.Path, "/reprocess")
	var ids []int64
	var raw []string
	for _, v := range r.PostForm["id"] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			u.errorPage(w, r, s, fmt.Errorf("dead letter id %q: %w", v, herald.ErrInvalidArgument))
			return
		}
		ids = append(ids, n)
		raw = append(raw, v)
	}
	back := r.PostFormValue("back")
	back = safeNext(back)
	if len(ids) == 0 {
		http.Redirect(w, r, withDone(back, "Nothing selected."), http.StatusSeeOther)
		return
	}
	if len(ids) > herald.MaxListLimit {
		u.errorPage(w, r, s, fmt.Errorf("%d letters selected, at most %d: %w", len(ids), herald.MaxListLimit, herald.ErrInvalidArgument))
		return
	}
	verb := "Delete"
	if reprocess {
		verb = "Reprocess"
	}
	if r.PostFormValue("confirm") != "yes" {
		what := fmt.Sprintf("%s %d dead letter(s): %s?", verb, len(ids), strings.Join(raw, ", "))
		if !reprocess {
			what += " Their executions stay dead-lettered."
		}
		u.render(w, r, http.StatusOK, "confirm", s, &pageData{Title: verb + " dead letters?", Nav: "dead-letters", Data: confirmData{
			Action: r.URL.Path, What: what, IDs: raw, Fields: map[string]string{"back": back}, Back: back, Confirm: verb}})
		return
	}
	c := s.client
	var err error
	f := herald.DeadLetterFilter{IDs: ids}
	var n int
	if reprocess {
		n, err = c.ReprocessDeadLetters(r.Context(), f)
	} else {
		n, err = c.DeleteDeadLetters(r.Context(), f)
	}
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	if !reprocess && strings.HasPrefix(back, "/dead-letters/") {
		back = "/dead-letters"
	}
	http.Redirect(w, r, withDone(back, fmt.Sprintf("%sed %d dead letter(s).", strings.TrimSuffix(strings.ToLower(verb), "e"), n)), http.StatusSeeOther)
}

func withDone(path, msg string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "done=" + url.QueryEscape(msg)
}

// indentJSON indents raw as it is (no re-encoding: the text shown is the
// stored text; the templates escape it); raw that is not JSON is shown
// as is.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

type scriptsData struct {
	Scripts []*herald.Script
}

func (u *UI) scriptsPage(w http.ResponseWriter, r *http.Request, s *session) {
	if id := strings.TrimSpace(r.URL.Query().Get("id")); id != "" {
		http.Redirect(w, r, "/scripts/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	c := s.client
	scripts, err := c.Scripts(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "scripts", s, &pageData{Title: "Scripts", Nav: "scripts", Data: scriptsData{Scripts: scripts}})
}

type scriptData struct {
	ID, Source      string
	Version         int
	New             bool
	EventType, Data string
	Test            *herald.ScriptTestResult
	TestResult      string
}

func (u *UI) scriptPage(w http.ResponseWriter, r *http.Request, s *session) {
	c := s.client
	id := r.PathValue("id")
	d := &scriptData{ID: id, EventType: "sample.event", Data: "{}"}
	sc, err := c.Script(r.Context(), id, 0)
	switch {
	case errors.Is(err, herald.ErrNotFound):
		d.New = true
	case err != nil:
		u.errorPage(w, r, s, err)
		return
	default:
		d.Source, d.Version = sc.Source, sc.Version
	}
	u.render(w, r, http.StatusOK, "script", s, &pageData{Title: "Script " + id, Nav: "scripts", Data: d,
		Notice: r.URL.Query().Get("done")})
}

// scriptSave saves (action=save: refused with the syntax error, which
// names this script) or dry-runs (action=test: against the sample event, nothing
// stored) the script in the form.
func (u *UI) scriptSave(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := &scriptData{ID: id, Source: r.PostFormValue("source"), EventType: strings.TrimSpace(r.PostFormValue("event_type")),
		Data: strings.TrimSpace(r.PostFormValue("data"))}
	pd := &pageData{Title: "Script " + id, Nav: "scripts", Data: d}
	c := s.client
	if cur, err := c.Script(r.Context(), id, 0); err == nil {
		d.Version = cur.Version
	} else {
		d.New = true
	}
	if r.PostFormValue("action") == "test" {
		data := d.Data
		if data == "" {
			data = "null"
		}
		if !json.Valid([]byte(data)) {
			pd.Error = "The sample event's data is not JSON."
			u.render(w, r, http.StatusBadRequest, "script", s, pd)
			return
		}
		res, err := u.rt.TestScript(r.Context(), s.tenant, herald.ScriptTest{Name: id, Source: d.Source,
			Event: herald.BusEvent{Type: d.EventType, Data: json.RawMessage(data), Timestamp: u.now().UTC()}, Timeout: 10 * time.Second})
		if err != nil {
			pd.Error = "Dry run refused: " + err.Error()
			u.render(w, r, http.StatusBadRequest, "script", s, pd)
			return
		}
		d.Test, d.TestResult = res, indentJSON(res.Result)
		u.render(w, r, http.StatusOK, "script", s, pd)
		return
	}
	// PutScript checks the source as it stores it, naming the script
	// (ValidateScript, the API's /v1/scripts/validate, knows no id and
	// named the script "validate").
	sc, err := c.PutScript(r.Context(), id, d.Source)
	if err != nil {
		if errors.Is(err, herald.ErrInvalidArgument) || errors.Is(err, herald.ErrNotFound) {
			pd.Error = "Not saved: " + err.Error()
			u.render(w, r, http.StatusBadRequest, "script", s, pd)
			return
		}
		var se *herald.ScriptSyntaxError
		if errors.As(err, &se) {
			pd.Error = "Not saved: " + err.Error()
			u.render(w, r, http.StatusBadRequest, "script", s, pd)
			return
		}
		u.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/scripts/"+url.PathEscape(id)+"?done="+url.QueryEscape(fmt.Sprintf("Saved version %d.", sc.Version)), http.StatusSeeOther)
}

type subscriptionsData struct {
	Subscriptions []*herald.Subscription
}

func (u *UI) subscriptionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	if id := strings.TrimSpace(r.URL.Query().Get("id")); id != "" {
		http.Redirect(w, r, "/subscriptions/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	c := s.client
	subs, err := c.Subscriptions(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "subscriptions", s, &pageData{Title: "Subscriptions", Nav: "subscriptions",
		Data: subscriptionsData{Subscriptions: subs}, Notice: r.URL.Query().Get("done")})
}

func (u *UI) subscriptionEnable(w http.ResponseWriter, r *http.Request, s *session) {
	c := s.client
	enabled := r.PostFormValue("enabled") == "true"
	sub, err := c.SetSubscriptionEnabled(r.Context(), r.PathValue("id"), enabled)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	state := "disabled"
	if sub.Enabled {
		state = "enabled"
	}
	http.Redirect(w, r, withDone("/subscriptions", fmt.Sprintf("Subscription %s %s.", sub.ID, state)), http.StatusSeeOther)
}
