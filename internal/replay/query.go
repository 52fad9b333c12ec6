package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
)

// QueryHandler answers a query from the workflow's state: JSON in, JSON
// out. It runs after the replay, while the workflow code is parked where
// the history ends, and must not make decisions or block.
type QueryHandler func(args json.RawMessage) (json.RawMessage, error)

// Query is a query to answer after a read-only replay (Input.Query).
type Query struct {
	Name string
	Args json.RawMessage

	// Set by Run: Answered is true once the replay reached the end of the
	// history and the query was looked up (a replay that diverges from its
	// history leaves it false). Then Result or Err; Names lists the
	// handlers the workflow had registered (sorted), for an unknown name.
	Answered bool
	Result   json.RawMessage
	Err      error
	Names    []string
}

// ErrUnknownQuery is Query.Err for a name the workflow has not registered
// (at the point its history ends).
var ErrUnknownQuery = errors.New("no such query handler")

// QueryPanicError is Query.Err for a handler that panicked.
type QueryPanicError struct {
	Value string
	Stack string
}

func (e *QueryPanicError) Error() string { return "query handler panicked: " + e.Value }

// queryMisuse is the panic of a decision or a blocking call made by a
// query handler; answer turns it into a QueryPanicError.
const queryMisuse = "herald: a query handler cannot make decisions (activities, timers, waits, attributes) or block"

// SetQueryHandler registers (or, with a nil h, removes) the handler of
// query name. Registering is not a decision: it writes no history.
func (s *State) SetQueryHandler(name string, h QueryHandler) {
	if h == nil {
		delete(s.queries, name)
		return
	}
	if s.queries == nil {
		s.queries = map[string]QueryHandler{}
	}
	s.queries[name] = h
}

// QueryNames returns the names of the registered query handlers, sorted.
func (s *State) QueryNames() []string {
	names := make([]string, 0, len(s.queries))
	for n := range s.queries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// answer answers q from the replayed state. The code is parked (or has
// returned), so the handler reads its variables without a race.
func (s *State) answer(q *Query) {
	q.Answered = true
	h := s.queries[q.Name]
	if h == nil {
		q.Names, q.Err = s.QueryNames(), ErrUnknownQuery
		return
	}
	s.querying = true
	defer func() { s.querying = false }()
	func() {
		defer func() {
			if r := recover(); r != nil {
				q.Result, q.Err = nil, &QueryPanicError{Value: fmt.Sprint(r), Stack: string(debug.Stack())}
			}
		}()
		q.Result, q.Err = h(q.Args)
	}()
}
