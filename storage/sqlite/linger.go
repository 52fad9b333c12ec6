package sqlite

import (
	"time"
)

// One fsync for a raise and the turn it hands off.
//
// With the sync pipeline, a raise that hands its instance off (see
// storage.EventRaiseParams.OnClaimed) gives the turn to the runtime as soon
// as the raise's transaction has committed, before its fsync: the turn then
// runs while the WAL is flushed, as a turn claimed early does (writeEarly).
// Its commit reaches the writer a fraction of a millisecond later. If the
// syncer flushed the raise at once, the turn's commit would wait for that
// flush and then for one of its own: two flushes one after the other for
// every event. Instead, the syncer lingers before a flush that covers a
// handed-off raise until the turn's commit (or give-back) has committed too,
// or until maxLinger after the hand-off, whichever comes first; one flush
// then makes both durable. Durability is unchanged: the raise is answered
// only after a flush that covers it, and the turn's commit only after one
// that covers it. The syncer lingers only when it was idle, waiting for
// a transaction: when one was already waiting as its last flush ended, the
// disk is the bottleneck, the next flush is due at once, and holding it
// would only make every caller wait longer.
//
// The writer keeps the hand-offs whose turn has not come back (pendTurns,
// in transaction order) and publishes the oldest one (linger) for the
// syncer. A turn that never comes back (its runtime stopped, or its commit
// failed before reaching the writer) holds nothing after maxLinger: the
// writer drops it from the list then.

// maxLinger bounds how long the syncer holds a flush for a handed-off
// turn's commit: about one flush of the WAL on a local SSD. Past it the
// turn's commit would have waited less for a flush of its own.
const maxLinger = 500 * time.Microsecond

// pendTurn is a handed-off turn whose commit or give-back the writer has
// not yet run.
type pendTurn struct {
	token string        // its lock token
	seq   int64         // the raise's transaction (see Store.committed)
	until time.Duration // since s.t0: when the syncer stops waiting for it
}

// lingerMark is the oldest pending hand-off, as published to the syncer.
type lingerMark struct {
	seq   int64
	until time.Duration
}

// handedOff records, on the writer, a turn handed off by the raise
// committed as transaction seq.
func (s *Store) handedOff(token string, seq int64) {
	s.pendTurns = append(s.pendTurns, pendTurn{token: token, seq: seq, until: time.Since(s.t0) + s.cfg.maxLinger})
}

// turnBack records, on the writer, that the turn holding token is being
// committed or given back. A token that is not pending (the turn came from
// a claim, or was dropped) is ignored.
func (s *Store) turnBack(token string) {
	for i := range s.pendTurns {
		if s.pendTurns[i].token == token {
			s.pendTurns = append(s.pendTurns[:i], s.pendTurns[i+1:]...)
			return
		}
	}
}

// publishLinger drops the pending hand-offs past their time and tells the
// syncer which one to wait for. It runs on the writer before each item is
// sent to the syncer, so that the item that carries a turn's commit finds
// the mark already moved, and after each batch with wake set: a turn whose
// commit failed sends the syncer no item, so the syncer is woken to
// re-read the mark.
func (s *Store) publishLinger(wake bool) {
	now := time.Since(s.t0)
	i := 0
	for i < len(s.pendTurns) && s.pendTurns[i].until <= now {
		i++
	}
	if i > 0 {
		s.pendTurns = append(s.pendTurns[:0], s.pendTurns[i:]...)
	}
	cur := s.linger.Load()
	var next *lingerMark
	if len(s.pendTurns) > 0 {
		p := s.pendTurns[0]
		if cur != nil && cur.seq == p.seq && cur.until == p.until {
			return
		}
		next = &lingerMark{seq: p.seq, until: p.until}
	} else if cur == nil {
		return
	}
	s.linger.Store(next)
	if wake {
		select {
		case s.lingerWake <- struct{}{}:
		default:
		}
	}
}

// lingerFor returns how long the syncer should wait before flushing the
// transactions up to last: until the oldest pending hand-off's turn is
// back, if that hand-off's raise is among them. Zero: flush now.
func (s *Store) lingerFor(last int64) time.Duration {
	m := s.linger.Load()
	if m == nil || m.seq > last {
		return 0
	}
	return max(m.until-time.Since(s.t0), 0)
}
