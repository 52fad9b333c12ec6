package storagetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The tests of the tenant registry, TenantsReady, SubscribeAll, NextWake
// across tenants, InstanceList paging and Blocked reasons. A store may be
// shared with other subtests, so what is read across tenants is checked
// only for this subtest's tenants (all prefixed with b.tenant).

func (b *bundle) ensureTenant(tenant string) {
	b.t.Helper()
	if err := b.s.TenantEnsure(b.ctx, &storage.TenantEnsureParams{Tenant: tenant, Now: t0}); err != nil {
		b.t.Fatalf("TenantEnsure(%s): %v", tenant, err)
	}
}

func (b *bundle) getTenant(tenant string) *heraldtype.Tenant {
	b.t.Helper()
	tn, err := b.s.TenantGet(b.ctx, &storage.TenantGetParams{Tenant: tenant})
	if err != nil {
		b.t.Fatalf("TenantGet(%s): %v", tenant, err)
	}
	return tn
}

// ownTenants keeps the ids of ids that start with b.tenant.
func (b *bundle) ownTenants(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		if strings.HasPrefix(id, b.tenant) {
			out = append(out, id)
		}
	}
	return out
}

func testTenantRegistry(b *bundle) {
	t := b.t
	ta, tb := b.tenant+"-a", b.tenant+"-b"
	_, err := b.s.TenantGet(b.ctx, &storage.TenantGetParams{Tenant: ta})
	wantErr(t, "TenantGet before registering", err, heraldtype.ErrNotFound)

	b.ensureTenant(tb)
	b.ensureTenant(ta)
	b.ensureTenant(ta) // idempotent
	got := b.getTenant(ta)
	wantEqual(t, "ID", got.ID, ta)
	wantEqual(t, "Limits after ensure", got.Limits, heraldtype.TenantLimits{})
	wantTime(t, "CreatedAt", got.CreatedAt, t0)
	wantTime(t, "UpdatedAt", got.UpdatedAt, t0)

	limits := heraldtype.TenantLimits{
		MaxUnconsumedEvents: 10, MaxCarryForwardExecutions: 2, MaxQueuedEvents: 300,
		MaxPayloadBytes: 4096, MaxPayloadDepth: 8, EventRetention: 90 * time.Minute,
	}
	put, err := b.s.TenantPut(b.ctx, &storage.TenantPutParams{Tenant: ta, Limits: limits, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("TenantPut: %v", err)
	}
	wantEqual(t, "Limits returned by put", put.Limits, limits)
	wantTime(t, "CreatedAt kept by put", put.CreatedAt, t0)
	wantTime(t, "UpdatedAt set by put", put.UpdatedAt, at(time.Hour))
	got = b.getTenant(ta)
	wantEqual(t, "Limits read back", got.Limits, limits)
	wantEqual(t, "the other tenant's limits", b.getTenant(tb).Limits, heraldtype.TenantLimits{})

	// Ensure does not touch a registered tenant's overrides.
	b.ensureTenant(ta)
	wantEqual(t, "Limits after a second ensure", b.getTenant(ta).Limits, limits)

	// Refusals change nothing.
	for _, bad := range []heraldtype.TenantLimits{
		{MaxUnconsumedEvents: -1}, {MaxCarryForwardExecutions: -1}, {MaxQueuedEvents: -1},
		{MaxPayloadBytes: -1}, {MaxPayloadDepth: -1}, {EventRetention: -time.Second},
	} {
		_, err := b.s.TenantPut(b.ctx, &storage.TenantPutParams{Tenant: ta, Limits: bad, Now: at(2 * time.Hour)})
		wantErr(t, fmt.Sprintf("TenantPut(%+v)", bad), err, heraldtype.ErrInvalidArgument)
	}
	got = b.getTenant(ta)
	wantEqual(t, "Limits after refused puts", got.Limits, limits)
	wantTime(t, "UpdatedAt after refused puts", got.UpdatedAt, at(time.Hour))
	for _, bad := range []string{"", "a\x00b", "\xff", strings.Repeat("x", storage.MaxIDBytes+1)} {
		wantErr(t, fmt.Sprintf("TenantEnsure(%q)", bad),
			b.s.TenantEnsure(b.ctx, &storage.TenantEnsureParams{Tenant: bad, Now: t0}), heraldtype.ErrInvalidArgument)
		wantErr(t, fmt.Sprintf("TenantPut(%q)", bad),
			errOf(b.s.TenantPut(b.ctx, &storage.TenantPutParams{Tenant: bad, Now: t0})), heraldtype.ErrInvalidArgument)
	}

	// Put registers; zero limits clear the overrides.
	tc := b.tenant + "-c"
	if _, err := b.s.TenantPut(b.ctx, &storage.TenantPutParams{Tenant: tc, Limits: heraldtype.TenantLimits{MaxQueuedEvents: 1}, Now: t0}); err != nil {
		t.Fatalf("TenantPut(c): %v", err)
	}
	if _, err := b.s.TenantPut(b.ctx, &storage.TenantPutParams{Tenant: tc, Now: at(time.Second)}); err != nil {
		t.Fatalf("TenantPut(c, zero): %v", err)
	}
	wantEqual(t, "Limits after a zero put", b.getTenant(tc).Limits, heraldtype.TenantLimits{})

	// The longest id the text rules allow is stored unchanged.
	long := b.tenant + strings.Repeat("é", (storage.MaxIDBytes-len(b.tenant))/2)
	b.ensureTenant(long)
	wantEqual(t, "long id", b.getTenant(long).ID, long)

	list, err := b.s.TenantList(b.ctx, &storage.TenantListParams{})
	if err != nil {
		t.Fatalf("TenantList: %v", err)
	}
	var ids []string
	for _, tn := range list {
		ids = append(ids, tn.ID)
		if tn.ID == ta && tn.Limits != limits {
			t.Fatalf("TenantList: limits of a %+v, want %+v", tn.Limits, limits)
		}
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("TenantList not ordered by id: %q", ids)
	}
	want := []string{ta, tb, tc, long}
	slices.Sort(want)
	if got := b.ownTenants(ids); !slices.Equal(got, want) {
		t.Fatalf("TenantList: own tenants %q, want %q", got, want)
	}
}

// testTenantsReady covers TenantsReady's predicate: turns (messages,
// leases, not_before, future timers, terminal instances) and activities
// (visible_at, leases), for a list of tenants and for every registered one.
func testTenantsReady(b *bundle) {
	t := b.t
	name := func(s string) string { return b.tenant + "-" + s }
	ready := func(kinds storage.WorkKind, now time.Time, tenants []string) []string {
		t.Helper()
		got, err := b.s.TenantsReady(b.ctx, &storage.TenantsReadyParams{Tenants: tenants, Kinds: kinds, Now: now})
		if err != nil {
			t.Fatalf("TenantsReady: %v", err)
		}
		if !slices.IsSorted(got) {
			t.Fatalf("TenantsReady not ordered: %q", got)
		}
		return b.ownTenants(got)
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
	}
	all := []string{name("idle"), name("turn"), name("act"), name("leased"), name("delayed"), name("timer"), name("done")}
	for _, tn := range all {
		b.ensureTenant(tn)
	}
	// turn: a kick ready at once.
	b.in(name("turn")).create("i", t0)
	// act: its only work is an activity task (its turn is committed).
	b.in(name("act")).scheduleActivities("i", 2)
	// leased: a turn claimed at t0 with a one-minute lease.
	lb := b.in(name("leased"))
	lb.create("i", t0)
	lb.claimOne("i", t0)
	// delayed: a turn abandoned with RetryAt t0+1m.
	db := b.in(name("delayed"))
	db.create("i", t0)
	dt := db.claimOne("i", t0)
	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: db.tenant, InstanceID: "i",
		LockToken: dt.LockToken, RetryAt: at(time.Minute)}); err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	// timer: a timer firing at t0+1m, nothing else.
	tmb := b.in(name("timer"))
	tmb.create("i", t0)
	tp := tmb.commitParams(tmb.claimOne("i", t0), t0)
	tp.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: at(time.Minute)}}
	tmb.commit(tp)
	// done: a completed instance.
	doneb := b.in(name("done"))
	doneb.create("i", t0)
	dp := doneb.commitParams(doneb.claimOne("i", t0), t0)
	dp.Status = heraldtype.StatusCompleted
	dp.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, t0)}
	doneb.commit(dp)

	now := at(time.Second)
	want("turns, listed", ready(storage.WorkTurns, now, all), name("turn"))
	want("turns, registered", ready(storage.WorkTurns, now, nil), name("turn"))
	want("activities", ready(storage.WorkActivities, now, nil), name("act"))
	want("all kinds", ready(storage.WorkAll, now, nil), name("act"), name("turn"))
	want("zero kinds is all", ready(0, now, all), name("act"), name("turn"))
	want("a list with duplicates", ready(storage.WorkAll, now, []string{name("turn"), name("turn"), name("idle")}), name("turn"))
	want("an empty list", ready(storage.WorkAll, now, []string{}))
	want("an unregistered tenant listed", ready(storage.WorkAll, now, []string{name("unregistered")}))

	// After a minute: the lease ran out (at exactly t0+1m it is still
	// live), the RetryAt and the timer passed.
	want("at the lease's end", ready(storage.WorkTurns, at(time.Minute), nil), name("delayed"), name("timer"), name("turn"))
	later := at(time.Minute + time.Second)
	want("turns later", ready(storage.WorkTurns, later, nil), name("delayed"), name("leased"), name("timer"), name("turn"))

	// An activity claimed is not ready until its lease runs out.
	ab := b.in(name("act"))
	tasks := ab.claimActivities(now, 10)
	if len(tasks) != 1 {
		t.Fatalf("ActivityClaim: %d tasks, want 1", len(tasks))
	}
	want("activity leased", ready(storage.WorkActivities, at(30*time.Second), nil))
	want("activity lease run out", ready(storage.WorkActivities, now.Add(lease+time.Second), nil), name("act"))
	// Retried for later: ready at RetryAt.
	if err := b.s.ActivityRetry(b.ctx, &storage.ActivityRetryParams{Tenant: ab.tenant, InstanceID: "i", Execution: 1,
		TaskSeq: 2, LockToken: tasks[0].LockToken, RetryAt: at(time.Hour)}); err != nil {
		t.Fatalf("ActivityRetry: %v", err)
	}
	want("activity before RetryAt", ready(storage.WorkActivities, at(time.Hour-time.Second), nil))
	want("activity at RetryAt", ready(storage.WorkActivities, at(time.Hour), nil), name("act"))

	// Refusals.
	_, err := b.s.TenantsReady(b.ctx, &storage.TenantsReadyParams{Kinds: 1 << 6, Now: now})
	wantErr(t, "unknown kinds", err, heraldtype.ErrInvalidArgument)
	_, err = b.s.TenantsReady(b.ctx, &storage.TenantsReadyParams{Tenants: []string{name("turn"), ""}, Now: now})
	wantErr(t, "an empty tenant id", err, heraldtype.ErrInvalidArgument)
}

