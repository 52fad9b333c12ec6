package backend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The checks of the bus's params (storage.BusStore states the rules), made
// before a backend sends anything: every failure wraps
// heraldtype.ErrInvalidArgument and nothing is written. Each backend calls
// these and wraps the error with its prefix; none keeps a check of its own
// that needs no SQL.

// Defaults and caps of the bus's params (storage.BusStore).
const (
	BusRouteMax      = 100
	BusClaimMax      = 1
	BusLease         = time.Minute
	BusListLimit     = 100
	BusMaxListLimit  = 1000
	BusOpLimit       = 1000
	BusPruneLimit    = 1000
	BusMaxRetries    = 1 << 30
	BusMaxScriptVers = math.MaxInt32
	// BusMaxSourceBytes caps an event's source: "workflow:" and an
	// instance id.
	BusMaxSourceBytes = len("workflow:") + storage.MaxIDBytes
)

// checkID checks an identifier: storage.TextProblem with MaxIDBytes.
func checkID(what, s string) error {
	if p := storage.TextProblem(s, storage.MaxIDBytes); p != "" {
		return Invalid("%s %s", what, p)
	}
	return nil
}

// checkOptID is checkID for a filter field, where "" does not filter.
func checkOptID(what, s string) error {
	if s == "" {
		return nil
	}
	return checkID(what, s)
}

// checkName checks a name (an event type, a pattern): storage.TextProblem
// with MaxNameBytes.
func checkName(what, s string) error {
	if p := storage.TextProblem(s, storage.MaxNameBytes); p != "" {
		return Invalid("%s %s", what, p)
	}
	return nil
}

// checkText checks text stored as text that is no identifier (a source, a
// script, an error kind): valid UTF-8 without NUL bytes; "" is allowed.
func checkText(what, s string) error {
	switch {
	case !utf8.ValidString(s):
		return Invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return Invalid("%s contains a NUL byte", what)
	}
	return nil
}

// checkJSONText checks a JSON document the store keeps as text (event
// data, an attempt's result, a filter): valid UTF-8 without NUL bytes
// (Go's JSON checker lets invalid UTF-8 through, and a JSON encoder would
// replace it).
func checkJSONText(what string, b json.RawMessage) error {
	switch {
	case !utf8.Valid(b):
		return Invalid("%s is not valid UTF-8", what)
	case bytes.IndexByte(b, 0) >= 0:
		return Invalid("%s contains a NUL byte", what)
	}
	return nil
}

// checkNonNegative refuses a negative count, limit, cursor or duration.
func checkNonNegative(what string, n int64) error {
	if n < 0 {
		return Invalid("negative %s %d", what, n)
	}
	return nil
}

// busLimit is a page or batch size: n, def if n is 0, at most max (0: no
// cap); a negative n is refused.
func busLimit(n, def, max int) (int, error) {
	if n < 0 {
		return 0, Invalid("negative limit %d", n)
	}
	if n == 0 {
		n = def
	}
	if max > 0 && n > max {
		n = max
	}
	return n, nil
}

// CheckBusTenant checks a bus call's tenant.
func CheckBusTenant(tenant string) error { return storage.ValidateTenantID(tenant) }

// CheckBusID checks a bus call's tenant and the identifier it names (what:
// "subscription id", "script id", "event id").
func CheckBusID(tenant, what, id string) error {
	if err := storage.ValidateTenantID(tenant); err != nil {
		return err
	}
	return checkID(what, id)
}

// CheckBusEvent checks an event to publish (BusPublish, a turn's Publish):
// its id and type follow the text rules, its data is there (that it is
// JSON the engine checks; the hot path does not parse it again) and is
// valid UTF-8 without NUL, its source is text of at most BusMaxSourceBytes,
// its trace context storable (storage.TraceParentProblem).
func CheckBusEvent(ev *storage.BusPublishEvent) error {
	if err := checkID("event id", ev.ID); err != nil {
		return err
	}
	if err := checkName("event type", ev.Type); err != nil {
		return err
	}
	if len(ev.Data) == 0 {
		return Invalid("event %q has no data (want a JSON value)", ev.ID)
	}
	if err := checkJSONText("event data", ev.Data); err != nil {
		return err
	}
	if err := checkText("event source", ev.Source); err != nil {
		return err
	}
	if len(ev.Source) > BusMaxSourceBytes {
		return Invalid("event source is %d bytes, over the %d-byte cap", len(ev.Source), BusMaxSourceBytes)
	}
	if p := storage.TraceParentProblem(ev.TraceParent); p != "" {
		return Invalid("event %q: trace context %s", ev.ID, p)
	}
	return nil
}

// CheckBusPublish checks BusPublish's params (not nil).
func CheckBusPublish(p *storage.BusPublishParams) error {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return err
	}
	return CheckBusEvent(&p.Event)
}

// CheckTurnPublish checks a turn's published events
// (storage.TurnCommitParams.Publish) as BusPublish's.
func CheckTurnPublish(evs []storage.BusPublishEvent) error {
	for i := range evs {
		if err := CheckBusEvent(&evs[i]); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
	}
	return nil
}

