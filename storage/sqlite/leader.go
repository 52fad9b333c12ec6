package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// LeaderElect: see storage.LeaderStore.
func (s *Store) LeaderElect(ctx context.Context, p *storage.LeaderElectParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("sqlite: elect leader")
	}
	if err := backend.ValidateLeader(p, true); err != nil {
		return false, fmt.Errorf("sqlite: elect leader: %w", err)
	}
	now := backend.NowOr(p.Now)
	var won bool
	err := s.write(ctx, func(w *wtx) error {
		var holder string
		err := w.queryRow(`INSERT INTO leaders (tenant, name, holder, lease_until) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
			WHERE leaders.holder = excluded.holder OR leaders.lease_until < ?
			RETURNING holder`, p.Tenant, p.Name, p.Holder, now.Add(p.Lease).UnixNano(), now.UnixNano()).Scan(&holder)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			won = false
		case err != nil:
			return err
		default:
			won = holder == p.Holder
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: elect leader %q: %w", p.Name, err)
	}
	return won, nil
}

// LeaderResign: see storage.LeaderStore.
func (s *Store) LeaderResign(ctx context.Context, p *storage.LeaderElectParams) error {
	if p == nil {
		return backend.NilParams("sqlite: resign leadership")
	}
	if err := backend.ValidateLeader(p, false); err != nil {
		return fmt.Errorf("sqlite: resign leadership: %w", err)
	}
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`DELETE FROM leaders WHERE tenant = ? AND name = ? AND holder = ?`,
			p.Tenant, p.Name, p.Holder); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: resign leadership %q: %w", p.Name, err)
	}
	return nil
}
