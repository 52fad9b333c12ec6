package timeline

import (
	"encoding/json"
	"strings"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// describeAttributes says what an AttributesUpserted event set and
// removed: "customer=\"ada\" priority=3 -vip" (carried at the start of an
// execution: "carried …").
func describeAttributes(ev history.Event) string {
	var ups []storage.Attribute
	if err := json.Unmarshal(ev.Payload, &ups); err != nil {
		return "attributes " + string(ev.Payload)
	}
	parts := make([]string, 0, len(ups)+1)
	if ev.AtStart {
		parts = append(parts, "carried")
	}
	for _, a := range ups {
		switch a.Type {
		case "":
			parts = append(parts, "-"+a.Key)
		case storage.AttrString:
			b, _ := json.Marshal(a.Value)
			parts = append(parts, a.Key+"="+string(b))
		default:
			parts = append(parts, a.Key+"="+a.Value)
		}
	}
	return strings.Join(parts, " ")
}
