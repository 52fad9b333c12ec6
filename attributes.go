package herald

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// Caps on an instance's searchable attributes (Context.SetAttributes).
const (
	// MaxAttributes caps the keys an instance has at once.
	MaxAttributes = storage.MaxAttributes
	// MaxAttributeKeyBytes caps a key: 1 to 64 bytes of ASCII letters,
	// digits, '_', '-' and '.', starting with a letter.
	MaxAttributeKeyBytes = storage.MaxAttributeKeyBytes
	// MaxAttributeValueBytes caps a string value.
	MaxAttributeValueBytes = storage.MaxAttributeValueBytes
)

// SetAttributes sets searchable attributes of the instance: each key of
// attrs to its value — a string, a bool, an integer (any Go integer type
// within int64) or a time.Time — or, with a nil value, removes the key.
// Keys not named keep their values. The attributes are stored on the
// instance with this turn (a decision, AttributesUpserted in history: a
// replay does not write them again), shown in InstanceInfo.Attributes and
// matched by InstanceFilter.Attributes. They carry across ContinueAsNew:
// the next execution starts with them (and they are listed at the start of
// its history).
//
// It returns an *InvalidArgumentError (ErrInvalidArgument) and records
// nothing for a malformed key (see MaxAttributeKeyBytes), a value of
// another type, a string over MaxAttributeValueBytes (or not UTF-8, or
// with a NUL byte), or more than MaxAttributes keys on the instance.
// Return it to fail the workflow; the same code refuses the same input on
// every replay.
func (c *Context) SetAttributes(attrs map[string]any) error {
	var reasons []string
	ups := make([]storage.Attribute, 0, len(attrs))
	for _, k := range slices.Sorted(maps.Keys(attrs)) { // a map's order is random: history's must not be
		a, problem := toAttribute(k, attrs[k], true)
		if problem != "" {
			reasons = append(reasons, problem)
			continue
		}
		ups = append(ups, a)
	}
	if len(reasons) == 0 {
		var ae *replay.AttributesError
		if err := c.s.SetAttributes(ups); errors.As(err, &ae) {
			reasons = ae.Reasons
		}
	}
	if len(reasons) > 0 {
		return &InvalidArgumentError{Op: "SetAttributes", Reasons: reasons}
	}
	return nil
}

// Attributes returns the instance's attributes as the workflow has set
// them (carried across ContinueAsNew included): strings, int64s, bools and
// time.Times (UTC).
func (c *Context) Attributes() map[string]any {
	return attributeMap(c.s.Attributes())
}

// toAttribute converts a Go value to its stored form, or says why it
// cannot be one. With removal, a nil value removes the key.
func toAttribute(key string, v any, removal bool) (storage.Attribute, string) {
	a := storage.Attribute{Key: key}
	switch x := v.(type) {
	case nil:
		if !removal {
			return a, fmt.Sprintf("attribute %.70q: a nil value matches nothing", key)
		}
	case string:
		a.Type, a.Value = storage.AttrString, x
	case bool:
		a.Type, a.Value = storage.AttrBool, strconv.FormatBool(x)
	case int:
		a.Type, a.Value = storage.AttrInt, strconv.FormatInt(int64(x), 10)
	case int8:
		a.Type, a.Value = storage.AttrInt, strconv.FormatInt(int64(x), 10)
	case int16:
		a.Type, a.Value = storage.AttrInt, strconv.FormatInt(int64(x), 10)
	case int32:
		a.Type, a.Value = storage.AttrInt, strconv.FormatInt(int64(x), 10)
	case int64:
		a.Type, a.Value = storage.AttrInt, strconv.FormatInt(x, 10)
	case uint:
		return uintAttribute(a, uint64(x))
	case uint8:
		return uintAttribute(a, uint64(x))
	case uint16:
		return uintAttribute(a, uint64(x))
	case uint32:
		return uintAttribute(a, uint64(x))
	case uint64:
		return uintAttribute(a, x)
	case time.Time:
		if x.Year() < 0 || x.Year() > 9999 {
			return a, fmt.Sprintf("attribute %.70q: time %v is outside years 0..9999", key, x)
		}
		a.Type, a.Value = storage.AttrTime, x.UTC().Format(time.RFC3339Nano)
	default:
		return a, fmt.Sprintf("attribute %.70q: a %T value is not a string, bool, integer or time.Time", key, v)
	}
	if p := storage.AttributeProblem(a, removal); p != "" {
		return a, p
	}
	return a, ""
}

func uintAttribute(a storage.Attribute, x uint64) (storage.Attribute, string) {
	if x > math.MaxInt64 {
		return a, fmt.Sprintf("attribute %.70q: %d is over the int64 range", a.Key, x)
	}
	a.Type, a.Value = storage.AttrInt, strconv.FormatUint(x, 10)
	if p := storage.AttributeProblem(a, false); p != "" {
		return a, p
	}
	return a, ""
}

// attributeMap is the Go form of stored attributes; nil for none.
func attributeMap(as []storage.Attribute) map[string]any {
	if len(as) == 0 {
		return nil
	}
	m := make(map[string]any, len(as))
	for _, a := range as {
		m[a.Key] = storage.AttributeValue(a)
	}
	return m
}

// filterAttributes converts InstanceFilter.Attributes, sorted by key.
func filterAttributes(reasons []string, f map[string]any) ([]storage.Attribute, []string) {
	if len(f) > MaxAttributes {
		return nil, append(reasons, fmt.Sprintf("%d attribute filters, over the cap of %d", len(f), MaxAttributes))
	}
	var out []storage.Attribute
	for _, k := range slices.Sorted(maps.Keys(f)) {
		a, p := toAttribute(k, f[k], false)
		if p != "" {
			reasons = append(reasons, p)
			continue
		}
		out = append(out, a)
	}
	return out, reasons
}
