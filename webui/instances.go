package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/timeline"
)

// timeForm is the layout of the time-range inputs (datetime-local, UTC).
const timeForm = "2006-01-02T15:04"

type instancesData struct {
	Workflow, Status, After, Before string
	Statuses                        []string
	Instances                       []*herald.InstanceInfo
	Next                            string // the next page's URL, "" on the last
}

func (u *UI) instancesPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, "/instances/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	d := &instancesData{Workflow: q.Get("workflow"), Status: q.Get("status"), After: q.Get("after"), Before: q.Get("before"),
		Statuses: []string{"pending", "running", "completed", "failed", "terminated", "canceled"}}
	f := herald.InstanceFilter{Workflow: d.Workflow, Status: herald.Status(d.Status), Limit: pageSize, Cursor: q.Get("cursor")}
	var bad []string
	for _, tv := range []struct {
		in  string
		out *time.Time
	}{{d.After, &f.CreatedAfter}, {d.Before, &f.CreatedBefore}} {
		if tv.in == "" {
			continue
		}
		t, err := time.Parse(timeForm, tv.in)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q is not a time like 2025-01-31T14:05 (UTC)", tv.in))
		}
		*tv.out = t
	}
	pd := &pageData{Title: "Instances", Nav: "instances", Data: d}
	if len(bad) > 0 {
		pd.Error = strings.Join(bad, "; ")
		u.render(w, r, http.StatusBadRequest, "instances", s, pd)
		return
	}
	c := s.client
	page, err := c.ListInstances(r.Context(), f)
	if errors.Is(err, herald.ErrInvalidArgument) {
		pd.Error = err.Error()
		u.render(w, r, http.StatusBadRequest, "instances", s, pd)
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d.Instances = page.Instances
	if page.Next != "" {
		nq := url.Values{}
		for k, v := range map[string]string{"workflow": d.Workflow, "status": d.Status, "after": d.After, "before": d.Before, "cursor": page.Next} {
			if v != "" {
				nq.Set(k, v)
			}
		}
		d.Next = "/instances?" + nq.Encode()
	}
	u.render(w, r, http.StatusOK, "instances", s, pd)
}

// instanceData is the instance page: the timeline and what it waits for.
type instanceData struct {
	In      *timeline.Instance
	Info    *herald.InstanceInfo
	Running bool
	Wait    *waitInfo
	Lines   [][]timelineLine // per execution
	Events  []eventLine
	Pending []eventLine // buffered and pending
	// Form echo after a refused action.
	Lane, Name, Payload string
}

type timelineLine struct {
	Offset  string
	Seq     int
	Kind    string
	Text    string
	Time    time.Time
	Dropped bool
	Carried bool
}

type eventLine struct {
	ID, Lane, Name, Fate, Reason, Text string
	Execution, Wait                    int
}

// waitInfo is what a running instance waits for now.
type waitInfo struct {
	Lane       string
	Name       string
	Key        string
	WaitNumber int
	Since      time.Time
	TimesOut   time.Time // zero: no timer raced against it
	Queue      bool
	// SinceText and TimesOutText ("" without a timer) are Since and
	// TimesOut as the page shows them: with the date unless today, and how
	// far from now (a 24 h timeout is tomorrow, not today's time of day).
	SinceText, TimesOutText string
}

func (u *UI) loadInstance(r *http.Request, s *session) (*instanceData, error) {
	c := s.client
	id := r.PathValue("id")
	info, err := c.Status(r.Context(), id)
	if err != nil {
		return nil, err
	}
	in, err := timeline.Load(r.Context(), c, id)
	if err != nil {
		return nil, err
	}
	d := &instanceData{In: in, Info: info, Running: !info.Status.Terminal()}
	var t0 time.Time
	for i, evs := range in.Executions {
		var lines []timelineLine
		for _, ev := range evs {
			if t0.IsZero() {
				t0 = ev.Time
			}
			dropped := ev.Kind == history.EventDropped || (ev.Kind == history.EventSubscribedCancelled && ev.Reason != "")
			carried := ev.Kind == history.EventRaised && ev.AtStart && ev.OriginExecution > 0 && ev.OriginExecution != i+1
			lines = append(lines, timelineLine{Offset: fmt.Sprintf("%+.3fs", ev.Time.Sub(t0).Seconds()), Seq: ev.Seq,
				Kind: string(ev.Kind), Text: timeline.Describe(ev, i+1), Time: ev.Time, Dropped: dropped, Carried: carried})
		}
		d.Lines = append(d.Lines, lines)
	}
	for _, e := range in.Events {
		l := eventLine{ID: e.ID, Lane: string(e.Lane), Name: e.Name, Fate: string(e.Fate), Reason: string(e.Reason),
			Text: timeline.Fate(e), Execution: e.Execution, Wait: e.WaitNumber}
		d.Events = append(d.Events, l)
		if e.Fate == history.FateBuffered || e.Fate == history.FatePending {
			d.Pending = append(d.Pending, l)
		}
	}
	if d.Running && len(in.Executions) > 0 {
		if d.Wait = currentWait(in.Executions[len(in.Executions)-1]); d.Wait != nil {
			now := u.now()
			d.Wait.SinceText = formatWhen(d.Wait.Since, now)
			if !d.Wait.TimesOut.IsZero() {
				d.Wait.TimesOutText = formatWhen(d.Wait.TimesOut, now)
			}
		}
	}
	return d, nil
}

