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
)

// Subscriptions: create and edit (besides enable/disable on the list). A
// refused subscription (a *herald.SubscriptionInvalidError, or a form field
// that does not parse) is shown next to the form, with the form as the
// user typed it.

// subscriptionForm is the subscription page's form, as typed.
type subscriptionForm struct {
	ID, Pattern, Filter, Kind                        string
	Script, Workflow, InstanceID, Name, Key, Handler string
	MaxRetries, Timeout                              string
	Enabled, New                                     bool
	Version                                          int
	Kinds                                            []string
	Reasons                                          []string
}

var targetKinds = []string{string(herald.TargetScript), string(herald.TargetWorkflow), string(herald.TargetSignal),
	string(herald.TargetEnqueue), string(herald.TargetCorrelated), string(herald.TargetHandler)}

func formOfSubscription(s *herald.Subscription) *subscriptionForm {
	f := &subscriptionForm{ID: s.ID, Pattern: s.Pattern, Kind: string(s.Target.Kind), Script: s.Target.Script,
		Workflow: s.Target.Workflow, InstanceID: s.Target.InstanceID, Name: s.Target.Name, Key: s.Target.Key,
		Handler: s.Target.Handler, Enabled: s.Enabled, Version: s.Version, Kinds: targetKinds}
	if len(s.Filter) > 0 {
		f.Filter = indentJSON(s.Filter)
	}
	if s.MaxRetries != nil {
		f.MaxRetries = strconv.Itoa(*s.MaxRetries)
	}
	if s.Timeout > 0 {
		f.Timeout = time.Duration(s.Timeout).String()
	}
	return f
}

func subscriptionFormOf(r *http.Request, id string) *subscriptionForm {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	return &subscriptionForm{ID: id, Pattern: v("pattern"), Filter: r.PostFormValue("filter"), Kind: v("kind"),
		Script: v("script"), Workflow: v("workflow"), InstanceID: v("instance_id"), Name: v("name"), Key: v("key"),
		Handler: v("handler"), MaxRetries: v("max_retries"), Timeout: v("timeout"), Enabled: r.PostFormValue("enabled") == "on",
		Kinds: targetKinds}
}

// subscription parses the form; the reasons are the fields that do not
// parse. Only the target fields of the chosen kind are kept (the form
// shows them all).
func (f *subscriptionForm) subscription() (herald.Subscription, []string) {
	var reasons []string
	s := herald.Subscription{ID: f.ID, Pattern: f.Pattern, Enabled: f.Enabled, Target: herald.Target{Kind: herald.TargetKind(f.Kind)}}
	if v := strings.TrimSpace(f.Filter); v != "" {
		if !json.Valid([]byte(v)) {
			reasons = append(reasons, "filter: not JSON")
		}
		s.Filter = json.RawMessage(v)
	}
	switch s.Target.Kind {
	case herald.TargetScript:
		s.Target.Script = f.Script
	case herald.TargetWorkflow:
		s.Target.Workflow, s.Target.InstanceID = f.Workflow, f.InstanceID
	case herald.TargetSignal, herald.TargetEnqueue:
		s.Target.Name, s.Target.InstanceID = f.Name, f.InstanceID
	case herald.TargetCorrelated:
		s.Target.Name, s.Target.Key = f.Name, f.Key
	case herald.TargetHandler:
		s.Target.Handler = f.Handler
	}
	if f.MaxRetries != "" {
		n, err := strconv.Atoi(f.MaxRetries)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("max retries %q is not a whole number", f.MaxRetries))
		}
		s.MaxRetries = &n
	}
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("timeout %q is not a duration like 30s", f.Timeout))
		}
		s.Timeout = herald.Duration(d)
	}
	return s, reasons
}

func (u *UI) subscriptionPage(w http.ResponseWriter, r *http.Request, s *session) {
	c := s.client
	id := r.PathValue("id")
	f := &subscriptionForm{ID: id, Kind: string(herald.TargetScript), Enabled: true, New: true, Kinds: targetKinds}
	sub, err := c.Subscription(r.Context(), id)
	switch {
	case errors.Is(err, herald.ErrNotFound):
	case err != nil:
		u.errorPage(w, r, s, err)
		return
	default:
		f = formOfSubscription(sub)
	}
	u.render(w, r, http.StatusOK, "subscription", s, &pageData{Title: "Subscription " + id, Nav: "subscriptions", Data: f,
		Notice: r.URL.Query().Get("done")})
}

func (u *UI) subscriptionSave(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	f := subscriptionFormOf(r, id)
	pd := &pageData{Title: "Subscription " + id, Nav: "subscriptions", Data: f}
	c := s.client
	if cur, err := c.Subscription(r.Context(), id); err == nil {
		f.Version = cur.Version
	} else {
		f.New = true
	}
	sub, reasons := f.subscription()
	if len(reasons) == 0 {
		out, err := c.PutSubscription(r.Context(), sub)
		var se *herald.SubscriptionInvalidError
		switch {
		case errors.As(err, &se):
			reasons = se.Reasons
		case err != nil:
			u.fail(w, r, err)
			return
		default:
			http.Redirect(w, r, withDone("/subscriptions/"+url.PathEscape(id), fmt.Sprintf("Saved version %d.", out.Version)), http.StatusSeeOther)
			return
		}
	}
	f.Reasons = reasons
	pd.Error = "Not saved: the subscription was refused (see the reasons by the form)."
	u.render(w, r, http.StatusBadRequest, "subscription", s, pd)
}
