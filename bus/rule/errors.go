package rule

import (
	"errors"
	"strings"
)

// ErrInvalid matches (errors.Is) every error Compile returns: the rule was
// refused and nothing about it may be stored. The error is an
// *InvalidError listing the problems.
var ErrInvalid = errors.New("rule: invalid filter rule")

// Problem is one reason a rule was refused.
type Problem struct {
	// Path locates the problem in the rule: "$" is the root,
	// "$.conditions[1].op" the op of the root's second item.
	Path    string `json:"path"`
	Message string `json:"message"`
}

// InvalidError is the error Compile returns: every problem found, in
// document order, at most MaxProblems of them (the last one then says how
// many more were not listed).
type InvalidError struct {
	Problems []Problem `json:"problems"`
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	b.WriteString("rule: invalid filter rule: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Path)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }
