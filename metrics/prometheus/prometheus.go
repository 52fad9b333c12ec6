// Package prometheus exports Herald's engine reports as Prometheus metrics:
// it is a herald.Observer adapter, and the only package of Herald that
// imports github.com/prometheus/client_golang.
//
// Labels are bounded by construction: lanes, outcomes, drop reasons, kinds
// and error types are the engine's own small enums; the tenant label exists
// only when WithTenantLabel asks for it, with a cap on distinct tenants; the
// subscription label (bus metrics only) exists only when
// WithSubscriptionLabel asks for it, with a cap per tenant. Instance ids,
// event ids, event names and types, and workflow or activity names are
// never labels: they are unbounded, and they belong in logs and traces.
//
// # Engine metrics
//
// Labels in braces; "tenant" comes first on each when WithTenantLabel is
// set.
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
// Lease losses of turns are herald_turns_total{outcome="lease_lost"}.
//
// # Event bus metrics
//
// The bus metrics without the herald_ prefix carry exactly the names of
// Herald's event-bus design (seed 004, "Monitoring and Metrics"), so that
// dashboards and alerts written against that design work unchanged; the
// ones the design does not name are herald_bus_*. "tenant" comes first
// when WithTenantLabel is set, then "subscription" when
// WithSubscriptionLabel is set, on every metric marked [s].
//
//	events_matched_total [s]                        subscriptions an event matched (pattern and filter): one per (event, subscription)
//	events_filtered_total [s]                       subscriptions whose pattern matched an event but whose filter did not
//	executions_queued_total [s]                     executions queued: one per match (see below)
//	executions_success_total [s]                    attempts that succeeded
//	executions_failed_total{error_type} [s]         attempts that did not succeed: retried or dead-lettered
//	dlq_events_total [s]                            executions that ended in the dead-letter queue
//	execution_duration_histogram [s]                histogram of attempt durations, seconds (succeeded or failed)
//	queue_depth_gauge                               executions claimed and waiting for a worker (no tenant label)
//	queue_capacity_gauge                            capacity of that queue, Config.Bus.QueueSize (no tenant label)
//	herald_bus_published_total{result}              Publish calls: "accepted", "duplicate" (id seen before, nothing changed), "refused" (back-pressure, nothing stored)
//	herald_bus_events_discarded_total               routed events that queued no execution (no subscription matched, or all filtered them out)
//	herald_bus_lease_lost_total [s]                 attempts whose result was not recorded: another worker owns the execution now
//
// error_type is the engine's error kind: timeout, runtime or resource
// (transient: retried while retries are left) or permanent, validation or
// permission (straight to the dead-letter queue); a failure reported with
// no kind or a kind this package does not know is counted as "unknown".
// A dead-lettered attempt counts in both executions_failed_total and
// dlq_events_total. Lease-lost attempts are neither successes nor failures
// (their execution is attempted again by its new owner) and their
// durations are not observed: they count only in herald_bus_lease_lost_total.
// So the failure rate of executions is
//
//	sum(rate(executions_failed_total[5m])) / (sum(rate(executions_failed_total[5m])) + sum(rate(executions_success_total[5m])))
//
// and a failed attempt creates its success series (at 0) too, so the
// ratio exists for a subscription that has never succeeded.
//
// executions_queued_total counts the executions routing queued, one per
// matched subscription; it equals events_matched_total today and is kept
// because the design names both. Retries and reprocessed dead letters are
// the same execution again and are not counted as queued.
//
// execution_duration_histogram has the buckets ExecutionDurationBuckets
// (1 ms to 2 min, about six per decade, with bounds at the design's 2 s p95
// target), fine enough for histogram_quantile to give p50, p95 and p99:
//
//	histogram_quantile(0.95, sum by (le) (rate(execution_duration_histogram_bucket[5m])))
//
// The queue gauges describe a runtime's dispatch queue (a process normally
// runs one runtime, and Prometheus's instance label tells processes apart)
// and are set from its latest report; they appear at the first report. Two
// runtimes in one process sharing an Observer overwrite each other's queue
// gauges: give such runtimes an Observer and registry each.
//
// alerts.yml, next to this file, holds Prometheus alerting and recording
// rules over these metrics (failure rate, queue depth, refused publishes,
// dead letters, execution latency); the module in alerttest checks them
// with Prometheus's own rule parser and PromQL engine.
package prometheus

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
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
// WithTenantLabel (and of a tenant id that is not valid UTF-8).
const OtherTenant = "other"

// OtherSubscription is the subscription label value of every subscription
// beyond the cap of WithSubscriptionLabel (and of a subscription id that is
// not valid UTF-8).
const OtherSubscription = "other"

