package backend

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// An instance's attributes are stored twice: as a JSON object on its row
// (key → attrDoc), which InstanceGet and InstanceList show, and one row per
// key in instance_attributes (tenant, instance_id, key, type, value),
// indexed by (tenant, key, value, type) for InstanceList's filter.

// attrDoc is one attribute in the row's JSON object. Both fields are
// always written, so that a JSON merge patch replaces both.
type attrDoc struct {
	T storage.AttrType `json:"t"`
	V string           `json:"v"`
}

// ValidateAttributes checks attribute upserts (removal: a TurnCommit's,
// where the empty type removes a key) or filters; ErrInvalidArgument with
// the first problem.
func ValidateAttributes(as []storage.Attribute, removal bool) error {
	for _, a := range as {
		if p := storage.AttributeProblem(a, removal); p != "" {
			return fmt.Errorf("%s: %w", p, heraldtype.ErrInvalidArgument)
		}
	}
	return nil
}

// AttributePatch folds upserts applied in order into the keys they set
// (their last value; sorted by key) and the keys they remove (sorted).
func AttributePatch(ups []storage.Attribute) (set []storage.Attribute, removed []string) {
	last := map[string]storage.Attribute{}
	for _, a := range ups {
		last[a.Key] = a
	}
	for _, k := range slices.Sorted(maps.Keys(last)) {
		if a := last[k]; a.Type == "" {
			removed = append(removed, k)
		} else {
			set = append(set, a)
		}
	}
	return set, removed
}

// AttributeDoc is the JSON object of set (key → {"t", "v"}); with
// nullRemoved, removed keys map to null (a JSON merge patch, RFC 7396).
func AttributeDoc(set []storage.Attribute, removed []string, nullRemoved bool) string {
	m := make(map[string]*attrDoc, len(set)+len(removed))
	for _, a := range set {
		m[a.Key] = &attrDoc{T: a.Type, V: a.Value}
	}
	if nullRemoved {
		for _, k := range removed {
			m[k] = nil
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// DecodeAttributes decodes a row's attributes; sorted by key, nil for none.
func DecodeAttributes(doc string) ([]storage.Attribute, error) {
	if doc == "" || doc == "{}" {
		return nil, nil
	}
	var m map[string]attrDoc
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		return nil, fmt.Errorf("attributes: %w: %w", err, heraldtype.ErrCorrupt)
	}
	out := make([]storage.Attribute, 0, len(m))
	for k, d := range m {
		out = append(out, storage.Attribute{Key: k, Type: d.T, Value: d.V})
	}
	slices.SortFunc(out, func(a, b storage.Attribute) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
