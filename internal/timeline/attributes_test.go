package timeline

import (
	"testing"

	"github.com/heraldwf/herald/history"
)

func TestDescribeAttributes(t *testing.T) {
	for _, c := range []struct {
		ev   history.Event
		want string
	}{
		{history.Event{Kind: history.AttributesUpserted, Payload: []byte(`[{"key":"customer","type":"string","value":"ada \"x\""},{"key":"n","type":"int","value":"3"},{"key":"vip"}]`)},
			`customer="ada \"x\"" n=3 -vip`},
		{history.Event{Kind: history.AttributesUpserted, AtStart: true, Payload: []byte(`[{"key":"s","type":"string"}]`)},
			`carried s=""`},
		{history.Event{Kind: history.AttributesUpserted, Payload: []byte(`nope`)}, `attributes nope`},
	} {
		if got := describe(c.ev, 1); got != c.want {
			t.Errorf("describe(%s) = %q, want %q", c.ev.Payload, got, c.want)
		}
	}
}