// testNextWakeAllTenants: NextWake with AllTenants is the earliest wake of
// every registered tenant. It works far after the other subtests' times,
// so that on a shared store their wakes are all before its Now.
func testNextWakeAllTenants(b *bundle) {
	t := b.t
	base := t0.Add(1000 * 24 * time.Hour)
	x, y := b.in(b.tenant+"-x"), b.in(b.tenant+"-y")
	for _, c := range []*bundle{x, y} {
		b.ensureTenant(c.tenant)
		c.create("i", base)
	}
	xp := x.commitParams(x.claimOne("i", base), base)
	xp.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: base.Add(time.Hour)}}
	x.commit(xp)
	yp := y.commitParams(y.claimOne("i", base), base)
	yp.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: base.Add(2 * time.Hour)}}
	y.commit(yp)

	wake := func(now time.Time) (time.Time, bool) {
		t.Helper()
		got, ok, err := b.s.NextWake(b.ctx, &storage.NextWakeParams{Tenant: "ignored", AllTenants: true, Now: now})
		if err != nil {
			t.Fatalf("NextWake(AllTenants): %v", err)
		}
		return got, ok
	}
	if got, ok := wake(base); !ok || !got.Equal(base.Add(time.Hour)) {
		t.Fatalf("NextWake(AllTenants) = %v, %v; want x's timer", got, ok)
	}
	if got, ok := wake(base.Add(time.Hour)); !ok || !got.Equal(base.Add(2*time.Hour)) {
		t.Fatalf("NextWake(AllTenants) after x's timer = %v, %v; want y's timer", got, ok)
	}
	if got, ok := wake(base.Add(2 * time.Hour)); ok {
		t.Fatalf("NextWake(AllTenants) after both timers = %v; want none", got)
	}
}