// BusRouteArgs checks BusRoute's params (not nil) and returns the number of
// events to route at most.
func BusRouteArgs(p *storage.BusRouteParams) (max int, err error) {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return 0, err
	}
	if p.Route == nil {
		return 0, Invalid("no Route function")
	}
	return busLimit(p.Max, BusRouteMax, 0)
}

// CheckBusDecisions checks the decisions Route returned for one event:
// each names a subscription by a valid id, none twice.
func CheckBusDecisions(ds []storage.BusRouteDecision) error {
	for i := range ds {
		if err := checkID("subscription", ds[i].Subscription); err != nil {
			return fmt.Errorf("decision %d: %w", i, err)
		}
	}
	// A few decisions per event are the rule: a quadratic scan allocates
	// nothing; a map takes over where it would be slow.
	if len(ds) <= 16 {
		for i := range ds {
			for j := range i {
				if ds[j].Subscription == ds[i].Subscription {
					return Invalid("subscription %q decided twice", ds[i].Subscription)
				}
			}
		}
		return nil
	}
	seen := make(map[string]bool, len(ds))
	for i := range ds {
		if seen[ds[i].Subscription] {
			return Invalid("subscription %q decided twice", ds[i].Subscription)
		}
		seen[ds[i].Subscription] = true
	}
	return nil
}

// BusClaimArgs checks BusClaim's params (not nil) and returns the number of
// executions to claim at most and the lease.
func BusClaimArgs(p *storage.BusClaimParams) (max int, lease time.Duration, err error) {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return 0, 0, err
	}
	if err := checkNonNegative("Max", int64(p.Max)); err != nil {
		return 0, 0, err
	}
	if err := checkNonNegative("Lease", int64(p.Lease)); err != nil {
		return 0, 0, err
	}
	max, lease = p.Max, p.Lease
	if max == 0 {
		max = BusClaimMax
	}
	if lease == 0 {
		lease = BusLease
	}
	return max, lease, nil
}

// CheckBusFinish checks BusFinish's params (not nil): the tenant and each
// result (CheckBusResult). Lock tokens are not checked here: a token that
// owns nothing gets ErrLeaseLost for its result.
func CheckBusFinish(p *storage.BusFinishParams) error {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return err
	}
	for i := range p.Results {
		if err := CheckBusResult(&p.Results[i]); err != nil {
			return fmt.Errorf("result %d: %w", i, err)
		}
	}
	return nil
}

// CheckBusResult checks one result of BusFinish: a known outcome, a dead
// letter with its letter, an attempt result and error kinds stored as text
// (valid UTF-8 without NUL), a letter's target of valid UTF-8 (it is stored
// as JSON, whose encoder would replace invalid UTF-8). The attempt's error,
// stack and logs and the letter's error and stack are free text, never
// refused.
func CheckBusResult(r *storage.BusResult) error {
	switch r.Outcome {
	case storage.BusSucceeded, storage.BusRetry, storage.BusReleased:
	case storage.BusDeadLetter:
		d := r.DeadLetter
		if d == nil {
			return Invalid("a dead letter without DeadLetter")
		}
		if err := CheckBusTarget(&d.Target); err != nil {
			return err
		}
		if err := checkText("dead letter error kind", string(d.ErrorKind)); err != nil {
			return err
		}
	default:
		return Invalid("unknown outcome %d", r.Outcome)
	}
	if err := checkJSONText("attempt result", r.Attempt.Result); err != nil {
		return err
	}
	return checkText("attempt error kind", string(r.Attempt.ErrorKind))
}

// CheckBusTarget checks a target's text (a subscription's, a dead
// letter's): valid UTF-8, as it is stored as JSON.
func CheckBusTarget(t *heraldtype.Target) error {
	for _, f := range [...]struct{ what, s string }{{"target kind", string(t.Kind)}, {"target script", t.Script},
		{"target workflow", t.Workflow}, {"target instance id", t.InstanceID}, {"target name", t.Name},
		{"target key", t.Key}, {"target handler", t.Handler}} {
		if !utf8.ValidString(f.s) {
			return Invalid("%s is not valid UTF-8", f.what)
		}
	}
	return nil
}

// BusTokenValid reports whether token may be a lock token a store handed
// out: not empty, and stored text. A token that is not owns nothing: its
// call gets ErrLeaseLost, not ErrInvalidArgument.
func BusTokenValid(token string) bool { return token != "" && checkText("", token) == nil }

// CheckBusHeartbeat checks BusHeartbeat's params (not nil): a zero
// LeaseUntil is refused; a token that cannot be one (BusTokenValid) gets
// ErrLeaseLost.
func CheckBusHeartbeat(p *storage.BusHeartbeatParams) error {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return err
	}
	if p.LeaseUntil.IsZero() {
		return Invalid("zero LeaseUntil")
	}
	if !BusTokenValid(p.LockToken) {
		return fmt.Errorf("execution %d: not a lock token: %w", p.Execution, heraldtype.ErrLeaseLost)
	}
	return nil
}

