package backend

import (
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
)

// NilParams is every Store method's answer to a nil params: op (the
// backend's prefix and the call, "sqlite: claim turns") and an error
// wrapping heraldtype.ErrInvalidArgument, so that the HTTP layer answers it
// as a bad request and not as a failure of the store.
func NilParams(op string) error {
	return fmt.Errorf("%s: nil params: %w", op, heraldtype.ErrInvalidArgument)
}

// Invalid is an error wrapping heraldtype.ErrInvalidArgument: a parameter
// that can never be valid.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), heraldtype.ErrInvalidArgument)
}
