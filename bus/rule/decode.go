package rule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// jkind is the JSON type of a decoded node.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// jnode is a decoded JSON value that, unlike map[string]any, keeps key
// order and lets the decoder see duplicate keys (encoding/json silently
// keeps the last one, which would let "op" say one thing to a reviewer
// and another to the evaluator).
type jnode struct {
	kind jkind
	b    bool
	s    string // a string, or a number's literal
	arr  []*jnode
	keys []string
	vals []*jnode
}

func (n *jnode) get(key string) (*jnode, bool) {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i], true
		}
	}
	return nil, false
}

// errStop ends decoding: the problem that caused it is already recorded.
var errStop = errors.New("stop")

type decoder struct {
	dec  *json.Decoder
	prob *problems
}

// decodeTree reads raw into a jnode tree. Syntax errors and nesting past
// MaxJSONDepth stop it (one problem, nil tree); duplicate keys are
// recorded and decoding goes on, keeping the first value.
func decodeTree(raw []byte, prob *problems) *jnode {
	d := decoder{dec: json.NewDecoder(bytes.NewReader(raw)), prob: prob}
	d.dec.UseNumber()
	tok, err := d.dec.Token()
	if err != nil {
		d.syntax("$", err)
		return nil
	}
	root, err := d.value(tok, "$", 1)
	if err != nil {
		return nil
	}
	if _, err := d.dec.Token(); err != io.EOF {
		prob.add("$", "unexpected data after the rule")
		return nil
	}
	return root
}

func (d *decoder) syntax(path string, err error) {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		d.prob.add(path, fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se))
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		d.prob.add(path, "malformed JSON: unexpected end of input")
	default:
		d.prob.add(path, "malformed JSON: "+err.Error())
	}
}

// value decodes the value starting with tok at JSON nesting depth. The
// recursion is bounded by MaxJSONDepth, checked before descending.
func (d *decoder) value(tok json.Token, path string, depth int) (*jnode, error) {
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case json.Number:
		return &jnode{kind: jNumber, s: string(t)}, nil
	case string:
		return &jnode{kind: jString, s: t}, nil
	case json.Delim:
		if depth > MaxJSONDepth {
			d.prob.add(path, fmt.Sprintf("JSON nests deeper than %d levels", MaxJSONDepth))
			return nil, errStop
		}
		if t == '[' {
			n := &jnode{kind: jArray}
			for d.dec.More() {
				sub := path + "[" + strconv.Itoa(len(n.arr)) + "]"
				tok, err := d.dec.Token()
				if err != nil {
					d.syntax(sub, err)
					return nil, errStop
				}
				v, err := d.value(tok, sub, depth+1)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, v)
			}
			if _, err := d.dec.Token(); err != nil { // ']'
				d.syntax(path, err)
				return nil, errStop
			}
			return n, nil
		}
		// '{': the decoder never hands out '}' or ']' here.
		n := &jnode{kind: jObject}
		for d.dec.More() {
			ktok, err := d.dec.Token()
			if err != nil {
				d.syntax(path, err)
				return nil, errStop
			}
			key := ktok.(string) // json.Decoder guarantees a string key inside an object
			sub := childPath(path, key)
			tok, err := d.dec.Token()
			if err != nil {
				d.syntax(sub, err)
				return nil, errStop
			}
			v, err := d.value(tok, sub, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := n.get(key); dup {
				d.prob.add(sub, "duplicate key")
				continue
			}
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, v)
		}
		if _, err := d.dec.Token(); err != nil { // '}'
			d.syntax(path, err)
			return nil, errStop
		}
		return n, nil
	}
	d.prob.add(path, fmt.Sprintf("unexpected JSON token %v", tok))
	return nil, errStop
}

// childPath names key under path: $.conditions, or $["odd key"] when the
// key is not a plain identifier, so a path in an error cannot be confused
// by the key it quotes.
func childPath(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key) && plain; i++ {
		plain = segmentByte(key[i])
	}
	if plain {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}
