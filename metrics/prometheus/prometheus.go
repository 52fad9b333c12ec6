// Package prometheus exports Herald's engine reports as Prometheus metrics:
// it is a herald.Observer adapter, and the only package of Herald that
// imports github.com/prometheus/client_golang.
//
// Every metric is named herald_*. Labels are bounded by construction: lanes,
// outcomes, drop reasons and kinds are the engine's own small enums, and the
// tenant label exists only when WithTenantLabel asks for it, with a cap on
// distinct tenants. Instance ids, event ids, event names and workflow or
// activity names are never labels: they are unbounded, and they belong in
// logs and traces.
//
// Metrics (labels in braces; "tenant" first on each when WithTenantLabel is
// set):
//
//	herald_events_accepted_total{lane}              events stored by a client (duplicates excluded)
//	herald_events_duplicate_total{lane}             events whose id was seen before (nothing changed)
//	herald_events_delivered_total{lane}             events a turn delivered to a wait
//	herald_events_dropped_total{lane,reason}        events dropped, by drop reason
//	herald_turns_total{outcome}                     turns by outcome (committed, lease_lost, ...)
//	herald_turn_duration_seconds{outcome}           histogram of turn durations
//	herald_turn_claim_latency_seconds               histogram: how long a turn's oldest message waited to be claimed
//	herald_turn_messages_total                      inbox messages processed by turns
//	herald_activity_attempts_total{outcome}         activity attempts by outcome
//	herald_activity_duration_seconds{outcome}       histogram of activity attempt durations
//	herald_claims_total{kind,result}                claim calls (result "ok" or "error")
//	herald_claimed_total{kind}                      turns or activities claimed
//	herald_claim_duration_seconds{kind}             histogram of claim call durations
//	herald_instances_unreplayable_total{kind}       instances failed as unreplayable ("corrupt", "replay")
//	herald_unregistered_total{kind}                 work released as unregistered ("workflow", "activity")
//
// Lease losses are herald_turns_total{outcome="lease_lost"}.
package prometheus

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldwf/herald"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrAlreadyRegistered is returned by New when the registry already holds
// Herald's metrics (a second New on the same registry). The registry is
// left as it was. Create one Observer per registry and share it between
// runtimes and clients.
var ErrAlreadyRegistered = errors.New("herald/metrics/prometheus: herald metrics are already registered on this registry")

// ErrInvalidOption is returned by New for an option with a value out of
// range. Nothing is registered.
var ErrInvalidOption = errors.New("herald/metrics/prometheus: invalid option")

// OtherTenant is the tenant label value of every tenant beyond the cap of
// WithTenantLabel.
const OtherTenant = "other"

// DefaultDurationBuckets are the histogram buckets, in seconds, of every
// duration metric unless WithDurationBuckets replaces them: 0.5 ms doubling
// up to about 16 s. Turns and claims on SQLite take well under a
// millisecond, so Prometheus's default buckets (from 5 ms) would lump them
// into one.
var DefaultDurationBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// Option configures New.
type Option func(*config)

type config struct {
	maxTenants int
	tenantSet  bool // WithTenantLabel was given
	buckets    []float64
}

// WithTenantLabel adds a "tenant" label to every metric, with at most
// maxTenants distinct tenant values: the first maxTenants tenants seen keep
// their name for the life of the Observer, every later one is counted as
// OtherTenant. A tenant literally named "other" shares that series. Without
// this option no metric has a tenant label. maxTenants below 1 makes New
// return ErrInvalidOption.
func WithTenantLabel(maxTenants int) Option {
	return func(c *config) { c.maxTenants = maxTenants; c.tenantSet = true }
}

// WithDurationBuckets replaces DefaultDurationBuckets (seconds, strictly
// increasing; otherwise New returns ErrInvalidOption).
func WithDurationBuckets(buckets ...float64) Option {
	return func(c *config) { c.buckets = append([]float64(nil), buckets...) }
}

