package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// LeaderElect: see storage.LeaderStore.
func (s *Store) LeaderElect(ctx context.Context, p *storage.LeaderElectParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("postgres: elect leader")
	}
	if err := backend.ValidateLeader(p, true); err != nil {
		return false, fmt.Errorf("postgres: elect leader: %w", err)
	}
	now := backend.NowOr(p.Now)
	var won bool
	err := s.do(ctx, func(ctx context.Context) error {
		var holder string
		err := s.pool.QueryRow(ctx, `INSERT INTO leaders (tenant, name, holder, lease_until) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant, name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
			WHERE leaders.holder = excluded.holder OR leaders.lease_until < $5
			RETURNING holder`, p.Tenant, p.Name, p.Holder, now.Add(p.Lease).UnixNano(), now.UnixNano()).Scan(&holder)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			won = false
		case err != nil:
			return err
		default:
			won = holder == p.Holder
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("postgres: elect leader %q: %w", p.Name, err)
	}
	return won, nil
}

// LeaderResign: see storage.LeaderStore.
func (s *Store) LeaderResign(ctx context.Context, p *storage.LeaderElectParams) error {
	if p == nil {
		return backend.NilParams("postgres: resign leadership")
	}
	if err := backend.ValidateLeader(p, false); err != nil {
		return fmt.Errorf("postgres: resign leadership: %w", err)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM leaders WHERE tenant = $1 AND name = $2 AND holder = $3`,
			p.Tenant, p.Name, p.Holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: resign leadership %q: %w", p.Name, err)
	}
	return nil
}
