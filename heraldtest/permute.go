package heraldtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/drive"
	"github.com/heraldwf/herald/storage"
)

// Lane is the way an external event of a Permute spec reaches the
// workflow.
type Lane string

// Lanes.
const (
	// Positional: Client.RaiseEvent(instance, Name, Payload).
	Positional Lane = "positional"
	// Queue: Client.Enqueue(instance, Name, Payload).
	Queue Lane = "queue"
	// Correlated: Client.PutCorrelatedEvent(Name, Key, Payload) (Name is
	// the event definition; Spec.Setup defines it).
	Correlated Lane = "correlated"
	// Bus: Client.Publish(Name, Payload) (Name is the event type).
	Bus Lane = "bus"
)

// Event is one external event of a Permute spec. Label names it in the
// timeline and in Outcome.Fates; it is also the event's id (positional,
// queue and bus lanes), so it must be unique within the spec.
type Event struct {
	Label   string
	Lane    Lane
	Name    string // event name, queue, event definition, or bus event type
	Key     string // correlated lane: the correlation key
	Payload any
}

// Spec is what Permute explores.
type Spec struct {
	// Register registers the workflows, activities and bus handlers.
	Register func(rt *herald.Runtime)
	// Setup, if set, runs in each ordering's fresh tenant before anything
	// else: event definitions, scripts, subscriptions.
	Setup func(c *herald.Client) error
	// Workflow and Input start the instance InstanceID (default
	// "permute").
	Workflow   string
	Input      any
	InstanceID string
	// Events are the external events whose arrival is permuted.
	Events []Event
	// Check judges each ordering's outcome; it reports a failure with
	// t.Error/Errorf/Fatal/Fatalf as any test does.
	Check func(t testing.TB, o *Outcome)

	// Budget bounds the orderings run to completion (default 2,000). When
	// the space is larger, Samples (default Budget/10) orderings more are
	// drawn at random with Seed (default 1) and the log says so.
	Budget  int
	Samples int
	Seed    uint64
	// MaxChoices bounds the choices of one ordering (default 200): a
	// workflow that never ends (a timer loop) fails instead of running
	// forever.
	MaxChoices int
	// NoPrune explores every ordering, without merging those that reach
	// a state already explored: slower, for when a deduplication is in
	// doubt.
	NoPrune bool
	// Ordering, if set, runs exactly that ordering (as a failure report
	// prints it) instead of exploring.
	Ordering string
	// Options configure the Env (WithStore, WithConfig, ...).
	Options []Option
}

// Outcome is one ordering's end: what Check gets.
type Outcome struct {
	// Ordering is the ordering as a timeline ("start · turn[...] ·
	// deliver a1 · ..."); Spec.Ordering re-runs it.
	Ordering string
	// Tenant is the fresh tenant the ordering ran in; Client is its client.
	Tenant string
	Client *herald.Client
	// InstanceID, Status, Output (a completed instance's result) and Err
	// (a failed or terminated instance's error); Status is "" if the
	// instance was never started.
	InstanceID string
	Status     herald.Status
	Output     json.RawMessage
	Err        error
	// History is the instance's history, every execution in order.
	History []history.Event
	// Fates holds, by label, each delivered event's fate record
	// (positional, queue and bus lanes).
	Fates map[string]*herald.EventRecord
	// Correlated holds, by label, each correlated event put, as it stands
	// at the end.
	Correlated map[string]*herald.CorrelatedEvent
	// Refused holds, by label, the events the engine refused (the
	// instance had ended: herald.ErrInstanceNotRunning).
	Refused map[string]error
}

// Result decodes the instance's result into out (its error if it failed).
func (o *Outcome) Result(out any) error {
	if o.Status != herald.StatusCompleted {
		if o.Err != nil {
			return o.Err
		}
		return fmt.Errorf("heraldtest: instance %s is %q, not completed", o.InstanceID, o.Status)
	}
	return json.Unmarshal(o.Output, out)
}

