package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The checks of the params: every Store method refuses a nil params, and
// each rule of the bus's params (storage.BusStore) holds the same on every
// backend, with ErrInvalidArgument and nothing written.

var paramTests = []struct {
	name string
	fn   func(b *bundle)
}{
	{"NilParams", testNilParams},
	{"BusParamRules", testBusParamRules},
}

// withoutParams are the methods of storage.Store that take no params
// pointer, so have no nil params to refuse, each with the reason. Every
// other method must take (ctx, *Params): testNilParams fails for one that
// does not, so a new method is either checked or listed here.
var withoutParams = map[string]string{
	"SubscribeKinds": "takes a tenant and a mask, returns a channel (no error)",
	"SubscribeAll":   "takes a mask, returns a channel (no error)",
	"KeyCount":       "takes only a context",
	"Close":          "takes nothing",
}

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
)

// testNilParams calls every method of storage.Store (found by reflection,
// so a method added later is called too) with a nil params: each returns an
// error wrapping ErrInvalidArgument, without panicking, and nothing in the
// store changes.
func testNilParams(b *bundle) {
	t := b.t
	b.seedState()
	before := b.snapshot()
	st := reflect.TypeFor[storage.Store]()
	v := reflect.ValueOf(b.s)
	called := 0
	for i := range st.NumMethod() {
		m := st.Method(i)
		if _, ok := withoutParams[m.Name]; ok {
			continue
		}
		ft := m.Type
		if ft.NumIn() != 2 || ft.In(0) != ctxType || ft.In(1).Kind() != reflect.Pointer ||
			ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != errType {
			t.Errorf("%s%s: not (ctx, *Params) (..., error); take a params pointer, or list it in withoutParams with the reason",
				m.Name, strings.TrimPrefix(ft.String(), "func"))
			continue
		}
		called++
		err := callNil(b.ctx, v.MethodByName(m.Name), ft.In(1))
		if !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("%s(ctx, nil): got error %v, want one wrapping ErrInvalidArgument", m.Name, err)
		}
	}
	if called < 40 {
		t.Errorf("called %d methods with nil params; the Store has more (is the reflection broken?)", called)
	}
	if after := b.snapshot(); after != before {
		t.Errorf("nil params changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// callNil calls fn(ctx, nil) and returns its error (a panic is one).
func callNil(ctx context.Context, fn reflect.Value, param reflect.Type) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	out := fn.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.Zero(param)})
	e, _ := out[len(out)-1].Interface().(error)
	return e
}

// seedState gives the bundle's tenant a little of everything: an instance
// with a turn in flight and an event, a definition, a correlated event, a
// subscription, a script, and a bus event whose execution is claimed.
// It returns the claimed execution.
func (b *bundle) seedState() *storage.BusClaimed {
	b.t.Helper()
	s, ctx, tn := b.s, b.ctx, b.tenant
	if err := s.TenantEnsure(ctx, &storage.TenantEnsureParams{Tenant: tn, Now: t0}); err != nil {
		b.t.Fatalf("TenantEnsure: %v", err)
	}
	b.create("i", t0)
	b.raise("i", "ev1", "go", t0)
	b.putDef(heraldtype.EventDefinition{Name: "go"}, t0)
	b.corrPut("order", "k1", `{"n":1}`, false, t0)
	b.putSub(heraldtype.Subscription{ID: "s", Pattern: "a", Enabled: true,
		Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}, t0)
	if _, err := s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: tn, ID: "js", Source: "1", Now: t0}); err != nil {
		b.t.Fatalf("BusScriptPut: %v", err)
	}
	b.busPublishRouted(t0, "a", []string{"s"}, "e0")
	return b.busClaim(t0, 1)[0]
}