// testSubscribeAll: one subscription hears every tenant, by kind, and drain
// reports and forgets the tenants.
func testSubscribeAll(b *bundle) {
	t := b.t
	turns, drainTurns, cancelTurns := b.s.SubscribeAll(storage.WorkTurns)
	defer cancelTurns()
	acts, drainActs, cancelActs := b.s.SubscribeAll(storage.WorkActivities)
	defer cancelActs()
	x, y := b.in(b.tenant+"-x"), b.in(b.tenant+"-y")
	x.create("i", t0)
	y.create("i", t0)
	wantDrained(b, "turns after two creates", turns, drainTurns, x.tenant, y.tenant)
	if got := b.ownTenants(drainTurns()); len(got) != 0 {
		t.Fatalf("a second drain returned %q", got)
	}
	b.ownTenants(drainActs()) // creates may wake every kind on some stores

	// An activity wakes the activity subscriber with its tenant.
	p := y.commitParams(y.claimOne("i", t0), t0)
	sched := ev(2, history.ActivityScheduled, t0)
	sched.Name = "work"
	p.NewEvents = []history.Event{sched}
	p.Activities = []storage.ActivityTask{{TaskSeq: 2, Name: "work"}}
	y.commit(p)
	wantDrained(b, "activities", acts, drainActs, y.tenant)

	// After cancel nothing is recorded.
	drainTurns()
	cancelTurns()
	x.raise("i", "e1", "go", t0)
	if got := b.ownTenants(drainTurns()); len(got) != 0 {
		t.Fatalf("a cancelled subscription recorded %q", got)
	}
}

