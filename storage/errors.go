package storage

import (
	"errors"
	"regexp"

	"github.com/heraldwf/herald/heraldtype"
)

// A backend's error for a store failure carries the driver's text (a
// SQLSTATE, "database or disk is full (13)") and backend names ("sqlite:
// raise event …"). That helps an operator reading the log and nobody else,
// and differs between backends: where a user reads an error (an HTTP
// answer, a bus attempt's record) Herald says ErrorText, and the raw error
// goes to the log.

// StoreFailure returns Herald's words for err if it is a failure of the
// store itself (ErrStorageFull, ErrUnavailable, ErrClosed), or "".
func StoreFailure(err error) string {
	switch {
	case errors.Is(err, heraldtype.ErrStorageFull):
		return "the store has no room left (a full disk or quota); the write was not made"
	case errors.Is(err, heraldtype.ErrUnavailable):
		return "the store could not be reached or lost its connection; whether a write was made is unknown"
	case errors.Is(err, heraldtype.ErrClosed):
		return "the store is closed"
	}
	return ""
}

// backendPrefix is the part of an error message that names the backend.
var backendPrefix = regexp.MustCompile(`\b(sqlite|postgres): `)

// ErrorText is err's message where a user reads it: StoreFailure's words
// for a store failure, else err's message without backend names, the same
// on every backend.
func ErrorText(err error) string {
	if s := StoreFailure(err); s != "" {
		return s
	}
	return backendPrefix.ReplaceAllString(err.Error(), "")
}
