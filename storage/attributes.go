package storage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// AttrType is the type of a searchable attribute's value.
type AttrType string

// Attribute value types. In an upsert (TurnCommitParams.Attributes) the
// empty type removes the key.
const (
	AttrString AttrType = "string"
	AttrInt    AttrType = "int"
	AttrBool   AttrType = "bool"
	AttrTime   AttrType = "time"
)

// Caps on an instance's searchable attributes.
const (
	// MaxAttributes caps the keys an instance has at once.
	MaxAttributes = 32
	// MaxAttributeKeyBytes caps a key.
	MaxAttributeKeyBytes = 64
	// MaxAttributeValueBytes caps a value's canonical text (a string
	// value's bytes).
	MaxAttributeValueBytes = 256
)

// Attribute is one searchable attribute of an instance (set by its
// workflow, ctx.SetAttributes): a key, the value's type and the value in
// canonical text — a string as it is, an int in decimal (int64), a bool
// as "true" or "false", a time in RFC 3339 with nanoseconds, UTC
// (time.RFC3339Nano). Two attributes are equal when key, type and text
// are; that is what InstanceListParams.Attributes matches.
type Attribute struct {
	Key   string   `json:"key"`
	Type  AttrType `json:"type,omitempty"`
	Value string   `json:"value,omitempty"`
}

// AttributeKeyProblem says why k cannot be an attribute key, or returns
// "": 1 to MaxAttributeKeyBytes bytes of ASCII letters, digits, '_', '-'
// and '.', starting with a letter.
func AttributeKeyProblem(k string) string {
	switch {
	case k == "":
		return "is empty"
	case len(k) > MaxAttributeKeyBytes:
		return fmt.Sprintf("is %d bytes, over the %d-byte cap", len(k), MaxAttributeKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter {
			return "does not start with an ASCII letter"
		}
		if !letter && !(c >= '0' && c <= '9') && c != '_' && c != '-' && c != '.' {
			return fmt.Sprintf("has %q at byte %d (allowed: ASCII letters, digits, '_', '-', '.')", rune(c), i)
		}
	}
	return ""
}

// AttributeProblem says why a cannot be stored, or returns "". With
// removal, the empty type (remove the key) is allowed.
func AttributeProblem(a Attribute, removal bool) string {
	if p := AttributeKeyProblem(a.Key); p != "" {
		return fmt.Sprintf("attribute key %.70q %s", a.Key, p)
	}
	bad := func(why string) string {
		return fmt.Sprintf("attribute %s: %s value %.70q %s", a.Key, a.Type, a.Value, why)
	}
	switch a.Type {
	case "":
		if !removal {
			return fmt.Sprintf("attribute %s has no type", a.Key)
		}
		if a.Value != "" {
			return fmt.Sprintf("attribute %s: a removal has no value", a.Key)
		}
	case AttrString:
		switch {
		case len(a.Value) > MaxAttributeValueBytes:
			return fmt.Sprintf("attribute %s: string value is %d bytes, over the %d-byte cap", a.Key, len(a.Value), MaxAttributeValueBytes)
		case !utf8.ValidString(a.Value):
			return fmt.Sprintf("attribute %s: string value is not valid UTF-8", a.Key)
		case strings.IndexByte(a.Value, 0) >= 0:
			return fmt.Sprintf("attribute %s: string value contains a NUL byte", a.Key)
		}
	case AttrInt:
		if n, err := strconv.ParseInt(a.Value, 10, 64); err != nil || strconv.FormatInt(n, 10) != a.Value {
			return bad("is not a canonical 64-bit decimal integer")
		}
	case AttrBool:
		if a.Value != "true" && a.Value != "false" {
			return bad(`is not "true" or "false"`)
		}
	case AttrTime:
		t, err := time.Parse(time.RFC3339Nano, a.Value)
		if err != nil || t.UTC().Format(time.RFC3339Nano) != a.Value {
			return bad("is not a UTC time in canonical RFC 3339 (time.RFC3339Nano)")
		}
	default:
		return fmt.Sprintf("attribute %s: type %.20q is not string, int, bool or time", a.Key, a.Type)
	}
	return ""
}

// AttributeValue returns a's value as a Go value: a string, an int64, a
// bool or a time.Time (UTC). a must be valid (AttributeProblem).
func AttributeValue(a Attribute) any {
	switch a.Type {
	case AttrInt:
		n, _ := strconv.ParseInt(a.Value, 10, 64)
		return n
	case AttrBool:
		return a.Value == "true"
	case AttrTime:
		t, _ := time.Parse(time.RFC3339Nano, a.Value)
		return t.UTC()
	}
	return a.Value
}