// wantDrained waits (at most 10 s) until drains have reported every tenant
// of want (writes are reported as they commit, so one drain may hold only
// some; each report also wakes ch), and fails if any other of this
// subtest's tenants is reported.
func wantDrained(b *bundle, what string, ch <-chan struct{}, drain func() []string, want ...string) {
	b.t.Helper()
	seen := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-ch:
		case <-timeout:
			b.t.Fatalf("%s: drained %v, want %q", what, seen, want)
		}
		for _, tn := range b.ownTenants(drain()) {
			if !slices.Contains(want, tn) {
				b.t.Fatalf("%s: drain reported %q, want only %q", what, tn, want)
			}
			seen[tn] = true
		}
		if len(seen) == len(want) {
			return
		}
	}
}

// testInstanceListPaging pages through instances with ties on CreatedAt,
// with inserts between pages, and with time bounds.
func testInstanceListPaging(b *bundle) {
	t := b.t
	// Creation times: 3 instances at t0+1s, 2 at t0+2s, 2 at t0+3s.
	times := map[string]time.Duration{"a": 1, "b": 1, "c": 1, "d": 2, "e": 2, "f": 3, "g": 3}
	for _, id := range []string{"c", "a", "g", "e", "b", "f", "d"} {
		b.create(id, at(times[id]*time.Second))
	}
	page := func(p storage.InstanceListParams) ([]string, string) {
		t.Helper()
		p.Tenant = b.tenant
		insts, next, err := b.s.InstanceList(b.ctx, &p)
		if err != nil {
			t.Fatalf("InstanceList(%+v): %v", p, err)
		}
		ids := []string{}
		for _, inst := range insts {
			ids = append(ids, inst.ID)
		}
		return ids, next
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
	}
	all, next := page(storage.InstanceListParams{})
	want("one page", all, "g", "f", "e", "d", "c", "b", "a")
	wantEqual(t, "cursor after the last page", next, "")

	p1, next := page(storage.InstanceListParams{Limit: 3})
	want("page 1", p1, "g", "f", "e")
	if next == "" {
		t.Fatal("no cursor after page 1")
	}
	// Inserted between pages: a newer instance and one tied with the
	// cursor's time whose id sorts before it (both before the cursor in
	// page order), and one tied after it.
	b.create("h", at(4*time.Second))
	b.create("ee", at(2*time.Second)) // after "e" in id order, so before the cursor: not seen
	b.create("dd", at(2*time.Second)) // after the cursor ("e") in page order: seen
	p2, next := page(storage.InstanceListParams{Limit: 3, After: next})
	want("page 2", p2, "dd", "d", "c")
	p3, next := page(storage.InstanceListParams{Limit: 3, After: next})
	want("page 3", p3, "b", "a")
	wantEqual(t, "cursor after page 3", next, "")

	// Time bounds are half-open: [after, before).
	inRange, _ := page(storage.InstanceListParams{CreatedAfter: at(2 * time.Second), CreatedBefore: at(3 * time.Second)})
	want("created in [2s, 3s)", inRange, "ee", "e", "dd", "d")
	since, _ := page(storage.InstanceListParams{CreatedAfter: at(3 * time.Second)})
	want("created since 3s", since, "h", "g", "f")
	before, _ := page(storage.InstanceListParams{CreatedBefore: at(2 * time.Second)})
	want("created before 2s", before, "c", "b", "a")
	// Bounds, a filter and a cursor together.
	q1, next := page(storage.InstanceListParams{CreatedBefore: at(3 * time.Second), Status: heraldtype.StatusPending, Limit: 2})
	want("bounded page 1", q1, "ee", "e")
	q2, _ := page(storage.InstanceListParams{CreatedBefore: at(3 * time.Second), Status: heraldtype.StatusPending, Limit: 2, After: next})
	want("bounded page 2", q2, "dd", "d")

	// Another tenant's instances never show, even with a cursor made here.
	other, _ := b.in(b.tenant + "-other").page(storage.InstanceListParams{After: next})
	want("other tenant", other)

	for _, bad := range []string{"x", "!!!", next[:len(next)-2] + "%%", strings.Repeat("A", 5000)} {
		_, _, err := b.s.InstanceList(b.ctx, &storage.InstanceListParams{Tenant: b.tenant, After: bad})
		wantErr(t, fmt.Sprintf("InstanceList(After: %q)", bad), err, heraldtype.ErrInvalidArgument)
	}
}

