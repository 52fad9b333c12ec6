package backend

import (
	"sync"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// ClaimState is what a claim saw of an instance besides its history and
// messages: whether it had correlation markers, activity tasks, and a
// correlated-lane event in its inbox (unknown, so true, when the claim did
// not load every message), and a Blocked reason.
type ClaimState struct {
	Markers, Tasks, Deliveries bool
	Blocked                    bool
}

// UnknownClaim is the state of a turn no note describes: everything may be
// there.
var UnknownClaim = ClaimState{Markers: true, Tasks: true, Deliveries: true, Blocked: true}

// ClaimNotes remembers, by lock token, what a store's claims saw of the
// instances they leased. Only the lease holder's commits make markers and
// activity tasks, and a correlated delivery needs a marker, so none of them
// appears while the turn runs: a commit whose claim saw none skips the
// statements that would find nothing (the withdrawn waits' deliveries, an
// ending's deletes of tasks and markers). Forgetting a note is always
// safe: the commit then looks, as it does for a turn another store (or
// process) claimed. The zero value is ready to use.
type ClaimNotes struct {
	mu    sync.Mutex
	notes map[string]claimNote // lock token → note
}

type claimNote struct {
	ClaimState
	leaseUntil int64 // unix nanos
}

// maxClaimNotes bounds the notes of turns that are never committed nor
// abandoned (their worker died or gave up).
const maxClaimNotes = 1 << 14

// Note notes what the claim of t saw: st, and whether one of t's messages
// is a correlated-lane event (or not all of them were loaded, maxMessages)
// and whether the instance has a Blocked reason.
func (n *ClaimNotes) Note(t *storage.Turn, maxMessages int, st ClaimState) {
	st.Deliveries = st.Deliveries || len(t.Messages) >= maxMessages
	st.Blocked = t.Instance.Blocked != ""
	for i := range t.Messages {
		if t.Messages[i].Lane == history.LaneCorrelated {
			st.Deliveries = true
			break
		}
	}
	n.add(t.LockToken, t.LeaseUntil, st)
}

func (n *ClaimNotes) add(token string, leaseUntil time.Time, st ClaimState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.notes == nil {
		n.notes = make(map[string]claimNote)
	}
	if len(n.notes) >= maxClaimNotes {
		now := time.Now().UnixNano()
		for t, note := range n.notes {
			if note.leaseUntil < now {
				delete(n.notes, t)
			}
		}
		if len(n.notes) >= maxClaimNotes {
			clear(n.notes)
		}
	}
	n.notes[token] = claimNote{ClaimState: st, leaseUntil: leaseUntil.UnixNano()}
}

// Take forgets token's note and returns it; without one, UnknownClaim.
func (n *ClaimNotes) Take(token string) ClaimState {
	n.mu.Lock()
	defer n.mu.Unlock()
	note, ok := n.notes[token]
	if !ok {
		return UnknownClaim
	}
	delete(n.notes, token)
	return note.ClaimState
}
