package rule

import (
	"errors"
	"strings"
)

// ErrInvalid matches (errors.Is) every error Compile returns: the rule was
// refused and nothing about it may be stored. The error is an
// *InvalidError listing the problems.
var ErrInvalid = errors.New("rule: invalid filter rule")

// ErrNotNumeric matches (errors.Is) an *InvalidError one of whose
// problems is CodeNotNumeric: an ordering op was given an operand that is
// not a number.
var ErrNotNumeric = errors.New("rule: ordering op needs a number")

// ProblemCode classifies a Problem for programs; most problems have none
// (their Message and Path say everything).
type ProblemCode string

// CodeNotNumeric: an ordering op (gt gte lt lte) was given a value that
// is not a number. Ordering is numeric only, so "10" never sorts before
// "9" by accident.
const CodeNotNumeric ProblemCode = "not_numeric"

// Problem is one reason a rule was refused.
type Problem struct {
	// Path locates the problem in the rule: "$" is the root,
	// "$.conditions[1].op" the op of the root's second item.
	Path string `json:"path"`
	// Code is set for the problems a program may want to tell apart
	// (CodeNotNumeric); empty otherwise.
	Code    ProblemCode `json:"code,omitempty"`
	Message string      `json:"message"`
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

// Is makes errors.Is(err, ErrNotNumeric) true when a problem has
// CodeNotNumeric.
func (e *InvalidError) Is(target error) bool {
	if target != ErrNotNumeric {
		return false
	}
	for _, p := range e.Problems {
		if p.Code == CodeNotNumeric {
			return true
		}
	}
	return false
}
