package backend

import "github.com/heraldwf/herald/storage"

// LastFates calls apply, in order, with each fate update of a commit that
// wins: the last of each event id, as if all were applied in order
// (storage.TurnCommitParams.Fates). It is the one statement of that rule:
// every backend's commit writes fates through it, and herald_commit_many
// takes at most one update per event id and commit.
func LastFates(fs []storage.FateUpdate, apply func(*storage.FateUpdate)) {
	if len(fs) <= 16 {
		// Few updates (a turn rarely makes more than one): a scan ahead
		// costs less than a map.
	next:
		for i := range fs {
			for j := i + 1; j < len(fs); j++ {
				if fs[j].EventID == fs[i].EventID {
					continue next
				}
			}
			apply(&fs[i])
		}
		return
	}
	last := make(map[string]int, len(fs))
	for i := range fs {
		last[fs[i].EventID] = i
	}
	for i := range fs {
		if last[fs[i].EventID] == i {
			apply(&fs[i])
		}
	}
}

// ReadyAtSQL is the ready_at rule, the one statement of it for every
// backend and for the PostgreSQL functions (functions.sql's readyAt): an
// instance is ready at the earliest visible_at of its inbox, and never
// while its inbox is empty (NULL). tenant and id are the SQL of the
// instance's key (placeholders or columns).
func ReadyAtSQL(tenant, id string) string {
	return `(SELECT MIN(m.visible_at) FROM inbox m WHERE m.tenant = ` + tenant + ` AND m.instance_id = ` + id + `)`
}
