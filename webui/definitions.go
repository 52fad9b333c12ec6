package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/internal/timeline"
)

// Event definitions: list, create, edit, delete. A refused definition
// (a *herald.DefinitionInvalidError, or a form field that does not parse)
// is shown next to the form, with the form as the user typed it.

type definitionsData struct {
	Definitions []*herald.EventDefinition
}

func (u *UI) definitionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	if name := strings.TrimSpace(r.URL.Query().Get("name")); name != "" {
		http.Redirect(w, r, "/definitions/"+url.PathEscape(name), http.StatusSeeOther)
		return
	}
	c := s.client
	defs, err := c.ListEventDefinitions(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "definitions", s, &pageData{Title: "Event definitions", Nav: "definitions",
		Data: definitionsData{Definitions: defs}, Notice: r.URL.Query().Get("done")})
}

// definitionForm is the definition page's form, as typed.
type definitionForm struct {
	Name, Schema, Buffer, Retention, MaxPayloadBytes string
	Correlation, DeleteAfterFirst                    bool
	TTL                                              string
	New                                              bool
	UpdatedAt                                        time.Time
	// Reasons are why the last save was refused.
	Reasons []string
}

func formOfDefinition(d *herald.EventDefinition) *definitionForm {
	f := &definitionForm{Name: d.Name, Buffer: d.Buffer, UpdatedAt: d.UpdatedAt}
	if len(d.Schema) > 0 {
		f.Schema = indentJSON(d.Schema)
	}
	if d.Retention > 0 {
		f.Retention = d.Retention.String()
	}
	if d.MaxPayloadBytes > 0 {
		f.MaxPayloadBytes = strconv.Itoa(d.MaxPayloadBytes)
	}
	if d.Correlation != nil {
		f.Correlation, f.DeleteAfterFirst = true, d.Correlation.DeleteAfterFirstCorrelation
		if d.Correlation.TTL > 0 {
			f.TTL = d.Correlation.TTL.String()
		}
	}
	return f
}

// definition parses the form; the reasons are the fields that do not
// parse (empty fields take the defaults).
func (f *definitionForm) definition() (herald.EventDefinition, []string) {
	var reasons []string
	d := herald.EventDefinition{Name: f.Name, Buffer: f.Buffer}
	if s := strings.TrimSpace(f.Schema); s != "" {
		if !json.Valid([]byte(s)) {
			reasons = append(reasons, "schema: not JSON")
		}
		d.Schema = json.RawMessage(s)
	}
	dur := func(field, v string) time.Duration {
		if v = strings.TrimSpace(v); v == "" {
			return 0
		}
		x, err := time.ParseDuration(v)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s %q is not a duration like 24h or 90m", field, v))
		}
		return x
	}
	d.Retention = dur("retention", f.Retention)
	if v := strings.TrimSpace(f.MaxPayloadBytes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("max payload bytes %q is not a whole number", v))
		}
		d.MaxPayloadBytes = n
	}
	if f.Correlation {
		d.Correlation = &heraldtype.CorrelationConfig{TTL: dur("correlation ttl", f.TTL), DeleteAfterFirstCorrelation: f.DeleteAfterFirst}
	}
	return d, reasons
}

func (u *UI) definitionPage(w http.ResponseWriter, r *http.Request, s *session) {
	c := s.client
	name := r.PathValue("name")
	f := &definitionForm{Name: name, Buffer: heraldtype.BufferFIFO, New: true}
	d, err := c.GetEventDefinition(r.Context(), name)
	switch {
	case errors.Is(err, herald.ErrNotFound):
	case err != nil:
		u.errorPage(w, r, s, err)
		return
	default:
		f = formOfDefinition(d)
	}
	u.render(w, r, http.StatusOK, "definition", s, &pageData{Title: "Event definition " + name, Nav: "definitions", Data: f,
		Notice: r.URL.Query().Get("done")})
}

func (u *UI) definitionSave(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	f := &definitionForm{Name: name, Schema: r.PostFormValue("schema"), Buffer: r.PostFormValue("buffer"),
		Retention: r.PostFormValue("retention"), MaxPayloadBytes: r.PostFormValue("max_payload_bytes"),
		Correlation: r.PostFormValue("correlation") == "on", DeleteAfterFirst: r.PostFormValue("delete_after_first") == "on",
		TTL: r.PostFormValue("ttl")}
	pd := &pageData{Title: "Event definition " + name, Nav: "definitions", Data: f}
	c := s.client
	var err error
	if cur, err := c.GetEventDefinition(r.Context(), name); err == nil {
		f.UpdatedAt = cur.UpdatedAt
	} else {
		f.New = true
	}
	def, reasons := f.definition()
	if len(reasons) == 0 {
		_, err = c.PutEventDefinition(r.Context(), def)
		var de *herald.DefinitionInvalidError
		switch {
		case errors.As(err, &de):
			reasons = de.Reasons
		case err != nil:
			u.fail(w, r, err)
			return
		}
	}
	if len(reasons) > 0 {
		f.Reasons = reasons
		pd.Error = "Not saved: the definition was refused (see the reasons by the form)."
		u.render(w, r, http.StatusBadRequest, "definition", s, pd)
		return
	}
	http.Redirect(w, r, withDone("/definitions/"+url.PathEscape(name), "Saved."), http.StatusSeeOther)
}

