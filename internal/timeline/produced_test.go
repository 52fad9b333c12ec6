package timeline

import "testing"

// TestParseProduced: the values the CLI's --produced and the UI's
// produced= both take.
func TestParseProduced(t *testing.T) {
	for v, want := range map[string]string{"": "any", "yes": "true", "true": "true", "no": "false", "false": "false"} {
		got, err := ParseProduced(v)
		s := "any"
		if got != nil {
			s = map[bool]string{true: "true", false: "false"}[*got]
		}
		if err != nil || s != want {
			t.Errorf("ParseProduced(%q) = %s, %v; want %s", v, s, err, want)
		}
	}
	for _, v := range []string{"orphans", "produced", "maybe", "YES"} {
		if _, err := ParseProduced(v); err == nil {
			t.Errorf("ParseProduced(%q): no error", v)
		}
	}
}
