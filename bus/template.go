package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxTemplateBytes caps a template's text.
const MaxTemplateBytes = 1024

// ErrTemplate matches every error ParseTemplate and Expand return.
var ErrTemplate = errors.New("bus: template")

// Template derives a text (an instance id, a correlation key) from an
// event: literal text with {path} placeholders, a path being dot-separated
// segments into the envelope ({id}, {type}, {data.order_id},
// {data.items.0.sku}). "{{" and "}}" stand for literal braces. A
// placeholder must resolve to a string, a number or a boolean; an absent
// field, null, an object or an array fails the expansion.
type Template struct {
	text  string
	parts []tmplPart
}

type tmplPart struct {
	lit  string
	path []string // nil: a literal part
}

// ParseTemplate parses text. An empty text, one over MaxTemplateBytes, an
// unclosed or empty placeholder, a stray "}" or a malformed path is
// refused with an error matching ErrTemplate.
func ParseTemplate(text string) (*Template, error) {
	if text == "" {
		return nil, fmt.Errorf("%w: empty", ErrTemplate)
	}
	if len(text) > MaxTemplateBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTemplate, len(text), MaxTemplateBytes)
	}
	t := &Template{text: text}
	var lit strings.Builder
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '{' && i+1 < len(text) && text[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(text) && text[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("%w: %q: a lone } at byte %d (write }} for a literal brace)", ErrTemplate, text, i)
		case c == '{':
			end := strings.IndexByte(text[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%w: %q: placeholder at byte %d is not closed", ErrTemplate, text, i)
			}
			path := text[i+1 : i+1+end]
			segs, err := parsePath(path)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: placeholder {%s}: %v", ErrTemplate, text, path, err)
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, tmplPart{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, tmplPart{path: segs})
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, tmplPart{lit: lit.String()})
	}
	return t, nil
}

func parsePath(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	segs := strings.Split(p, ".")
	if len(segs) > 32 {
		return nil, errors.New("more than 32 segments")
	}
	for _, s := range segs {
		if s == "" || len(s) > 64 {
			return nil, errors.New("a segment is empty or longer than 64 bytes")
		}
		for i := 0; i < len(s); i++ {
			b := s[i]
			if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
				return nil, fmt.Errorf("segment %q: only A-Z a-z 0-9 _ - are allowed", s)
			}
		}
	}
	return segs, nil
}

// String returns the template's text.
func (t *Template) String() string { return t.text }

// Expand fills the placeholders from doc (an Envelope's Doc).
func (t *Template) Expand(doc map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		v, ok := lookup(doc, p.path)
		if !ok {
			return "", fmt.Errorf("%w %q: {%s} is absent from the event", ErrTemplate, t.text, strings.Join(p.path, "."))
		}
		switch x := v.(type) {
		case string:
			b.WriteString(x)
		case json.Number:
			b.WriteString(x.String())
		case float64:
			b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
		case bool:
			b.WriteString(strconv.FormatBool(x))
		default:
			what := "null"
			switch v.(type) {
			case map[string]any:
				what = "an object"
			case []any:
				what = "an array"
			}
			return "", fmt.Errorf("%w %q: {%s} is %s, not a string, number or boolean", ErrTemplate, t.text, strings.Join(p.path, "."), what)
		}
	}
	return b.String(), nil
}

func lookup(doc any, segs []string) (any, bool) {
	cur := doc
	for _, s := range segs {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[s]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(x) || (len(s) > 1 && s[0] == '0') {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
