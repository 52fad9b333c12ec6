package timeline

import "fmt"

// ProducedHelp says what a produced filter takes; the herald command's
// --produced flag and the web UI's produced= parameter both read it with
// ParseProduced, so a value means the same in both.
const ProducedHelp = "yes: only those that produced an event; no: only those that did not"

// ParseProduced reads a produced filter: "" (nil: any), "yes" or "true"
// (those that produced an event), "no" or "false" (those that did not).
func ParseProduced(v string) (*bool, error) {
	var b bool
	switch v {
	case "":
		return nil, nil
	case "yes", "true":
		b = true
	case "no", "false":
	default:
		return nil, fmt.Errorf("produced %q: want yes or no", v)
	}
	return &b, nil
}
