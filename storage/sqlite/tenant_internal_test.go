package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// A database made before the tenant registry (migration 0004) is upgraded
// in place: every tenant it held data of is registered.
func TestMigrateRegistersExistingTenants(t *testing.T) {
	ctx := context.Background()
	path := legacyDB(t, 4,
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t-inst', 'i', 'wf', 'pending', 1, 1, 1)`,
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t-inst', 'j', 'wf', 'pending', 1, 1, 1)`,
		`INSERT INTO inbox (tenant, instance_id, kind, visible_at, created_at) VALUES ('t-inbox', 'i', 'event', 1, 1)`,
		`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at) VALUES ('t-event', 'e', 'i', 'positional', 'go', 'pending', 1, 1)`,
		`INSERT INTO correlated_events (tenant, def, key, created_at, updated_at) VALUES ('t-corr', 'd', 'k', 1, 1)`,
		`INSERT INTO event_definitions (tenant, name, buffer, version, created_at, updated_at) VALUES ('t-def', 'n', 'fifo', 1, 1, 1)`)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version-3 database: %v", err)
	}
	defer s.Close()
	list, err := s.TenantList(ctx, &storage.TenantListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tn := range list {
		ids = append(ids, tn.ID)
		if tn.CreatedAt.IsZero() || tn.Limits != (heraldtype.TenantLimits{}) {
			t.Errorf("migrated tenant %+v", tn)
		}
	}
	if want := []string{"t-corr", "t-def", "t-event", "t-inbox", "t-inst"}; !slices.Equal(ids, want) {
		t.Fatalf("tenants after the migration: %q, want %q", ids, want)
	}
	insts, _, err := s.InstanceList(ctx, &storage.InstanceListParams{Tenant: "t-inst"})
	if err != nil || len(insts) != 2 || insts[0].ID != "j" {
		t.Fatalf("InstanceList after the migration: %v, %v", insts, err)
	}
}

// TenantsReady probes the claim indexes per tenant, and an InstanceList
// page with a cursor is a range scan of instances_created, never a scan of
// a tenant's rows or a sort.
func TestTenantsReadyAndListPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := func(q string, args ...any) string { t.Helper(); return queryPlan(t, s, q, args...) }
	q := `SELECT tn.id FROM tenants tn WHERE ` + readyTurnsSQL + ` OR ` + readyActivitiesSQL + ` ORDER BY tn.id`
	p := plan(q, 1)
	for _, idx := range []string{"instances_ready", "instances_leased", "activities_ready", "activities_leased"} {
		if !strings.Contains(p, idx) {
			t.Errorf("TenantsReady does not probe %s:\n%s", idx, p)
		}
	}
	if strings.Contains(p, "SCAN instances") || strings.Contains(p, "SCAN activities") {
		t.Errorf("TenantsReady scans a table:\n%s", p)
	}
	p = plan(`SELECT `+shownInstanceCols+` FROM instances WHERE tenant = ? AND status = ? AND (created_at, id) < (?, ?)
		ORDER BY created_at DESC, id DESC LIMIT +?`, "t", "pending", 1, "i", 10)
	if !strings.Contains(p, "instances_created") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("InstanceList page: not a range scan of instances_created:\n%s", p)
	}
}