// UnknownErrorType is the error_type of a failed bus attempt reported with
// no error kind, or with one this package does not know.
const UnknownErrorType = "unknown"

// errorTypes are the error_type label values besides UnknownErrorType: the
// engine's error kinds.
var errorTypes = map[string]bool{
	string(heraldtype.ErrorTimeout):    true,
	string(heraldtype.ErrorRuntime):    true,
	string(heraldtype.ErrorResource):   true,
	string(heraldtype.ErrorPermanent):  true,
	string(heraldtype.ErrorValidation): true,
	string(heraldtype.ErrorPermission): true,
}

// DefaultDurationBuckets are the histogram buckets, in seconds, of every
// duration metric unless WithDurationBuckets replaces them: 0.5 ms doubling
// up to about 16 s. Turns and claims on SQLite take well under a
// millisecond, so Prometheus's default buckets (from 5 ms) would lump them
// into one.
var DefaultDurationBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// ExecutionDurationBuckets are the buckets, in seconds, of
// execution_duration_histogram unless WithExecutionDurationBuckets replaces
// them: 1, 1.5, 2, 3, 5 and 7 in each decade from 1 ms to 7 s, then 10, 15,
// 20, 30, 45, 60, 90 and 120 s (32 buckets). Neighbouring bounds are at most 1.7
// apart, so a quantile interpolated by histogram_quantile is within that
// factor of the truth anywhere from 1 ms to 2 min, and the design's targets
// (p95 under 2 s; script timeouts of 30 s) are bounds themselves.
var ExecutionDurationBuckets = []float64{
	0.001, 0.0015, 0.002, 0.003, 0.005, 0.007,
	0.01, 0.015, 0.02, 0.03, 0.05, 0.07,
	0.1, 0.15, 0.2, 0.3, 0.5, 0.7,
	1, 1.5, 2, 3, 5, 7,
	10, 15, 20, 30, 45, 60, 90, 120,
}

// Option configures New.
type Option func(*config)