func (u *UI) definitionDelete(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	back := "/definitions/" + url.PathEscape(name)
	if r.PostFormValue("confirm") != "yes" {
		u.render(w, r, http.StatusOK, "confirm", s, &pageData{Title: "Delete " + name + "?", Nav: "definitions", Data: confirmData{
			Action: r.URL.Path, What: "Delete event definition " + name + "? Events already stored keep their fates; new events of this name are no longer checked against it, and correlated puts of it are refused.",
			Back: back, Confirm: "Delete"}})
		return
	}
	err := s.client.DeleteEventDefinition(r.Context(), name)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	http.Redirect(w, r, withDone("/definitions", "Deleted event definition "+name+"."), http.StatusSeeOther)
}

// Correlated events: search by definition, key and time (and orphans,
// those that reached no instance), one page at a time; an event's page
// with its payload and the events it produced; delete.

type correlatedData struct {
	Def, Key, After, Before, Produced string
	// Defs are the definitions with a correlation config (the choices).
	Defs   []string
	Events []*herald.CorrelatedEvent
	Next   string
	Search bool // a search ran (a definition was chosen)
}

func (u *UI) correlatedPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &correlatedData{Def: strings.TrimSpace(q.Get("def")), Key: q.Get("key"), After: q.Get("after"), Before: q.Get("before"),
		Produced: q.Get("produced")}
	pd := &pageData{Title: "Correlated events", Nav: "correlated", Data: d, Notice: q.Get("done")}
	c := s.client
	defs, err := c.ListEventDefinitions(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	for _, def := range defs {
		if def.Correlation != nil {
			d.Defs = append(d.Defs, def.Name)
		}
	}
	if d.Def == "" {
		u.render(w, r, http.StatusOK, "correlated", s, pd)
		return
	}
	if d.Key != "" {
		http.Redirect(w, r, correlatedURL(d.Def, d.Key), http.StatusSeeOther)
		return
	}
	search := herald.CorrelatedSearch{Limit: pageSize, Bookmark: q.Get("bookmark")}
	var bad []string
	for _, tv := range []struct {
		in  string
		out *time.Time
	}{{d.After, &search.Earliest}, {d.Before, &search.Latest}} {
		if tv.in == "" {
			continue
		}
		t, err := time.Parse(timeForm, tv.in)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q is not a time like 2025-01-31T14:05 (UTC)", tv.in))
		}
		*tv.out = t
	}
	if has, err := timeline.ParseProduced(d.Produced); err != nil {
		bad = append(bad, err.Error())
	} else {
		search.HasCorrelatedEvents = has
	}
	if len(bad) > 0 {
		pd.Error = strings.Join(bad, "; ")
		u.render(w, r, http.StatusBadRequest, "correlated", s, pd)
		return
	}
	evs, next, err := c.SearchCorrelatedEvents(r.Context(), d.Def, search)
	if errors.Is(err, herald.ErrInvalidArgument) {
		pd.Error = err.Error()
		u.render(w, r, http.StatusBadRequest, "correlated", s, pd)
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d.Search, d.Events = true, evs
	if next != "" {
		nq := url.Values{}
		for k, v := range map[string]string{"def": d.Def, "after": d.After, "before": d.Before, "produced": d.Produced, "bookmark": next} {
			if v != "" {
				nq.Set(k, v)
			}
		}
		d.Next = "/correlated?" + nq.Encode()
	}
	u.render(w, r, http.StatusOK, "correlated", s, pd)
}

// correlatedURL is a correlated event's page (query parameters: keys may
// hold any character).
func correlatedURL(def, key string) string {
	return "/correlated/event?" + url.Values{"def": {def}, "key": {key}}.Encode()
}

type correlatedEventData struct {
	Event   *herald.CorrelatedEvent
	Payload string
}

func (u *UI) correlatedEventPage(w http.ResponseWriter, r *http.Request, s *session) {
	c := s.client
	q := r.URL.Query()
	ev, err := c.GetCorrelatedEvent(r.Context(), q.Get("def"), q.Get("key"))
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "correlated_event", s, &pageData{Title: "Correlated event " + ev.Def + " / " + ev.Key,
		Nav: "correlated", Data: &correlatedEventData{Event: ev, Payload: indentJSON(ev.Payload)}})
}

func (u *UI) correlatedDelete(w http.ResponseWriter, r *http.Request, s *session) {
	def, key := r.PostFormValue("def"), r.PostFormValue("key")
	if r.PostFormValue("confirm") != "yes" {
		u.render(w, r, http.StatusOK, "confirm", s, &pageData{Title: "Delete correlated event?", Nav: "correlated", Data: confirmData{
			Action: r.URL.Path, What: fmt.Sprintf("Delete correlated event %s / %s? Events it already produced keep their fates; instances that wait on this key later no longer receive it.", def, key),
			Fields: map[string]string{"def": def, "key": key}, Back: correlatedURL(def, key), Confirm: "Delete"}})
		return
	}
	err := s.client.DeleteCorrelatedEvent(r.Context(), def, key)
	if err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/correlated?"+url.Values{"def": {def}, "done": {"Deleted correlated event " + def + " / " + key + "."}}.Encode(), http.StatusSeeOther)
}
