package backend

import (
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// ValidateSends checks the events a turn sends (storage.TurnSend): a
// target, an event id and a name, the positional or queue lane, a trace
// context that can be stored. The error wraps ErrInvalidArgument.
func ValidateSends(sends []storage.TurnSend) error {
	for i := range sends {
		s := &sends[i]
		var problem string
		switch {
		case s.InstanceID == "":
			problem = "empty instance id"
		case s.EventID == "":
			problem = "empty event id"
		case s.Name == "":
			problem = "empty name"
		case s.Lane != history.LanePositional && s.Lane != history.LaneQueue:
			problem = fmt.Sprintf("lane %q is not positional or queue", s.Lane)
		default:
			problem = storage.TraceParentProblem(s.TraceParent)
		}
		if problem != "" {
			return fmt.Errorf("send %d (event %q): %s: %w", i, s.EventID, problem, heraldtype.ErrInvalidArgument)
		}
	}
	return nil
}