// Observer is a herald.Observer that records the engine's reports as
// Prometheus metrics. Its methods are safe for concurrent use and do no
// I/O. Set it as herald.Config.Observer (or ClientConfig.Observer), alone or
// in a herald.MultiObserver.
type Observer struct {
	herald.NopObserver

	tenants *tenantCap // nil: no tenant label

	accepted, duplicate, delivered, dropped *prometheus.CounterVec
	turns, turnMessages                     *prometheus.CounterVec
	turnDuration, turnLatency               *prometheus.HistogramVec
	activities                              *prometheus.CounterVec
	activityDuration                        *prometheus.HistogramVec
	claims, claimed                         *prometheus.CounterVec
	claimDuration                           *prometheus.HistogramVec
	unreplayable, unregistered              *prometheus.CounterVec

	all []prometheus.Collector
}

// New creates an Observer and registers its metrics on reg
// (prometheus.DefaultRegisterer when reg is nil), all at once: on error
// nothing is registered. Errors: ErrInvalidOption for a bad option,
// ErrAlreadyRegistered when reg already holds Herald's metrics, and
// whatever else reg.Register returns (wrapped) for a clash with other
// collectors.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	c := config{buckets: DefaultDurationBuckets}
	for _, opt := range opts {
		opt(&c)
	}
	if c.tenantSet && c.maxTenants < 1 {
		return nil, fmt.Errorf("%w: WithTenantLabel(%d): the cap must be at least 1", ErrInvalidOption, c.maxTenants)
	}
	if len(c.buckets) == 0 {
		return nil, fmt.Errorf("%w: WithDurationBuckets: no buckets", ErrInvalidOption)
	}
	for i := 1; i < len(c.buckets); i++ {
		if !(c.buckets[i] > c.buckets[i-1]) {
			return nil, fmt.Errorf("%w: WithDurationBuckets: buckets must be strictly increasing, %v", ErrInvalidOption, c.buckets)
		}
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}

	o := &Observer{}
	var base []string
	if c.tenantSet {
		o.tenants = &tenantCap{max: c.maxTenants, seen: map[string]struct{}{}}
		base = []string{"tenant"}
	}
	labels := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels(extra...))
		o.all = append(o.all, v)
		return v
	}
	histogram := func(name, help string, extra ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: c.buckets}, labels(extra...))
		o.all = append(o.all, v)
		return v
	}
	o.accepted = counter("herald_events_accepted_total", "Events stored by a client (RaiseEvent, Enqueue, PutCorrelatedEvent), duplicates excluded.", "lane")
	o.duplicate = counter("herald_events_duplicate_total", "Events whose id had been seen before: nothing changed.", "lane")
	o.delivered = counter("herald_events_delivered_total", "Events a committed turn delivered to a wait.", "lane")
	o.dropped = counter("herald_events_dropped_total", "Events dropped (fate dropped), by drop reason.", "lane", "reason")
	o.turns = counter("herald_turns_total", "Claimed turns by outcome (committed, lease_lost, commit_failed, unreplayable, unregistered).", "outcome")
	o.turnDuration = histogram("herald_turn_duration_seconds", "Turn durations, wall clock.", "outcome")
	o.turnLatency = histogram("herald_turn_claim_latency_seconds", "How long the oldest message of a turn had been visible when the turn was claimed.")
	o.turnMessages = counter("herald_turn_messages_total", "Inbox messages processed by turns.")
	o.activities = counter("herald_activity_attempts_total", "Activity attempts by outcome (completed, retrying, failed, lost, unregistered).", "outcome")
	o.activityDuration = histogram("herald_activity_duration_seconds", "Activity attempt durations, wall clock.", "outcome")
	o.claims = counter("herald_claims_total", "Claim calls by kind (turns, activities) and result (ok, error).", "kind", "result")
	o.claimed = counter("herald_claimed_total", "Turns or activities claimed.", "kind")
	o.claimDuration = histogram("herald_claim_duration_seconds", "Claim call durations.", "kind")
	o.unreplayable = counter("herald_instances_unreplayable_total", "Instances the runtime failed because it could not run them, by kind (corrupt, replay).", "kind")
	o.unregistered = counter("herald_unregistered_total", "Work released because this runtime has not registered its workflow or activity, by kind.", "kind")

	// One collector for all: Register is then all or nothing.
	if err := reg.Register(collectors(o.all)); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("%w (%w)", ErrAlreadyRegistered, err)
		}
		return nil, fmt.Errorf("herald/metrics/prometheus: register: %w", err)
	}
	return o, nil
}