// snapshot is what the bundle's tenant holds, read through the public
// calls (and the tenants and keys, which are not scoped to a tenant), as
// text: two snapshots are equal if nothing was written in between.
func (b *bundle) snapshot() string {
	b.t.Helper()
	s, ctx, tn := b.s, b.ctx, b.tenant
	var parts []any
	add := func(what string, v any, err error) {
		if err != nil {
			b.t.Fatalf("snapshot: %s: %v", what, err)
		}
		parts = append(parts, what, v)
	}
	insts, _, err := s.InstanceList(ctx, &storage.InstanceListParams{Tenant: tn})
	add("instances", insts, err)
	for _, in := range insts {
		h, err := s.HistoryList(ctx, &storage.HistoryListParams{Tenant: tn, InstanceID: in.ID})
		add("history of "+in.ID, h, err)
	}
	evs, err := s.EventList(ctx, &storage.EventListParams{Tenant: tn})
	add("events", evs, err)
	defs, err := s.EventDefinitionList(ctx, &storage.EventDefinitionListParams{Tenant: tn})
	add("definitions", defs, err)
	corr, _, err := s.CorrelatedSearch(ctx, &storage.CorrelatedSearchParams{Tenant: tn, Def: "order"})
	add("correlated", corr, err)
	subs, gen, err := s.BusSubscriptionList(ctx, &storage.BusTenantParams{Tenant: tn})
	add("subscriptions", []any{subs, gen}, err)
	scripts, err := s.BusScriptList(ctx, &storage.BusTenantParams{Tenant: tn})
	add("scripts", scripts, err)
	letters, _, err := s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn})
	add("dead letters", letters, err)
	backlog, err := s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: tn})
	add("backlog", backlog, err)
	for _, id := range []string{"e0", "e1", "e2"} {
		ev, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: tn, ID: id})
		if errors.Is(err, heraldtype.ErrNotFound) {
			ev, err = nil, nil
		}
		add("bus event "+id, ev, err)
		as, _, err := s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, EventID: id})
		add("attempts of "+id, as, err)
	}
	tenants, err := s.TenantList(ctx, &storage.TenantListParams{})
	add("tenants", tenants, err)
	keys, err := s.KeyCount(ctx)
	add("keys", keys, err)
	out, err := json.Marshal(parts)
	if err != nil {
		b.t.Fatalf("snapshot: %v", err)
	}
	return string(out)
}

// testBusParamRules: each rule of the bus's params that the backends once
// kept apart (storage.BusStore states them) refuses the same input with
// ErrInvalidArgument on every backend, and nothing is written; input at the
// edge of a rule is taken.
func testBusParamRules(b *bundle) {
	t := b.t
	s, ctx, tn := b.s, b.ctx, b.tenant
	c := b.seedState()
	turn := b.claimOne("i", t0)
	b.busPublish("e1", "a", t0) // unrouted: a route has an event to decide
	before := b.snapshot()

	badUTF8 := json.RawMessage(`{"a":"` + "\xff" + `"}`)
	withNUL := json.RawMessage("{\"a\":\x00\"b\"}")
	event := func(data json.RawMessage) storage.BusPublishEvent {
		return storage.BusPublishEvent{ID: "e2", Type: "a", Data: data, Source: "client"}
	}
	result := func(edit func(r *storage.BusResult)) []storage.BusResult {
		r := outcome(c, storage.BusSucceeded, t0)
		edit(&r)
		return []storage.BusResult{r}
	}
	letter := func(edit func(d *heraldtype.DeadLetter)) []storage.BusResult {
		r := outcome(c, storage.BusDeadLetter, t0)
		edit(r.DeadLetter)
		return []storage.BusResult{r}
	}
	sub := func(edit func(s *heraldtype.Subscription)) *storage.BusSubscriptionPutParams {
		p := &storage.BusSubscriptionPutParams{Tenant: tn, Now: t0, Subscription: heraldtype.Subscription{ID: "s2", Pattern: "a",
			Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}}
		edit(&p.Subscription)
		return p
	}
	twice := func(*storage.BusEvent) []storage.BusRouteDecision {
		return []storage.BusRouteDecision{{Subscription: "s", Matched: true}, {Subscription: "s2"}, {Subscription: "s"}}
	}
	tooMany := 1<<30 + 1
	finish := func(rs []storage.BusResult) error {
		return errOf(s.BusFinish(ctx, &storage.BusFinishParams{Tenant: tn, Now: t0, Results: rs}))
	}
	publish := func(ev storage.BusPublishEvent) error {
		return errOf(s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tn, Now: t0, Event: ev}))
	}
	commit := func(pub storage.BusPublishEvent) error {
		p := b.commitParams(turn, t0)
		p.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, t0)}
		p.Status = heraldtype.StatusCompleted
		p.Publish = []storage.BusPublishEvent{pub}
		return errOf(s.TurnCommit(ctx, p))
	}
	refused := []struct {
		rule string
		err  error
	}{
		{"event data of invalid UTF-8", publish(event(badUTF8))},
		{"event data with a NUL byte", publish(event(withNUL))},
		{"empty event data", publish(event(nil))},
		{"a source of invalid UTF-8", publish(storage.BusPublishEvent{ID: "e2", Type: "a", Data: busData("e2"), Source: "workflow:\xff"})},
		{"a source over the cap", publish(storage.BusPublishEvent{ID: "e2", Type: "a", Data: busData("e2"),
			Source: "workflow:" + strings.Repeat("x", storage.MaxIDBytes+1)})},
		{"a type over MaxNameBytes", publish(storage.BusPublishEvent{ID: "e2", Type: strings.Repeat("t", storage.MaxNameBytes+1), Data: busData("e2")})},
		{"a turn publishing data of invalid UTF-8", commit(event(badUTF8))},
		{"a turn publishing data with a NUL byte", commit(event(withNUL))},
		{"a Route deciding a subscription twice", errOf(s.BusRoute(ctx, &storage.BusRouteParams{Tenant: tn, Now: t0, Route: twice}))},
		{"a Route deciding for a subscription id that breaks the text rules", errOf(s.BusRoute(ctx, &storage.BusRouteParams{Tenant: tn, Now: t0,
			Route: matchAll("s\x00")}))},
		{"no Route", errOf(s.BusRoute(ctx, &storage.BusRouteParams{Tenant: tn, Now: t0}))},
		{"a negative claim lease", errOf(s.BusClaim(ctx, &storage.BusClaimParams{Tenant: tn, Now: t0, Lease: -time.Second}))},
		{"an unknown outcome", finish(result(func(r *storage.BusResult) { r.Outcome = 99 }))},
		{"a dead letter without DeadLetter", finish(result(func(r *storage.BusResult) { r.Outcome, r.DeadLetter = storage.BusDeadLetter, nil }))},
		{"an attempt result of invalid UTF-8", finish(result(func(r *storage.BusResult) { r.Attempt.Result = badUTF8 }))},
		{"an attempt error kind of invalid UTF-8", finish(result(func(r *storage.BusResult) { r.Attempt.ErrorKind = "kind\xff" }))},
		{"an attempt error kind with a NUL byte", finish(result(func(r *storage.BusResult) { r.Attempt.ErrorKind = "kind\x00" }))},
		{"a dead letter error kind with a NUL byte", finish(letter(func(d *heraldtype.DeadLetter) { d.ErrorKind = "kind\x00" }))},
		{"a dead letter target of invalid UTF-8", finish(letter(func(d *heraldtype.DeadLetter) { d.Target.Handler = "h\xff" }))},
		{"a zero heartbeat LeaseUntil", s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: tn, Execution: c.Execution.ID, LockToken: c.LockToken})},
		{"a filter of invalid UTF-8", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) { s.Filter = badUTF8 })))},
		{"a filter that is not JSON", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) { s.Filter = json.RawMessage(`{`) })))},
		{"a subscription target of invalid UTF-8", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) { s.Target.Handler = "h\xff" })))},
		{"MaxRetries over 2^30", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) { s.MaxRetries = &tooMany })))},
		{"a negative Timeout", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) { s.Timeout = -1 })))},
		{"a pattern over MaxNameBytes", errOf(s.BusSubscriptionPut(ctx, sub(func(s *heraldtype.Subscription) {
			s.Pattern = strings.Repeat("p", storage.MaxNameBytes+1)
		})))},
		{"a script source with a NUL byte", errOf(s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: tn, ID: "js2", Source: "1\x00", Now: t0}))},
		{"a script version over 2^31-1", errOf(s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: tn, ID: "js", Version: math.MaxInt32 + 1}))},
		{"a negative dead-letter cursor", errOf3(s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn, Before: -1}))},
		{"a negative dead-letter limit", errOf3(s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn, Limit: -1}))},
		{"a filter's error kind with a NUL byte", errOf3(s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn,
			Filter: storage.BusDeadLetterFilter{ErrorKind: "k\x00"}}))},
		{"a filter's event type over MaxNameBytes", errOf(s.BusDeadLetterDelete(ctx, &storage.BusDeadLetterOpParams{Tenant: tn, Now: t0,
			Filter: storage.BusDeadLetterFilter{EventType: strings.Repeat("t", storage.MaxNameBytes+1)}}))},
		{"a negative dead-letter batch", errOf(s.BusDeadLetterDelete(ctx, &storage.BusDeadLetterOpParams{Tenant: tn, Now: t0, Limit: -1}))},
		{"an attempt list without event, subscription or execution", errOf3(s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn}))},
		{"an attempt list of a negative execution", errOf3(s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, Execution: -1}))},
		{"an attempt list with a negative cursor", errOf3(s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, EventID: "e0", After: -1}))},
		{"a negative attempt-list limit", errOf3(s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, EventID: "e0", Limit: -1}))},
	}
	for _, r := range refused {
		if !errors.Is(r.err, heraldtype.ErrInvalidArgument) {
			t.Errorf("%s: got error %v, want one wrapping ErrInvalidArgument", r.rule, r.err)
		}
	}
	// A token that cannot be one owns nothing: ErrLeaseLost, not a bad
	// argument.
	for what, token := range map[string]string{"empty": "", "invalid UTF-8": "t\xff", "NUL": "t\x00"} {
		err := s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: tn, Execution: c.Execution.ID, LockToken: token, LeaseUntil: at(time.Hour)})
		if !errors.Is(err, heraldtype.ErrLeaseLost) {
			t.Errorf("heartbeat with a token %s: got error %v, want ErrLeaseLost", what, err)
		}
		r := outcome(c, storage.BusSucceeded, t0)
		r.LockToken = token
		errs, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: tn, Now: t0, Results: []storage.BusResult{r}})
		if err != nil || len(errs) != 1 || !errors.Is(errs[0], heraldtype.ErrLeaseLost) {
			t.Errorf("finish with a token %s: got %v, %v; want [ErrLeaseLost]", what, errs, err)
		}
	}
	// At the edge of the rules: taken, and writing nothing either.
	maxRetries := 1 << 30
	_, err := s.BusSubscriptionGet(ctx, &storage.BusSubscriptionGetParams{Tenant: tn, ID: "s"})
	taken := []struct {
		what string
		err  error
	}{
		{"a subscription get", err},
		{"a filter's error kind with a tab (stored error kinds are text, not ids)", errOf3(s.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: tn,
			Filter: storage.BusDeadLetterFilter{ErrorKind: "k\tind"}}))},
		{"a script version of 2^31-1 (none: ErrNotFound)", notFoundOK(errOf(s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: tn, ID: "js", Version: math.MaxInt32})))},
		{"an attempt list by execution only", errOf3(s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: tn, Execution: c.Execution.ID}))},
	}
	for _, r := range taken {
		if r.err != nil {
			t.Errorf("%s: %v", r.what, r.err)
		}
	}
	if after := b.snapshot(); after != before {
		t.Errorf("refused params changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// MaxRetries at its cap is stored (the one write of this test).
	got := b.putSub(heraldtype.Subscription{ID: "s3", Pattern: "a", MaxRetries: &maxRetries,
		Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}, t0)
	if got.MaxRetries == nil || *got.MaxRetries != maxRetries {
		t.Errorf("MaxRetries at the cap: stored %v, want %d", got.MaxRetries, maxRetries)
	}
	// The refused calls left the claimed work as it was: both still finish.
	b.busFinishOK(t0, outcome(c, storage.BusSucceeded, t0))
	p := b.commitParams(turn, t0)
	b.commit(p)
}

// errOf3 is errOf for a call with two results before its error.
func errOf3[T, U any](_ T, _ U, err error) error { return err }

// notFoundOK is err, or nil for ErrNotFound.
func notFoundOK(err error) error {
	if errors.Is(err, heraldtype.ErrNotFound) {
		return nil
	}
	return err
}