// currentWait derives from an execution's history what it waits for now:
// the latest EventSubscribed that blocks (not a TryDequeue, not satisfied
// at once) with neither a delivery (an EventRaised naming it) nor a
// withdrawal (EventSubscribedCancelled) after it, and the earliest timer
// still open (created, neither fired nor cancelled) that races it. Nil
// when nothing is waited for.
func currentWait(evs []history.Event) *waitInfo {
	closed := map[int]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case history.EventRaised, history.EventSubscribedCancelled, history.TimerFired, history.TimerCancelled:
			if ev.TaskSeq > 0 {
				closed[ev.TaskSeq] = true
			}
		}
	}
	var wait *history.Event
	var timer *history.Event
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case history.EventSubscribed:
			if !ev.NoWait && ev.EventID == "" && !closed[ev.Seq] {
				wait = ev
			}
		case history.TimerCreated:
			if !closed[ev.Seq] && (timer == nil || ev.FireAt.Before(timer.FireAt)) {
				timer = ev
			}
		}
	}
	if wait == nil {
		return nil
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribed && ev.Lane == wait.Lane && ev.Name == wait.Name && !ev.NoWait && ev.Seq <= wait.Seq {
			n++
		}
	}
	wi := &waitInfo{Lane: string(wait.Lane), Name: wait.Name, Key: wait.Key, WaitNumber: n, Since: wait.Time,
		Queue: wait.Lane == history.LaneQueue}
	if wi.Lane == "" {
		wi.Lane = string(history.LanePositional)
	}
	if timer != nil {
		wi.TimesOut = timer.FireAt
	}
	return wi
}

func (u *UI) instancePage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := u.loadInstance(r, s)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "instance", s, &pageData{Title: "Instance " + d.In.ID, Nav: "instances", Data: d,
		Notice: r.URL.Query().Get("done")})
}

// instanceLive is the part of the instance page the page polls while the
// instance runs.
func (u *UI) instanceLive(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := u.loadInstance(r, s)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "instance_live", s, &pageData{Data: d})
}

// instanceSend raises or enqueues an event (the path says which).
func (u *UI) instanceSend(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	c := s.client
	var err error
	name := strings.TrimSpace(r.PostFormValue("name"))
	raw := strings.TrimSpace(r.PostFormValue("payload"))
	if raw == "" {
		raw = "null"
	}
	enqueue := strings.HasSuffix(r.URL.Path, "/enqueue")
	var rec *herald.EventReceipt
	if !json.Valid([]byte(raw)) {
		err = fmt.Errorf("the payload is not JSON: %w", herald.ErrEventInvalid)
	} else if enqueue {
		rec, err = c.Enqueue(r.Context(), id, name, json.RawMessage(raw))
	} else {
		rec, err = c.RaiseEvent(r.Context(), id, name, json.RawMessage(raw))
	}
	if err != nil {
		d, lerr := u.loadInstance(r, s)
		if lerr != nil {
			u.errorPage(w, r, s, lerr)
			return
		}
		d.Name, d.Payload = name, raw
		u.render(w, r, http.StatusBadRequest, "instance", s, &pageData{Title: "Instance " + id, Nav: "instances", Data: d,
			Error: "Not sent: " + err.Error()})
		return
	}
	what := "raised"
	if enqueue {
		what = "enqueued"
	}
	http.Redirect(w, r, "/instances/"+url.PathEscape(id)+"?done="+url.QueryEscape(fmt.Sprintf("Event %s %s.", rec.EventID, what)), http.StatusSeeOther)
}

type confirmData struct {
	Action  string
	What    string
	Fields  map[string]string
	IDs     []string
	Back    string
	Confirm string
}

// instanceTerminate terminates after a confirmation page.
func (u *UI) instanceTerminate(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	reason := r.PostFormValue("reason")
	if r.PostFormValue("confirm") != "yes" {
		u.render(w, r, http.StatusOK, "confirm", s, &pageData{Title: "Terminate " + id + "?", Nav: "instances", Data: confirmData{
			Action: r.URL.Path, What: "Terminate instance " + id + "? Every event still pending or buffered for it is dropped.",
			Fields: map[string]string{"reason": reason}, Back: "/instances/" + url.PathEscape(id), Confirm: "Terminate"}})
		return
	}
	err := s.client.Terminate(r.Context(), id, reason)
	if errors.Is(err, herald.ErrInstanceNotRunning) {
		http.Redirect(w, r, "/instances/"+url.PathEscape(id)+"?done="+url.QueryEscape("It had ended already."), http.StatusSeeOther)
		return
	}
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/instances/"+url.PathEscape(id)+"?done="+url.QueryEscape("Terminated."), http.StatusSeeOther)
}
