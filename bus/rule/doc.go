// Package rule compiles and evaluates the event bus's filter rules: the
// JSON conditions a subscription puts on the events it receives
// (SPEC §3.4, issue 12 item 3, seed 004 "filter rules" and "filter
// injection"). It is pure: no I/O, no clock, no reflection on user input
// beyond encoding/json's tokenizer. A rule is data that is interpreted;
// it never becomes SQL, code or a regular expression.
//
// # Grammar
//
//	group     = {"logic": "AND" | "OR", "conditions": [ item, … ]}   (1 or more items)
//	item      = group | condition
//	condition = {"field": path, "op": op [, "value": value]}
//	path      = segment *("." segment)      (at most MaxPathSegments segments)
//	segment   = 1*64 of A-Z a-z 0-9 _ -
//	op        = "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "in" | "nin"
//	          | "contains" | "prefix" | "suffix" | "exists"
//
// The root is a group. An object with a "logic" or "conditions" key is a
// group; any other object is a condition. Keys are case-sensitive and
// exact ("AND", not "and"); a key a node does not know, or a key given
// twice, is refused. What each op accepts as its value:
//
//	eq ne              a scalar: string, number, true/false or null
//	gt gte lt lte      a number (anything else is refused, CodeNotNumeric)
//	in nin             a non-empty array of scalars
//	contains           a scalar
//	prefix suffix      a string
//	exists             no "value" key at all
//
// Bounds: the raw rule is at most MaxSize bytes, groups nest at most
// MaxDepth deep (the root is depth 1), and a rule has at most
// MaxConditions items in all its "conditions" arrays together (groups
// count). The decoder stops at MaxJSONDepth levels of JSON nesting, so a
// 10,000-deep document is refused after reading a few dozen bytes, with
// no recursion. Compile reports every problem it finds (up to
// MaxProblems) in one *InvalidError, which matches ErrInvalid.
//
// # Evaluation
//
// Eval runs on an event decoded as a JSON document: map[string]any,
// []any, string, bool, nil, and numbers as float64 or json.Number (what
// encoding/json produces, with or without UseNumber); Go integer and
// float32 values are accepted too. Other Go types (structs,
// map[string]string, …) are not looked into: a path through them is
// absent, a value of them matches no op.
//
// A path walks the document one segment at a time: in an object the
// segment is a key; in an array a segment that is a decimal index without
// leading zeros ("0", "12") selects that element, anything else is
// absent. So "data.items.0.sku" reads the first item's sku, and an object
// key "0" is read by the same path. Keys containing a dot or characters
// outside the segment alphabet cannot be addressed.
//
// A field is absent when the path does not resolve. A JSON null that is
// present is not absent: exists is true for it, eq null matches it.
//
//   - exists: true iff the field is present.
//   - absent field: every op but exists is false, ne and nin included
//     ("status ne x" holds only for an event that has a status).
//   - eq / ne: equal type and value; ne is exactly not-eq. Numbers compare
//     numerically (1 eq 1.0), strings bytewise, no coercion between types
//     ("5" is not 5). An object or array field never equals a scalar.
//   - gt gte lt lte: number against number numerically; a field that is
//     not a number is false (a type miss). Strings are not ordered.
//   - in / nin: in is true iff the field eq some element; nin is not-in.
//   - contains: a string field contains the string value as a substring;
//     an array field contains an element eq the value; otherwise false.
//   - prefix / suffix: a string field starts / ends with the value.
//
// Numbers are compared exactly: integers that fit int64 compare as
// integers (so ids above 2^53 stay distinct), other numbers as float64,
// and an integer against a float is compared without rounding the
// integer. A NaN in a Go-built document compares with nothing.
//
// A false result comes with a *Miss naming why: for AND the first
// condition (in order) that failed, for a failing OR group the group
// itself (Op "OR", Reason ReasonNone). Groups short-circuit in order.
// A nil *Rule matches every event; Compile returns one for an empty or
// null rule, which is how "no filter" is spelled.
package rule