func (b *bundle) page(p storage.InstanceListParams) ([]string, string) {
	b.t.Helper()
	p.Tenant = b.tenant
	insts, next, err := b.s.InstanceList(b.ctx, &p)
	if err != nil {
		b.t.Fatalf("InstanceList: %v", err)
	}
	ids := []string{}
	for _, inst := range insts {
		ids = append(ids, inst.ID)
	}
	return ids, next
}

// testBlocked: TurnAbandon's and ActivityRetry's reasons show on the
// instance until a commit, a completion or a retry without one clears them.
func testBlocked(b *bundle) {
	t := b.t
	const noWorkflow = "no runtime has workflow wf registered"
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	wantEqual(t, "Blocked of a new instance", turn.Instance.Blocked, "")
	abandon := func(turn *storage.Turn, reason string) {
		t.Helper()
		if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: turn.Instance.ID,
			LockToken: turn.LockToken, Blocked: reason}); err != nil {
			t.Fatalf("TurnAbandon: %v", err)
		}
	}
	abandon(turn, noWorkflow)
	wantEqual(t, "Blocked after abandon", b.get("i").Blocked, noWorkflow)
	listed, _, err := b.s.InstanceList(b.ctx, &storage.InstanceListParams{Tenant: b.tenant})
	if err != nil || len(listed) != 1 {
		t.Fatalf("InstanceList: %d, %v", len(listed), err)
	}
	wantEqual(t, "Blocked listed", listed[0].Blocked, noWorkflow)
	other := b.in(b.tenant + "-o")
	other.create("i", t0)
	wantEqual(t, "Blocked in another tenant", other.get("i").Blocked, "")

	// The next claim shows it; an abandon without a reason clears it.
	turn = b.claimOne("i", at(time.Second))
	wantEqual(t, "Blocked on the claimed turn", turn.Instance.Blocked, noWorkflow)
	abandon(turn, "")
	wantEqual(t, "Blocked after an abandon without reason", b.get("i").Blocked, "")

	// A commit clears it (a simple commit, and one that schedules work).
	abandon(b.claimOne("i", at(2*time.Second)), noWorkflow)
	turn = b.claimOne("i", at(3*time.Second))
	b.commit(b.commitParams(turn, at(3*time.Second)))
	wantEqual(t, "Blocked after a commit", b.get("i").Blocked, "")
	b.raise("i", "e1", "go", at(4*time.Second))
	abandon(b.claimOne("i", at(4*time.Second)), noWorkflow)
	turn = b.claimOne("i", at(5*time.Second))
	p := b.commitParams(turn, at(5*time.Second))
	sched := ev(2, history.ActivityScheduled, at(5*time.Second))
	sched.Name = "work"
	p.NewEvents = []history.Event{sched}
	p.Activities = []storage.ActivityTask{{TaskSeq: 2, Name: "work", Input: json.RawMessage(`1`)}}
	b.commit(p)
	wantEqual(t, "Blocked after a commit with an activity", b.get("i").Blocked, "")

	// An activity retried with a reason shows on the instance.
	const noActivity = "no runtime has activity work registered"
	retry := func(task *storage.ActivityTask, reason string, when time.Time) {
		t.Helper()
		if err := b.s.ActivityRetry(b.ctx, &storage.ActivityRetryParams{Tenant: b.tenant, InstanceID: task.InstanceID,
			Execution: task.Execution, TaskSeq: task.TaskSeq, LockToken: task.LockToken, RetryAt: when, Blocked: reason}); err != nil {
			t.Fatalf("ActivityRetry: %v", err)
		}
	}
	claimTask := func(now time.Time) *storage.ActivityTask {
		t.Helper()
		tasks := b.claimActivities(now, 10)
		if len(tasks) != 1 {
			t.Fatalf("ActivityClaim: %d tasks, want 1", len(tasks))
		}
		return tasks[0]
	}
	retry(claimTask(at(6*time.Second)), noActivity, at(7*time.Second))
	wantEqual(t, "Blocked by an activity", b.get("i").Blocked, noActivity)
	// The instance's own reason comes first.
	b.raise("i", "e2", "go", at(7*time.Second))
	turn = b.claimOne("i", at(7*time.Second))
	abandon(turn, noWorkflow)
	wantEqual(t, "own reason before the activity's", b.get("i").Blocked, noWorkflow)
	b.commit(b.commitParams(b.claimOne("i", at(8*time.Second)), at(8*time.Second)))
	wantEqual(t, "the activity's reason after a commit", b.get("i").Blocked, noActivity)
	// A retry without a reason clears the task's; a completion deletes it.
	task := claimTask(at(9 * time.Second))
	retry(task, "", at(9*time.Second))
	wantEqual(t, "Blocked after a retry without reason", b.get("i").Blocked, "")
	retry(claimTask(at(10*time.Second)), noActivity, at(10*time.Second))
	wantEqual(t, "Blocked by the activity again", b.get("i").Blocked, noActivity)
	if err := b.complete(claimTask(at(11*time.Second)), `"ok"`, nil, at(11*time.Second)); err != nil {
		t.Fatalf("ActivityComplete: %v", err)
	}
	wantEqual(t, "Blocked after the activity completed", b.get("i").Blocked, "")
}
