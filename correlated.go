package herald

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// PutCorrelatedEvent stores payload under (def, key), or updates the payload
// if the key exists, and in the same transaction delivers it to every
// instance waiting on (def, key) — fan-out — or, when the definition says
// DeleteAfterFirstCorrelation, to exactly one waiter, after which the
// correlated event is deleted (with no waiter it is kept until the first
// wait). A wait made later completes at once. The definition must exist and
// have a Correlation config; its schema and payload cap apply. Errors:
// ErrEventInvalid (no such definition, no correlation config, empty key,
// invalid payload; nothing stored).
func (c *Client) PutCorrelatedEvent(ctx context.Context, def, key string, payload any) (_ *CorrelatedEvent, err error) {
	raw, d, err := c.door.admitCorrelated(ctx, c.tenant, def, key, payload, c.door.limitsFor(ctx, c.tenant))
	if err != nil {
		return nil, err
	}
	ctx, span := c.startSendSpan(ctx, "herald.put_correlated_event", func() []attribute.KeyValue {
		return []attribute.KeyValue{attrLane.String(string(history.LaneCorrelated)), attrEventName.String(def), attrKey.String(key)}
	})
	defer func() { endSpan(span, err) }()
	if err := c.ensureTenant(ctx); err != nil {
		return nil, fmt.Errorf("put correlated event %s/%s: %w", def, key, err)
	}
	now := c.cfg.Clock.Now()
	p := &storage.CorrelatedPutParams{Tenant: c.tenant, Def: def, Key: key, Payload: raw,
		DeleteAfterFirst: d.Correlation.DeleteAfterFirstCorrelation, Now: now, TraceParent: traceParent(span)}
	if d.Correlation.TTL > 0 {
		p.ExpiresAt = now.Add(d.Correlation.TTL)
	}
	ce, err := c.store.CorrelatedPut(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("put correlated event %s/%s: %w", def, key, err)
	}
	c.cfg.Observer.EventAccepted(EventReport{Tenant: c.tenant, Lane: string(history.LaneCorrelated), Name: def, Key: key})
	return ce, nil
}

// GetCorrelatedEvent returns the correlated event under (def, key), or
// ErrNotFound.
func (c *Client) GetCorrelatedEvent(ctx context.Context, def, key string) (*CorrelatedEvent, error) {
	if !textOK(def, MaxNameBytes) || !textOK(key, MaxKeyBytes) {
		return nil, notFound("correlated event", def+"/"+key)
	}
	ce, err := idempotent(ctx, func() (*CorrelatedEvent, error) {
		return c.store.CorrelatedGet(ctx, &storage.CorrelatedGetParams{Tenant: c.tenant, Def: def, Key: key})
	})
	if err != nil {
		return nil, fmt.Errorf("correlated event %s/%s: %w", def, key, err)
	}
	return ce, nil
}

// DeleteCorrelatedEvent deletes the correlated event under (def, key)
// (ErrNotFound if none). Events it already produced keep their fates.
func (c *Client) DeleteCorrelatedEvent(ctx context.Context, def, key string) error {
	if !textOK(def, MaxNameBytes) || !textOK(key, MaxKeyBytes) {
		return notFound("delete correlated event", def+"/"+key)
	}
	if err := c.store.CorrelatedDelete(ctx, &storage.CorrelatedGetParams{Tenant: c.tenant, Def: def, Key: key}); err != nil {
		return fmt.Errorf("delete correlated event %s/%s: %w", def, key, err)
	}
	return nil
}

// CorrelatedSearch filters SearchCorrelatedEvents. Zero fields do not
// filter.
type CorrelatedSearch struct {
	// Earliest and Latest bound the creation time (inclusive).
	Earliest, Latest time.Time
	// HasCorrelatedEvents keeps only correlated events that did (true) or
	// did not (false) produce an event — false finds orphans.
	HasCorrelatedEvents *bool
	// Limit is the page size: default 100, at most 1000.
	Limit int
	// Bookmark is the value the previous page returned; "" for the first.
	Bookmark string
}

// SearchCorrelatedEvents lists the correlated events of def, oldest first,
// one page at a time: it returns the page and the bookmark of the next one
// ("" after the last page). A bookmark that no search returned is refused
// with ErrInvalidArgument; a definition name that can never exist finds
// nothing.
func (c *Client) SearchCorrelatedEvents(ctx context.Context, def string, q CorrelatedSearch) ([]*CorrelatedEvent, string, error) {
	if !textOK(def, MaxNameBytes) {
		return nil, "", nil
	}
	type page struct {
		evs  []*CorrelatedEvent
		next string
	}
	pg, err := idempotent(ctx, func() (page, error) {
		evs, next, err := c.store.CorrelatedSearch(ctx, &storage.CorrelatedSearchParams{Tenant: c.tenant, Def: def,
			Earliest: q.Earliest, Latest: q.Latest, HasProduced: q.HasCorrelatedEvents, Limit: q.Limit, Bookmark: q.Bookmark})
		return page{evs, next}, err
	})
	evs, next := pg.evs, pg.next
	if err != nil {
		return nil, "", fmt.Errorf("search correlated events %s: %w", def, err)
	}
	return evs, next, nil
}