// Fate says where the labelled event stands, as text: "delivered (wait
// #2 of execution 1)", "dropped: withdrawn_wait", "buffered", "pending",
// "refused (the instance had ended)", "put" (a correlated event), or
// "unknown label".
func (o *Outcome) Fate(label string) string {
	if err, ok := o.Refused[label]; ok {
		if errors.Is(err, herald.ErrInstanceNotRunning) {
			return "refused (the instance had ended)"
		}
		return "refused: " + err.Error()
	}
	if rec := o.Fates[label]; rec != nil {
		return fateText(rec)
	}
	if _, ok := o.Correlated[label]; ok {
		return "put"
	}
	return "unknown label"
}

// Report sums up a Permute run.
type Report struct {
	Orderings  int           // orderings run to completion and checked
	Pruned     int           // runs cut short at a state already explored
	Sampled    int           // of Orderings, drawn at random past the budget
	Exhaustive bool          // every distinct ordering was explored
	Failures   int           // orderings the check failed
	Shortest   string        // the shortest failing ordering ("" if none)
	Seed       uint64        // the seed of the sample
	Elapsed    time.Duration // wall time
}

// choice is a decision at a point: deliver Events[deliver], or (deliver
// -1) let the workflow take its next unit.
type choice int

const stepChoice choice = -1

// Permute runs spec.Workflow once per distinct ordering of spec.Events'
// arrivals relative to the workflow's own units of work, each in a fresh
// tenant of one store, and calls spec.Check on each outcome. See the
// package documentation. It fails t (Errorf) with the shortest failing
// ordering as a timeline, and logs how many orderings it explored.
func Permute(t testing.TB, spec Spec) *Report {
	t.Helper()
	p := newPermuter(t, &spec)
	began := time.Now()
	rep := &Report{Seed: p.seed}
	if spec.Ordering != "" {
		cs, err := p.parse(spec.Ordering)
		if err != nil {
			t.Fatalf("heraldtest.Permute: Spec.Ordering: %v", err)
		}
		p.replay = spec.Ordering
		p.run(cs, nil, false)
	} else {
		p.explore()
		p.sample()
	}
	rep.Orderings, rep.Pruned, rep.Sampled, rep.Exhaustive = p.complete, p.pruned, p.sampled, p.exhaustive
	rep.Failures = len(p.failures)
	rep.Elapsed = time.Since(began)
	how := "every distinct ordering"
	if !p.exhaustive && spec.Ordering == "" {
		how = fmt.Sprintf("budget of %d reached, not exhaustive; %d more sampled at random with seed %d", p.budget, p.sampled, p.seed)
	}
	if spec.Ordering != "" {
		how = "the ordering given in Spec.Ordering"
	}
	t.Logf("heraldtest.Permute(%s): %d orderings explored (%s), %d runs cut short at a state already explored, in %v",
		spec.Workflow, p.complete, how, p.pruned, rep.Elapsed.Round(time.Millisecond))
	if len(p.failures) > 0 {
		f := p.failures[0]
		for _, g := range p.failures[1:] {
			if len(g.choices) < len(f.choices) {
				f = g
			}
		}
		rep.Shortest = f.ordering
		t.Errorf("heraldtest.Permute(%s): %d of %d orderings fail the check. The shortest (%d choices):\n\n    %s\n\n"+
			"the check said:\n%s\noutcome: status %s%s; events: %s\n"+
			"re-run exactly this ordering with Spec.Ordering set to the line above (seed %d)",
			spec.Workflow, len(p.failures), p.complete, len(f.choices), f.ordering, indent(f.msgs),
			f.outcome.Status, outputText(f.outcome), p.fatesText(f.outcome), p.seed)
	}
	return rep
}

func outputText(o *Outcome) string {
	switch {
	case o.Err != nil:
		return " (" + o.Err.Error() + ")"
	case len(o.Output) > 0:
		return " → " + string(o.Output)
	}
	return ""
}

func indent(msgs []string) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, l := range strings.Split(m, "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

func (p *permuter) fatesText(o *Outcome) string {
	parts := make([]string, len(p.spec.Events))
	for i, ev := range p.spec.Events {
		parts[i] = ev.Label + " " + o.Fate(ev.Label)
	}
	return strings.Join(parts, ", ")
}

type failure struct {
	choices  []choice
	ordering string
	msgs     []string
	outcome  *Outcome
}

type permuter struct {
	t          testing.TB
	spec       *Spec
	env        *Env
	id         string
	budget     int
	samples    int
	seed       uint64
	maxChoices int
	replay     string

	tenants    int
	complete   int
	pruned     int
	sampled    int
	exhaustive bool
	visited    map[string]int // fingerprint → fewest choices it was reached with
	seen       map[string]bool
	failures   []*failure
}

func newPermuter(t testing.TB, spec *Spec) *permuter {
	t.Helper()
	var reasons []string
	if spec.Workflow == "" {
		reasons = append(reasons, "Workflow is empty")
	}
	if spec.Check == nil {
		reasons = append(reasons, "Check is nil")
	}
	labels := map[string]bool{}
	for i, ev := range spec.Events {
		switch {
		case ev.Label == "":
			reasons = append(reasons, fmt.Sprintf("Events[%d] has no label", i))
		case len(ev.Label) > 200 || strings.Contains(ev.Label, " · ") || strings.ContainsAny(ev.Label, "[] ") ||
			strings.ContainsFunc(ev.Label, unicode.IsControl):
			reasons = append(reasons, fmt.Sprintf("Events[%d] label %q: want at most 200 bytes, no spaces, brackets or control characters", i, ev.Label))
		case labels[ev.Label]:
			reasons = append(reasons, fmt.Sprintf("Events[%d] label %q is used twice", i, ev.Label))
		}
		labels[ev.Label] = true
		switch ev.Lane {
		case Positional, Queue, Bus:
		case Correlated:
			if ev.Key == "" {
				reasons = append(reasons, fmt.Sprintf("Events[%d] (%s): the correlated lane needs a Key", i, ev.Label))
			}
		default:
			reasons = append(reasons, fmt.Sprintf("Events[%d] (%s): lane %q is not positional, queue, correlated or bus", i, ev.Label, ev.Lane))
		}
		if ev.Name == "" {
			reasons = append(reasons, fmt.Sprintf("Events[%d] (%s) has no Name", i, ev.Label))
		}
	}
	if len(spec.Events) > 64 {
		reasons = append(reasons, fmt.Sprintf("%d events: at most 64", len(spec.Events)))
	}
	if spec.Budget < 0 || spec.Samples < 0 || spec.MaxChoices < 0 {
		reasons = append(reasons, "Budget, Samples and MaxChoices must not be negative")
	}
	if len(reasons) > 0 {
		t.Fatalf("heraldtest.Permute: invalid spec:\n  %s", strings.Join(reasons, "\n  "))
	}
	p := &permuter{t: t, spec: spec, id: spec.InstanceID, budget: spec.Budget, samples: spec.Samples, seed: spec.Seed,
		maxChoices: spec.MaxChoices, visited: map[string]int{}, seen: map[string]bool{}}
	if p.id == "" {
		p.id = "permute"
	}
	if p.budget == 0 {
		p.budget = 2000
	}
	if p.samples == 0 && spec.Samples == 0 {
		p.samples = max(p.budget/10, 1)
	}
	if p.seed == 0 {
		p.seed = 1
	}
	if p.maxChoices == 0 {
		p.maxChoices = 200
	}
	p.env = New(t, spec.Register, spec.Options...)
	return p
}

// explore runs the orderings depth first: each run follows a prefix, then
// takes the first choice at every later point, pushing the others.
func (p *permuter) explore() {
	stack := [][]choice{nil}
	runs := 0
	for len(stack) > 0 {
		if p.complete >= p.budget || runs >= 5*p.budget {
			return
		}
		prefix := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		runs++
		p.run(prefix, func(at []choice, alts []choice) {
			for i := len(alts) - 1; i >= 0; i-- {
				stack = append(stack, append(slices.Clone(at), alts[i]))
			}
		}, !p.spec.NoPrune)
	}
	p.exhaustive = true
}

// sample draws orderings at random (seeded) once the budget cut the
// exploration short.
func (p *permuter) sample() {
	if p.exhaustive {
		return
	}
	rng := rand.New(rand.NewPCG(p.seed, 0x9e3779b97f4a7c15))
	for i := 0; i < p.samples; i++ {
		before := p.complete
		p.runRandom(rng)
		if p.complete > before {
			p.sampled++
		}
	}
}

// run is one ordering in a fresh tenant: the choices of prefix, then the
// first available choice at every point (or, with rng, a random one).
// branch, if set, receives the alternatives at each point past the prefix.
// With prune, a run that reaches a state already explored with as few
// choices stops there.
func (p *permuter) run(prefix []choice, branch func(at, alts []choice), prune bool) {
	p.runWith(prefix, branch, prune, nil)
}

func (p *permuter) runRandom(rng *rand.Rand) { p.runWith(nil, nil, false, rng) }

func (p *permuter) runWith(prefix []choice, branch func(at, alts []choice), prune bool, rng *rand.Rand) {
	p.t.Helper()
	r := p.newRun()
	var taken []choice
	for {
		if len(taken) >= len(prefix) && prune {
			fp := r.fingerprint()
			if d, ok := p.visited[fp]; ok && d <= len(taken) {
				p.pruned++
				return
			}
			p.visited[fp] = len(taken)
		}
		avail := r.available()
		if len(avail) == 0 {
			break
		}
		if len(taken) >= p.maxChoices {
			p.t.Fatalf("heraldtest.Permute(%s): an ordering went past %d choices without ending (a workflow that never ends? Spec.MaxChoices):\n    %s",
				p.spec.Workflow, p.maxChoices, r.timeline())
		}
		var c choice
		switch {
		case len(taken) < len(prefix):
			c = prefix[len(taken)]
			if !slices.Contains(avail, c) {
				if p.replay != "" {
					p.t.Fatalf("heraldtest.Permute(%s): Spec.Ordering diverged at choice %d: %s is not possible there (the ordering so far: %s)",
						p.spec.Workflow, len(taken)+1, p.choiceName(c), r.timeline())
				}
				p.t.Fatalf("heraldtest.Permute(%s): internal error: choice %d (%s) is not available after %s (is the workflow deterministic?)",
					p.spec.Workflow, len(taken)+1, p.choiceName(c), r.timeline())
			}
		case rng != nil:
			c = avail[rng.IntN(len(avail))]
		default:
			c = avail[0]
			if branch != nil && len(avail) > 1 {
				branch(taken, avail[1:])
			}
		}
		r.apply(c)
		if p.replay != "" {
			if err := r.matchReplay(len(taken), p.replay); err != nil {
				p.t.Fatalf("heraldtest.Permute(%s): Spec.Ordering diverged at choice %d: %v", p.spec.Workflow, len(taken)+1, err)
			}
		}
		taken = append(taken, c)
	}
	ordering := r.timeline()
	if rng != nil {
		if p.seen[ordering] {
			return
		}
	}
	p.seen[ordering] = true
	p.complete++
	o := r.outcome(ordering)
	if msgs, failed := runCheck(p.t, p.spec.Check, o); failed {
		p.failures = append(p.failures, &failure{choices: taken, ordering: ordering, msgs: msgs, outcome: o})
	}
}

func (p *permuter) choiceName(c choice) string {
	if c == stepChoice {
		return "the workflow's next unit"
	}
	return "deliver " + p.spec.Events[c].Label
}

// parse reads an ordering as a failure report prints it.
func (p *permuter) parse(s string) ([]choice, error) {
	var out []choice
	for i, tok := range strings.Split(strings.TrimSpace(s), " · ") {
		tok = strings.TrimSpace(tok)
		if label, ok := strings.CutPrefix(tok, "deliver "); ok {
			idx := slices.IndexFunc(p.spec.Events, func(ev Event) bool { return ev.Label == label })
			if idx < 0 {
				return nil, fmt.Errorf("choice %d delivers %q, which is no label of Spec.Events", i+1, label)
			}
			out = append(out, choice(idx))
			continue
		}
		if stepKind(tok) == "" {
			return nil, fmt.Errorf("choice %d %q is neither \"deliver LABEL\" nor a unit (start, turn, activity, bus)", i+1, tok)
		}
		out = append(out, stepChoice)
	}
	return out, nil
}

// stepKind is the kind of a timeline's step token: "start", "turn",
// "activity", "bus" or "" (not a step).
func stepKind(tok string) string {
	if strings.HasPrefix(tok, "@+") {
		_, tok, _ = strings.Cut(tok, " ")
	}
	kind, _, _ := strings.Cut(tok, "[")
	kind, _, _ = strings.Cut(kind, " ")
	switch kind {
	case "start", drive.Turn, drive.Activity, drive.Bus, "route", "idle":
		return kind
	}
	return ""
}

// runState is one ordering in progress.
type runState struct {
	p       *permuter
	e       *Env
	tenant  string
	client  *herald.Client
	began   time.Time
	started bool

	delivered []int // event indexes, in delivery order
	isDone    []bool
	refused   map[string]error
	corr      map[string]*herald.CorrelatedEvent
	units     []string // units run: kind, name, attempt (what history does not show)
	tokens    []string // the timeline
	histLen   int
	// segment is the choices since the instance's last turn: the order in
	// which its inbox filled (deliveries, activity results, bus
	// deliveries), which its next turn sees and history does not show yet.
	segment []string
	// others: a turn of another instance ran (a bus target started one);
	// its state is not fingerprinted, so the run is never merged.
	others     bool
	lastTurnOf string // the instance of the turn the last step ran
}

func (p *permuter) newRun() *runState {
	p.t.Helper()
	p.tenants++
	tenant := fmt.Sprintf("p%d", p.tenants)
	c, err := p.env.rt.Client(tenant)
	if err != nil {
		p.t.Fatalf("heraldtest.Permute: client of tenant %s: %v", tenant, err)
	}
	if err := p.env.rt.EnsureTenant(p.env.ctx, tenant); err != nil {
		p.t.Fatalf("heraldtest.Permute: tenant %s: %v", tenant, err)
	}
	if p.spec.Setup != nil {
		if err := p.spec.Setup(c); err != nil {
			p.t.Fatalf("heraldtest.Permute: Spec.Setup: %v", err)
		}
	}
	return &runState{p: p, e: p.env, tenant: tenant, client: c, began: p.env.clock.Now(),
		isDone: make([]bool, len(p.spec.Events)), refused: map[string]error{}, corr: map[string]*herald.CorrelatedEvent{}}
}

// available lists the choices at this point: the workflow's next unit
// first (when there is one, now or at a later wake-up), then each event
// not delivered yet, in Spec order.
func (r *runState) available() []choice {
	var out []choice
	if r.canStep() {
		out = append(out, stepChoice)
	}
	for i := range r.p.spec.Events {
		if !r.isDone[i] {
			out = append(out, choice(i))
		}
	}
	return out
}

func (r *runState) canStep() bool {
	if !r.started {
		return true
	}
	ready, err := r.e.store.TenantsReady(r.e.ctx, &storage.TenantsReadyParams{Tenants: []string{r.tenant},
		Now: r.e.clock.Now()})
	if err != nil {
		r.p.t.Fatalf("heraldtest.Permute: find work: %v", err)
	}
	if len(ready) > 0 {
		return true
	}
	_, ok := r.e.nextWake(r.tenant)
	return ok
}

func (r *runState) apply(c choice) {
	t := r.p.t
	t.Helper()
	defer func() {
		tok := r.tokens[len(r.tokens)-1]
		if stepKind(tok) == drive.Turn && r.lastTurnOf == r.p.id {
			r.segment = nil
			return
		}
		r.segment = append(r.segment, tok)
	}()
	r.lastTurnOf = ""
	if c != stepChoice {
		r.deliver(int(c))
		return
	}
	if !r.started {
		r.started = true
		_, err := r.client.StartWorkflow(r.e.ctx, r.p.spec.Workflow, r.p.spec.Input, herald.WithInstanceID(r.p.id))
		if err != nil {
			t.Fatalf("heraldtest.Permute: start %s: %v", r.p.spec.Workflow, err)
		}
		r.tokens = append(r.tokens, "start")
		return
	}
	prefix := ""
	u, ran := r.e.step(r.tenant)
	if !ran {
		if at, ok := r.e.nextWake(r.tenant); ok {
			r.e.clock.Set(at)
			drive.Maintain(r.e.ctx, r.e.rt, r.tenant)
			prefix = "@+" + at.Sub(r.began).String() + " "
			u, ran = r.e.step(r.tenant)
		}
	}
	if !ran {
		// Routing alone (a published event no subscription took), or
		// nothing that could run after all.
		tok := "idle"
		if u.Routed > 0 {
			tok = "route"
		}
		r.tokens = append(r.tokens, prefix+tok)
		return
	}
	tok := prefix + u.Kind
	switch u.Kind {
	case drive.Activity:
		tok += fmt.Sprintf(" %s#%d", u.Name, u.Attempt)
		r.units = append(r.units, fmt.Sprintf("a %s %d", u.Name, u.Attempt))
	case drive.Bus:
		tok += fmt.Sprintf(" %s#%d", u.Name, u.Attempt)
		r.units = append(r.units, fmt.Sprintf("b %s %s %d", u.Name, u.EventID, u.Attempt))
	}
	if u.Kind == drive.Turn {
		r.lastTurnOf = u.Instance
		if u.Instance != r.p.id {
			r.others = true
		}
		if d := r.newHistory(); d != "" {
			tok += "[" + d + "]"
		}
	}
	r.tokens = append(r.tokens, tok)
}

func (r *runState) deliver(i int) {
	t := r.p.t
	t.Helper()
	ev := r.p.spec.Events[i]
	r.isDone[i] = true
	r.delivered = append(r.delivered, i)
	r.tokens = append(r.tokens, "deliver "+ev.Label)
	ctx, id := r.e.ctx, herald.WithEventID(ev.Label)
	var err error
	switch ev.Lane {
	case Positional:
		_, err = r.client.RaiseEvent(ctx, r.p.id, ev.Name, ev.Payload, id)
	case Queue:
		_, err = r.client.Enqueue(ctx, r.p.id, ev.Name, ev.Payload, id)
	case Correlated:
		var ce *herald.CorrelatedEvent
		ce, err = r.client.PutCorrelatedEvent(ctx, ev.Name, ev.Key, ev.Payload)
		if err == nil {
			r.corr[ev.Label] = ce
		}
	case Bus:
		_, err = r.client.Publish(ctx, ev.Name, ev.Payload, id)
	}
	switch {
	case errors.Is(err, herald.ErrInstanceNotRunning):
		r.refused[ev.Label] = err
	case err != nil:
		t.Fatalf("heraldtest.Permute: deliver %s (%s %q): %v", ev.Label, ev.Lane, ev.Name, err)
	}
}

// matchReplay checks that the step just taken is the kind the replayed
// ordering names at choice n.
func (r *runState) matchReplay(n int, ordering string) error {
	toks := strings.Split(strings.TrimSpace(ordering), " · ")
	want, got := strings.TrimSpace(toks[n]), r.tokens[len(r.tokens)-1]
	if strings.HasPrefix(want, "deliver ") {
		return nil
	}
	if stepKind(want) != stepKind(got) {
		return fmt.Errorf("the ordering says %q, the workflow ran %q", want, got)
	}
	return nil
}

func (r *runState) timeline() string { return strings.Join(r.tokens, " · ") }

func (r *runState) history() []history.Event {
	if !r.started {
		return nil
	}
	evs, err := historyOf(r.e.ctx, r.client, r.p.id)
	if err != nil {
		r.p.t.Fatalf("heraldtest.Permute: %v", err)
	}
	return evs
}

// newHistory summarises the history a turn added.
func (r *runState) newHistory() string {
	evs := r.history()
	if len(evs) < r.histLen {
		r.histLen = 0
	}
	var parts []string
	for _, ev := range evs[r.histLen:] {
		if s := eventText(ev); s != "" {
			parts = append(parts, s)
		}
	}
	r.histLen = len(evs)
	return strings.Join(parts, ", ")
}

func eventText(ev history.Event) string {
	switch ev.Kind {
	case history.ExecutionStarted:
		if ev.Execution > 1 {
			return fmt.Sprintf("execution %d", ev.Execution)
		}
		return ""
	case history.EventSubscribed:
		s := "wait " + ev.Name
		if ev.Key != "" {
			s += "/" + ev.Key
		}
		if ev.EventID != "" {
			s += " took " + ev.EventID
		}
		return s
	case history.EventSubscribedCancelled:
		return "withdraw " + ev.Name
	case history.EventRaised:
		if ev.TaskSeq > 0 {
			return fmt.Sprintf("%s→wait#%d", ev.EventID, ev.WaitNumber)
		}
		return ev.EventID + " buffered"
	case history.EventDropped:
		return fmt.Sprintf("%s dropped (%s)", ev.EventID, ev.Reason)
	case history.TimerCreated:
		return "timer " + ev.FireAt.Sub(ev.Time).String()
	case history.TimerFired:
		return "timer fired"
	case history.TimerCancelled:
		return ""
	case history.ActivityScheduled:
		return "call " + ev.Name
	case history.ActivityCompleted:
		return ev.Name + " done"
	case history.ActivityFailed:
		return ev.Name + " failed"
	case history.ExecutionCompleted:
		return "completed"
	case history.ExecutionFailed:
		return "failed"
	case history.ExecutionContinuedAsNew:
		return "continue-as-new"
	case history.EventPublished:
		return "publish " + ev.Name
	}
	return string(ev.Kind)
}

// fingerprint identifies the state of the run: what can make its future
// differ. The history (times as offsets from the run's start) and status,
// every delivered event's fate in delivery order (which also says which
// are still to deliver), the attempts run (which history does not
// record), the choices since the instance's last turn (the order its
// inbox filled in), the clock's offset. Two points with one fingerprint
// have the same futures. A run in which another instance took a turn
// (started by a bus target) is fingerprinted by its whole timeline: it is
// never merged with another.
func (r *runState) fingerprint() string {
	h := sha256.New()
	w := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			r.p.t.Fatalf("heraldtest.Permute: fingerprint: %v", err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	w(r.started)
	w(r.e.clock.Now().Sub(r.began))
	for _, ev := range r.history() {
		ev.Time = timeOffset(ev.Time, r.began)
		ev.FireAt = timeOffset(ev.FireAt, r.began)
		ev.ReceivedAt = timeOffset(ev.ReceivedAt, r.began)
		w(ev)
	}
	if r.started {
		info, err := r.client.Status(r.e.ctx, r.p.id)
		if err != nil {
			r.p.t.Fatalf("heraldtest.Permute: %v", err)
		}
		w([]any{info.Status, info.Execution, info.Output, info.Failure, info.Blocked})
	}
	for _, i := range r.delivered {
		ev := r.p.spec.Events[i]
		w(ev.Label)
		if err, ok := r.refused[ev.Label]; ok {
			w(err.Error())
			continue
		}
		if ev.Lane == Correlated {
			ce, err := r.client.GetCorrelatedEvent(r.e.ctx, ev.Name, ev.Key)
			if err != nil {
				w("correlated: " + err.Error())
				continue
			}
			w(normalized(ce))
			continue
		}
		rec, err := r.client.EventFate(r.e.ctx, ev.Label)
		if err != nil {
			w("fate: " + err.Error())
			continue
		}
		w(normalized(rec))
	}
	units := slices.Clone(r.units)
	sort.Strings(units)
	w(units)
	w(r.segment)
	if r.others {
		w(r.tokens)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func timeOffset(t, base time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Time{}.Add(t.Sub(base))
}

// normalized is v as JSON with the members that hold absolute times
// removed (an absolute time differs between runs; a time that matters to
// the future shows as the clock's offset or in history). A member it does
// not know stays: a state it cannot prove equal is explored again.
func normalized(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err.Error()
	}
	return stripTimes(x)
}

var timeMembers = map[string]bool{"received_at": true, "updated_at": true, "created_at": true, "started_at": true,
	"published_at": true, "routed_at": true, "finished_at": true, "failed_at": true, "timestamp": true,
	"duration": true, "put_at": true, "expires_at": true, "due_at": true, "next_attempt_at": true, "time": true}

func stripTimes(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, m := range v {
			if timeMembers[k] {
				delete(v, k)
				continue
			}
			v[k] = stripTimes(m)
		}
	case []any:
		for i := range v {
			v[i] = stripTimes(v[i])
		}
	}
	return x
}

func (r *runState) outcome(ordering string) *Outcome {
	o := &Outcome{Ordering: ordering, Tenant: r.tenant, Client: r.client, InstanceID: r.p.id,
		Fates: map[string]*herald.EventRecord{}, Correlated: map[string]*herald.CorrelatedEvent{}, Refused: r.refused}
	if r.started {
		info, err := r.client.Status(r.e.ctx, r.p.id)
		if err != nil {
			r.p.t.Fatalf("heraldtest.Permute: %v", err)
		}
		o.Status, o.Output, o.Err = info.Status, info.Output, info.Err()
		o.History = r.history()
	}
	for _, i := range r.delivered {
		ev := r.p.spec.Events[i]
		if _, ok := r.refused[ev.Label]; ok {
			continue
		}
		if ev.Lane == Correlated {
			if ce, err := r.client.GetCorrelatedEvent(r.e.ctx, ev.Name, ev.Key); err == nil {
				o.Correlated[ev.Label] = ce
			} else {
				o.Correlated[ev.Label] = r.corr[ev.Label]
			}
			continue
		}
		rec, err := r.client.EventFate(r.e.ctx, ev.Label)
		if err != nil {
			r.p.t.Fatalf("heraldtest.Permute: fate of %s: %v", ev.Label, err)
		}
		o.Fates[ev.Label] = rec
	}
	return o
}

// recorder is the testing.TB a check runs with: it records failures
// instead of failing the test, so that Permute can report the shortest
// failing ordering. What it does not override (Helper, Name, TempDir,
// Cleanup, ...) goes to the real test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) record(fail bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || fail
	if msg != "" {
		r.msgs = append(r.msgs, msg)
	}
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fail()                     { r.record(true, "") }
func (r *recorder) FailNow()                  { r.record(true, ""); runtime.Goexit() }
func (r *recorder) Error(args ...any)         { r.record(true, fmt.Sprintln(args...)) }
func (r *recorder) Errorf(f string, a ...any) { r.record(true, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatal(args ...any)         { r.record(true, fmt.Sprintln(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, a ...any) { r.record(true, fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recorder) Log(args ...any)           { r.record(false, "log: "+fmt.Sprintln(args...)) }
func (r *recorder) Logf(f string, a ...any)   { r.record(false, "log: "+fmt.Sprintf(f, a...)) }
func (r *recorder) Skip(args ...any)          { runtime.Goexit() }
func (r *recorder) Skipf(string, ...any)      { runtime.Goexit() }
func (r *recorder) SkipNow()                  { runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runCheck runs check on o in a goroutine of its own (so that Fatal can
// end it) and returns what it reported.
func runCheck(t testing.TB, check func(testing.TB, *Outcome), o *Outcome) ([]string, bool) {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				rec.record(true, fmt.Sprintf("the check panicked: %v", p))
			}
		}()
		check(rec, o)
	}()
	<-done
	for i, m := range rec.msgs {
		rec.msgs[i] = strings.TrimRight(m, "\n")
	}
	return rec.msgs, rec.Failed()
}