// collectors makes a slice of collectors one collector.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// tenantCap maps tenants to label values: the first max tenants seen keep
// their name, later ones become OtherTenant.
type tenantCap struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func (t *tenantCap) label(tenant string) string {
	t.mu.RLock()
	_, ok := t.seen[tenant]
	full := len(t.seen) >= t.max
	t.mu.RUnlock()
	if ok {
		return tenant
	}
	if full {
		return OtherTenant
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[tenant]; ok {
		return tenant
	}
	if len(t.seen) >= t.max {
		return OtherTenant
	}
	t.seen[tenant] = struct{}{}
	return tenant
}

// lv returns the label values of a report: the tenant's (when labelled)
// then extra.
func (o *Observer) lv(tenant string, extra ...string) []string {
	if o.tenants == nil {
		return extra
	}
	return append([]string{o.tenants.label(tenant)}, extra...)
}

// EventAccepted counts herald_events_accepted_total, or
// herald_events_duplicate_total for a duplicate.
func (o *Observer) EventAccepted(r herald.EventReport) {
	if r.Duplicate {
		o.duplicate.WithLabelValues(o.lv(r.Tenant, r.Lane)...).Inc()
		return
	}
	o.accepted.WithLabelValues(o.lv(r.Tenant, r.Lane)...).Inc()
}

// EventDelivered counts herald_events_delivered_total.
func (o *Observer) EventDelivered(r herald.EventReport) {
	o.delivered.WithLabelValues(o.lv(r.Tenant, r.Lane)...).Inc()
}

// EventsDropped adds r.Count to herald_events_dropped_total.
func (o *Observer) EventsDropped(r herald.DropReport) {
	o.dropped.WithLabelValues(o.lv(r.Tenant, r.Lane, r.Reason)...).Add(float64(max(r.Count, 1)))
}

// TurnFinished counts the turn, its messages, its duration and its claim
// latency.
func (o *Observer) TurnFinished(r herald.TurnReport) {
	o.turns.WithLabelValues(o.lv(r.Tenant, r.Outcome)...).Inc()
	o.turnDuration.WithLabelValues(o.lv(r.Tenant, r.Outcome)...).Observe(seconds(r.Duration))
	o.turnLatency.WithLabelValues(o.lv(r.Tenant)...).Observe(seconds(r.Latency))
	if r.Messages > 0 {
		o.turnMessages.WithLabelValues(o.lv(r.Tenant)...).Add(float64(r.Messages))
	}
}

// ActivityAttempted counts the attempt and its duration.
func (o *Observer) ActivityAttempted(r herald.ActivityReport) {
	o.activities.WithLabelValues(o.lv(r.Tenant, r.Outcome)...).Inc()
	o.activityDuration.WithLabelValues(o.lv(r.Tenant, r.Outcome)...).Observe(seconds(r.Duration))
}

// Claimed counts the claim call, what it claimed and its duration.
func (o *Observer) Claimed(r herald.ClaimReport) {
	result := "ok"
	if r.Err != nil {
		result = "error"
	}
	o.claims.WithLabelValues(o.lv(r.Tenant, r.Kind, result)...).Inc()
	if r.Claimed > 0 {
		o.claimed.WithLabelValues(o.lv(r.Tenant, r.Kind)...).Add(float64(r.Claimed))
	}
	o.claimDuration.WithLabelValues(o.lv(r.Tenant, r.Kind)...).Observe(seconds(r.Duration))
}

// InstanceUnreplayable counts herald_instances_unreplayable_total.
func (o *Observer) InstanceUnreplayable(r herald.UnreplayableReport) {
	o.unreplayable.WithLabelValues(o.lv(r.Tenant, r.Kind)...).Inc()
}

// Unregistered counts herald_unregistered_total.
func (o *Observer) Unregistered(r herald.UnregisteredReport) {
	o.unregistered.WithLabelValues(o.lv(r.Tenant, r.Kind)...).Inc()
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }
