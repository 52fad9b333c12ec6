package timeline_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldwf/herald/internal/timeline"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt from the renderer")

// TestWrite_Golden renders every recorded instance in testdata and compares
// the text with the .txt beside it.
func TestWrite_Golden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d fixtures in testdata", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var in timeline.Instance
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields() // a fixture field the renderer no longer reads is a stale fixture
			if err := dec.Decode(&in); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := timeline.Write(&got, &in); err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".json") + ".txt"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("timeline of %s differs from %s (go test -update to accept)\ngot:\n%s\nwant:\n%s", f, golden, got.String(), want)
			}
		})
	}
}

// Lines that say what the engine did, one per lane and fate, checked
// directly so that a wrong golden file cannot hide them.
func TestWrite_Sentences(t *testing.T) {
	for file, wants := range map[string][]string{
		"order-3": {
			"━━ order-3 (approval) completed → \"desk (800) approved by carol\"",
			`EventSubscribedCancelled  wait for "decision" (#4) withdrawn`,
			`"decision" id=order-3/late ✗ dropped: withdrawn_wait`,
			"order-3/late             positional decision   dropped: withdrawn_wait",
			"order-3/fresh            positional decision   delivered to wait #2 of execution 1",
		},
		"mailbox-1": {
			"mailbox-1/settings-1     queue      settings   dropped: superseded",
			"delivered to receive #1 of execution 3 (arrived in execution 1)",
			"→ carried over, buffered (arrived in execution 1)",
		},
		"sign-dave": {
			`EventSubscribed           wait for correlated "document-signed" key "DOC-8"`,
			`correlated document-signed delivered to correlated wait (key "DOC-8") #1 of execution 1`,
		},
		"activities-retry": {`golden.broken (of #4) ✗ broken: always fails`},
		"terminated": {
			"━━ stuck-1 (approval) terminated → workflow terminated: by operator: nobody answers",
			`"spam" ids stuck-1/spam-1…stuck-1/spam-9 ✗ 9 dropped: limit`,
			`[queue] "note" id=stuck-1/note-1 ✗ dropped: instance_terminal`,
			"stuck-1/late             positional decision   pending",
			"   +2.500s  #3   EventRaised",
		},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var in timeline.Instance
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := timeline.Write(&out, &in); err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("timeline of %s lacks %q:\n%s", file, want, out.String())
			}
		}
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWrite_ReturnsWriteError(t *testing.T) {
	in := &timeline.Instance{ID: "x", Workflow: "w", Status: "running"}
	if err := timeline.Write(&failingWriter{n: 0}, in); err == nil || err.Error() != "disk full" {
		t.Errorf("Write to a failing writer = %v, want its error", err)
	}
}