type config struct {
	maxTenants       int
	tenantSet        bool // WithTenantLabel was given
	maxSubscriptions int
	subscriptionSet  bool // WithSubscriptionLabel was given
	buckets          []float64
	execBuckets      []float64
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

// WithSubscriptionLabel adds a "subscription" label to the bus metrics
// that concern one subscription (events_matched_total, events_filtered_total,
// the executions_* counters, dlq_events_total,
// execution_duration_histogram and herald_bus_lease_lost_total), with at
// most maxPerTenant distinct subscription values per tenant label value:
// the first maxPerTenant subscriptions seen under a tenant label keep their
// id for the life of the Observer, every later one is counted as
// OtherSubscription. Without WithTenantLabel the cap is over all tenants
// together (and the same subscription id in two tenants is one series).
// Without this option no metric has a subscription label. maxPerTenant
// below 1 makes New return ErrInvalidOption.
//
// The label multiplies series: with both labels, each of those metrics
// has up to (maxTenants+1) × (maxPerTenant+1) series per other label value,
// and execution_duration_histogram has 35 time series for each of them
// (33 buckets with +Inf, a sum and a count).
func WithSubscriptionLabel(maxPerTenant int) Option {
	return func(c *config) { c.maxSubscriptions = maxPerTenant; c.subscriptionSet = true }
}

// WithDurationBuckets replaces DefaultDurationBuckets (seconds, strictly
// increasing; otherwise New returns ErrInvalidOption). It does not change
// execution_duration_histogram (WithExecutionDurationBuckets does).
func WithDurationBuckets(buckets ...float64) Option {
	return func(c *config) { c.buckets = append([]float64(nil), buckets...) }
}

// WithExecutionDurationBuckets replaces ExecutionDurationBuckets (seconds,
// strictly increasing; otherwise New returns ErrInvalidOption).
func WithExecutionDurationBuckets(buckets ...float64) Option {
	return func(c *config) { c.execBuckets = append([]float64(nil), buckets...) }
}

// Observer is a herald.Observer that records the engine's reports as
// Prometheus metrics. Its methods are safe for concurrent use and do no
// I/O. Set it as herald.Config.Observer (or ClientConfig.Observer), alone or
// in a herald.MultiObserver.
type Observer struct {
	herald.NopObserver

	tenants *tenantCap // nil: no tenant label
	subs    *subCap    // nil: no subscription label

	accepted, duplicate, delivered, dropped *prometheus.CounterVec
	turns, turnMessages                     *prometheus.CounterVec
	turnDuration, turnLatency               *prometheus.HistogramVec
	activities                              *prometheus.CounterVec
	activityDuration                        *prometheus.HistogramVec
	claims, claimed                         *prometheus.CounterVec
	claimDuration                           *prometheus.HistogramVec
	unreplayable, unregistered              *prometheus.CounterVec

	// The bus.
	matched, filtered, queued       *prometheus.CounterVec
	succeeded, failed, deadLettered *prometheus.CounterVec
	leaseLost, published, discarded *prometheus.CounterVec
	execDuration                    *prometheus.HistogramVec
	queueDepth, queueCapacity       *prometheus.GaugeVec

	all []prometheus.Collector
}

// New creates an Observer and registers its metrics on reg
// (prometheus.DefaultRegisterer when reg is nil), all at once: on error
// nothing is registered. Errors: ErrInvalidOption for a bad option,
// ErrAlreadyRegistered when reg already holds Herald's metrics, and
// whatever else reg.Register returns (wrapped) for a clash with other
// collectors.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	c := config{buckets: DefaultDurationBuckets, execBuckets: ExecutionDurationBuckets}
	for _, opt := range opts {
		opt(&c)
	}
	if c.tenantSet && c.maxTenants < 1 {
		return nil, fmt.Errorf("%w: WithTenantLabel(%d): the cap must be at least 1", ErrInvalidOption, c.maxTenants)
	}
	if c.subscriptionSet && c.maxSubscriptions < 1 {
		return nil, fmt.Errorf("%w: WithSubscriptionLabel(%d): the cap must be at least 1", ErrInvalidOption, c.maxSubscriptions)
	}
	if err := checkBuckets("WithDurationBuckets", c.buckets); err != nil {
		return nil, err
	}
	if err := checkBuckets("WithExecutionDurationBuckets", c.execBuckets); err != nil {
		return nil, err
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
	// Bus metrics of one subscription: tenant, then subscription.
	var subBase []string
	if c.subscriptionSet {
		o.subs = &subCap{max: c.maxSubscriptions, seen: map[string]map[string]struct{}{}}
		subBase = []string{"subscription"}
	}
	subLabels := func(extra ...string) []string { return labels(append(append([]string(nil), subBase...), extra...)...) }
	subCounter := func(name, help string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, subLabels(extra...))
		o.all = append(o.all, v)
		return v
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		// A vector without labels: the series appears at the first Set.
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, nil)
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

	// The bus: the design's names (no herald_ prefix), then Herald's own.
	o.matched = subCounter("events_matched_total", "Bus events a subscription matched (pattern and filter): one per event and subscription.")
	o.filtered = subCounter("events_filtered_total", "Bus events a subscription's pattern matched but its filter rejected: one per event and subscription.")
	o.queued = subCounter("executions_queued_total", "Bus executions queued by routing, one per matched subscription.")
	o.succeeded = subCounter("executions_success_total", "Bus execution attempts that succeeded.")
	o.failed = subCounter("executions_failed_total", "Bus execution attempts that did not succeed (retried or dead-lettered), by error type.", "error_type")
	o.deadLettered = subCounter("dlq_events_total", "Bus executions that ended in the dead-letter queue.")
	o.execDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execution_duration_histogram",
		Help:    "Bus execution attempt durations in seconds, succeeded or failed (lease-lost attempts excluded).",
		Buckets: c.execBuckets,
	}, subLabels())
	o.all = append(o.all, o.execDuration)
	o.queueDepth = gauge("queue_depth_gauge", "Bus executions claimed by this runtime and waiting for a worker.")
	o.queueCapacity = gauge("queue_capacity_gauge", "Capacity of this runtime's bus dispatch queue (Config.Bus.QueueSize).")
	o.published = counter("herald_bus_published_total", "Bus Publish calls by result: accepted, duplicate (nothing changed), refused (back-pressure, nothing stored).", "result")
	o.discarded = counter("herald_bus_events_discarded_total", "Routed bus events that queued no execution (no subscription matched, or every one filtered them out).")
	o.leaseLost = subCounter("herald_bus_lease_lost_total", "Bus execution attempts whose result was not recorded because another worker owns the execution now.")

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

func checkBuckets(option string, b []float64) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: %s: no buckets", ErrInvalidOption, option)
	}
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			return fmt.Errorf("%w: %s: buckets must be strictly increasing, %v", ErrInvalidOption, option, b)
		}
	}
	return nil
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
	if !utf8.ValidString(tenant) {
		return OtherTenant // Prometheus refuses it as a label value
	}
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

// subCap maps subscriptions to label values: under each tenant label
// value, the first max subscriptions seen keep their id, later ones become
// OtherSubscription. Memory is bounded: at most max ids per tenant label
// value, and tenant label values are bounded by tenantCap (or are one, "",
// without a tenant label).
type subCap struct {
	max  int
	mu   sync.RWMutex
	seen map[string]map[string]struct{} // tenant label value → subscriptions
}