// CheckBusSubscription checks a subscription to put: its id and pattern
// follow the text rules, its filter is empty or JSON of valid UTF-8, its
// target valid UTF-8, its MaxRetries within [0, BusMaxRetries] and its
// Timeout not negative. What the filter and target mean the engine checks.
func CheckBusSubscription(tenant string, sub *heraldtype.Subscription) error {
	if err := CheckBusID(tenant, "subscription id", sub.ID); err != nil {
		return err
	}
	if err := checkName("pattern", sub.Pattern); err != nil {
		return err
	}
	if len(sub.Filter) > 0 {
		if err := checkJSONText("filter", sub.Filter); err != nil {
			return err
		}
		if !json.Valid(sub.Filter) {
			return Invalid("filter is not JSON")
		}
	}
	if sub.MaxRetries != nil && (*sub.MaxRetries < 0 || *sub.MaxRetries > BusMaxRetries) {
		return Invalid("MaxRetries %d out of range [0, %d]", *sub.MaxRetries, BusMaxRetries)
	}
	if sub.Timeout < 0 {
		return Invalid("negative Timeout %v", time.Duration(sub.Timeout))
	}
	return CheckBusTarget(&sub.Target)
}

// CheckBusScriptPut checks BusScriptPut's params (not nil): the source is
// stored text.
func CheckBusScriptPut(p *storage.BusScriptPutParams) error {
	if err := CheckBusID(p.Tenant, "script id", p.ID); err != nil {
		return err
	}
	return checkText("script source", p.Source)
}

// CheckBusScriptGet checks BusScriptGet's params (not nil): the version is
// within [0, BusMaxScriptVers] (0: the latest).
func CheckBusScriptGet(p *storage.BusScriptGetParams) error {
	if err := CheckBusID(p.Tenant, "script id", p.ID); err != nil {
		return err
	}
	if p.Version < 0 || p.Version > BusMaxScriptVers {
		return Invalid("script version %d out of range [0, %d]", p.Version, BusMaxScriptVers)
	}
	return nil
}

// CheckBusLetterFilter checks a dead-letter filter and its tenant: a
// subscription follows the id rule, an event type the name rule, an error
// kind is stored text (the rule BusFinish stores it by); "" does not
// filter.
func CheckBusLetterFilter(tenant string, f *storage.BusDeadLetterFilter) error {
	if err := storage.ValidateTenantID(tenant); err != nil {
		return err
	}
	if err := checkOptID("subscription", f.Subscription); err != nil {
		return err
	}
	if f.EventType != "" {
		if err := checkName("event type", f.EventType); err != nil {
			return err
		}
	}
	return checkText("error kind", string(f.ErrorKind))
}

// BusLetterListArgs checks BusDeadLetterList's params (not nil) and returns
// the page size.
func BusLetterListArgs(p *storage.BusDeadLetterListParams) (limit int, err error) {
	if err := CheckBusLetterFilter(p.Tenant, &p.Filter); err != nil {
		return 0, err
	}
	if err := checkNonNegative("cursor", p.Before); err != nil {
		return 0, err
	}
	return busLimit(p.Limit, BusListLimit, BusMaxListLimit)
}

// BusLetterOpArgs checks the params (not nil) of BusDeadLetterReprocess and
// BusDeadLetterDelete and returns the batch size.
func BusLetterOpArgs(p *storage.BusDeadLetterOpParams) (limit int, err error) {
	if err := CheckBusLetterFilter(p.Tenant, &p.Filter); err != nil {
		return 0, err
	}
	return busLimit(p.Limit, BusOpLimit, 0)
}

// BusAttemptListArgs checks BusAttemptList's params (not nil): at least one
// of EventID, Subscription and Execution, each valid, and a cursor not
// negative; it returns the page size.
func BusAttemptListArgs(p *storage.BusAttemptListParams) (limit int, err error) {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return 0, err
	}
	if p.EventID == "" && p.Subscription == "" && p.Execution == 0 {
		return 0, Invalid("no event id, subscription or execution")
	}
	if err := checkOptID("event id", p.EventID); err != nil {
		return 0, err
	}
	if err := checkOptID("subscription", p.Subscription); err != nil {
		return 0, err
	}
	if err := checkNonNegative("execution", p.Execution); err != nil {
		return 0, err
	}
	if err := checkNonNegative("cursor", p.After); err != nil {
		return 0, err
	}
	return busLimit(p.Limit, BusListLimit, BusMaxListLimit)
}

// BusPruneArgs checks BusPrune's params (not nil) and returns the batch
// size.
func BusPruneArgs(p *storage.BusPruneParams) (limit int, err error) {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return 0, err
	}
	return busLimit(p.Limit, BusPruneLimit, 0)
}

// CheckBusBacklog checks BusBacklog's params (not nil): a limit not
// negative (0: no limit).
func CheckBusBacklog(p *storage.BusBacklogParams) error {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return err
	}
	return checkNonNegative("limit", int64(p.Limit))
}