func (s *subCap) label(tenantLabel, sub string) string {
	if !utf8.ValidString(sub) {
		return OtherSubscription
	}
	s.mu.RLock()
	subs := s.seen[tenantLabel]
	_, ok := subs[sub]
	full := len(subs) >= s.max
	s.mu.RUnlock()
	if ok {
		return sub
	}
	if full {
		return OtherSubscription
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	subs = s.seen[tenantLabel]
	if subs == nil {
		subs = map[string]struct{}{}
		s.seen[tenantLabel] = subs
	}
	if _, ok := subs[sub]; ok {
		return sub
	}
	if len(subs) >= s.max {
		return OtherSubscription
	}
	subs[sub] = struct{}{}
	return sub
}

// lv returns the label values of a report: the tenant's (when labelled)
// then extra.
func (o *Observer) lv(tenant string, extra ...string) []string {
	if o.tenants == nil {
		return extra
	}
	return append([]string{o.tenants.label(tenant)}, extra...)
}

// slv returns the label values of a bus report about one subscription:
// the tenant's and the subscription's (each when labelled), then extra.
func (o *Observer) slv(tenant, sub string, extra ...string) []string {
	var vs []string
	tl := ""
	if o.tenants != nil {
		tl = o.tenants.label(tenant)
		vs = append(vs, tl)
	}
	if o.subs != nil {
		vs = append(vs, o.subs.label(tl, sub))
	}
	return append(vs, extra...)
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

// BusPublished counts herald_bus_published_total by result: "refused"
// when Publish refused the event, otherwise "duplicate" or "accepted".
func (o *Observer) BusPublished(r herald.BusPublishReport) {
	result := "accepted"
	switch {
	case r.Refused:
		result = "refused"
	case r.Duplicate:
		result = "duplicate"
	}
	o.published.WithLabelValues(o.lv(r.Tenant, result)...).Inc()
}

// BusRouted counts events_matched_total and executions_queued_total once
// per matched subscription, events_filtered_total once per filtered one,
// and herald_bus_events_discarded_total when nothing matched.
func (o *Observer) BusRouted(r herald.BusRouteReport) {
	for _, sub := range r.Matched {
		lv := o.slv(r.Tenant, sub)
		o.matched.WithLabelValues(lv...).Inc()
		o.queued.WithLabelValues(lv...).Inc()
	}
	for _, sub := range r.Filtered {
		o.filtered.WithLabelValues(o.slv(r.Tenant, sub)...).Inc()
	}
	if len(r.Matched) == 0 {
		o.discarded.WithLabelValues(o.lv(r.Tenant)...).Inc()
	}
}

// BusAttempted counts the attempt by outcome: a success in
// executions_success_total; a retry or dead letter in
// executions_failed_total{error_type} (and a dead letter in
// dlq_events_total too); a lease loss in herald_bus_lease_lost_total only.
// The duration of a succeeded or failed attempt goes to
// execution_duration_histogram. A report with another outcome records
// nothing.
func (o *Observer) BusAttempted(r herald.BusAttemptReport) {
	switch r.Outcome {
	case herald.BusOutcomeSucceeded:
		lv := o.slv(r.Tenant, r.Subscription)
		o.succeeded.WithLabelValues(lv...).Inc()
		o.execDuration.WithLabelValues(lv...).Observe(seconds(r.Duration))
	case herald.BusOutcomeRetry, herald.BusOutcomeDeadLetter:
		lv := o.slv(r.Tenant, r.Subscription)
		errType := r.ErrorKind
		if !errorTypes[errType] {
			errType = UnknownErrorType
		}
		o.failed.WithLabelValues(append(lv, errType)...).Inc()
		// The success series exists (at 0) once its subscription has
		// failed, so that failures / (failures + successes) has a value
		// for a subscription that never succeeded.
		o.succeeded.WithLabelValues(lv...).Add(0)
		if r.Outcome == herald.BusOutcomeDeadLetter {
			o.deadLettered.WithLabelValues(lv...).Inc()
		}
		o.execDuration.WithLabelValues(lv...).Observe(seconds(r.Duration))
	case herald.BusOutcomeLeaseLost:
		o.leaseLost.WithLabelValues(o.slv(r.Tenant, r.Subscription)...).Inc()
	}
}

// BusQueue sets queue_depth_gauge and queue_capacity_gauge (negative
// values are recorded as 0).
func (o *Observer) BusQueue(r herald.BusQueueReport) {
	o.queueDepth.WithLabelValues().Set(float64(max(r.Depth, 0)))
	o.queueCapacity.WithLabelValues().Set(float64(max(r.Capacity, 0)))
}
