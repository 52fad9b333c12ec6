package herald_test

// Fuzz targets for what crosses the door: event names, ids and payloads on
// the positional and queue lanes, correlated definitions, keys and payloads,
// and search bookmarks. Each input must end in a sentinel error or in a
// stored value that reads back as sent — and the runtime must go on serving
// other instances. The seed corpus runs with every `go test`; CI fuzzes each
// target briefly (go test -fuzz FuzzX -fuzztime 10s).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// fuzzEnv is a started runtime and its client for a fuzz target, on the
// backend testStore picks.
type fuzzEnv struct {
	ctx    context.Context
	client *herald.Client
	n      atomic.Int64
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	st := testStore(f)
	rt, err := herald.NewRuntime(st, &herald.Config{PollInterval: 20 * time.Millisecond,
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		f.Fatal(err)
	}
	type target struct {
		Name  string `json:"name"`
		Queue bool   `json:"queue"`
	}
	herald.RegisterWorkflow(rt, "fuzz-echo", func(ctx *herald.Context, in target) (json.RawMessage, error) {
		var raw json.RawMessage
		w := ctx.WaitEvent(in.Name)
		if in.Queue {
			w = ctx.Dequeue(in.Name)
		}
		err := w.Get(&raw)
		return raw, err
	})
	herald.RegisterWorkflow(rt, "canary", func(ctx *herald.Context, in int) (int, error) { return in, nil })
	ctx, cancel := context.WithCancel(context.Background())
	if err := rt.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		cancel()
		c, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = rt.Stop(c)
	})
	client, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzEnv{ctx: ctx, client: client}
}

// call bounds one call of the fuzz function.
func (e *fuzzEnv) call(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, 30*time.Second)
}

// canary requires a fresh instance to run to completion: nothing the input
// did may hold up the rest of the tenant.
func (e *fuzzEnv) canary(t *testing.T, ctx context.Context) {
	t.Helper()
	n := int(e.n.Add(1))
	id, err := e.client.StartWorkflow(ctx, "canary", n, herald.WithInstanceID(fmt.Sprintf("canary-%d-%d", time.Now().UnixNano(), n)))
	if err != nil {
		t.Fatalf("start canary: %v", err)
	}
	info, err := e.client.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	var got int
	if err := info.Result(&got); err != nil || got != n {
		t.Fatalf("canary returned %d, %v", got, err)
	}
}

// sameJSON reports whether two JSON texts hold the same value (numbers
// compared as written, so no precision is lost).
func sameJSON(a, b []byte) bool {
	decode := func(raw []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return nil, false
		}
		return v, true
	}
	va, ok1 := decode(a)
	vb, ok2 := decode(b)
	return ok1 && ok2 && reflect.DeepEqual(va, vb)
}

// doorSentinel reports whether err is one a caller of the door may get.
func doorSentinel(err error) bool {
	for _, s := range []error{herald.ErrEventInvalid, herald.ErrInvalidArgument, herald.ErrInstanceNotRunning,
		herald.ErrEventIDConflict, herald.ErrInstanceExists, herald.ErrNotFound} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzSendEvent(f *testing.F) {
	f.Add("i", "x", "", []byte(`{"a":1}`), false)
	f.Add("i", "x", "e1", []byte(`""`), true)
	f.Add("i\x00", "x", "", []byte(`null`), false)
	f.Add("i", "x\xff", "e", []byte(`1`), true)
	f.Add("i", "x", "e\x00", []byte(`[]`), false)
	f.Add(strings.Repeat("i", 300), "x", "", []byte(`1`), false)
	f.Add("i", "x", "", []byte(strings.Repeat("[", 10000)+strings.Repeat("]", 10000)), false)
	f.Add("i", "x", "", []byte(`"\u0000<&>\ud800"`), true)
	f.Add("i", "x", "", []byte("\"\xff\""), false)
	f.Add("i", "x", "", []byte(`{"a":1e999999}`), false)
	f.Add("i", "x", "", []byte(`12345678901234567890123456789`), true)
	f.Add("", "", "", []byte(``), false)
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, instanceID, name, eventID string, payload []byte, queue bool) {
		ctx, cancel := env.call(t)
		defer cancel()
		opts := []herald.RaiseOption{herald.StartIfAbsent("fuzz-echo", map[string]any{"name": name, "queue": queue})}
		if eventID != "" {
			opts = append(opts, herald.WithEventID(eventID))
		}
		send, lane := env.client.RaiseEvent, history.LanePositional
		if queue {
			send, lane = env.client.Enqueue, history.LaneQueue
		}
		rcpt, err := send(ctx, instanceID, name, json.RawMessage(payload), opts...)
		if err != nil {
			if !doorSentinel(err) {
				t.Fatalf("send: %v is no sentinel", err)
			}
		} else {
			rec, err := env.client.EventFate(ctx, rcpt.EventID)
			if err != nil {
				t.Fatalf("fate of an accepted event: %v", err)
			}
			if rec.InstanceID != instanceID || rec.Name != name || rec.Lane != lane {
				t.Fatalf("ledger has %q %q %s, sent %q %q %s", rec.InstanceID, rec.Name, rec.Lane, instanceID, name, lane)
			}
			if rcpt.Started {
				info, err := env.client.WaitForCompletion(ctx, instanceID)
				if err != nil {
					t.Fatalf("wait: %v", err)
				}
				var got json.RawMessage
				if err := info.Result(&got); err != nil {
					t.Fatalf("instance %q: %v", instanceID, err)
				}
				if !sameJSON(got, payload) {
					t.Fatalf("payload %q came back as %q", payload, got)
				}
			}
		}
		env.canary(t, ctx)
	})
}

func FuzzPutCorrelatedEvent(f *testing.F) {
	f.Add("doc", "k", []byte(`{"a":1}`))
	f.Add("doc", "k\x00", []byte(`1`))
	f.Add("doc", strings.Repeat("k", 2000), []byte(`1`))
	f.Add("nodef", "k", []byte(`1`))
	f.Add("doc\xff", "k", []byte(`1`))
	f.Add("doc", "k", []byte(strings.Repeat("{\"a\":", 5000)+"1"+strings.Repeat("}", 5000)))
	f.Add("doc", "'; DROP TABLE correlated_events; --", []byte(`"\u0000"`))
	env := newFuzzEnv(f)
	if _, err := env.client.PutEventDefinition(env.ctx, herald.EventDefinition{Name: "doc",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, def, key string, payload []byte) {
		ctx, cancel := env.call(t)
		defer cancel()
		_, err := env.client.PutCorrelatedEvent(ctx, def, key, json.RawMessage(payload))
		if err != nil {
			if !doorSentinel(err) {
				t.Fatalf("put: %v is no sentinel", err)
			}
		} else {
			ce, err := env.client.GetCorrelatedEvent(ctx, def, key)
			if err != nil {
				t.Fatalf("get an accepted correlated event: %v", err)
			}
			if ce.Def != def || ce.Key != key || !sameJSON(ce.Payload, payload) {
				t.Fatalf("stored %q/%q %q, put %q/%q %q", ce.Def, ce.Key, ce.Payload, def, key, payload)
			}
		}
		env.canary(t, ctx)
	})
}

func FuzzSearchBookmark(f *testing.F) {
	f.Add("")
	f.Add("nope")
	f.Add("YzE6MTpr")
	f.Add("YzE6MTprAGs")
	f.Add(strings.Repeat("A", 5000))
	env := newFuzzEnv(f)
	if _, err := env.client.PutEventDefinition(env.ctx, herald.EventDefinition{Name: "doc",
		Correlation: &herald.CorrelationConfig{}}); err != nil {
		f.Fatal(err)
	}
	for i := range 3 {
		if _, err := env.client.PutCorrelatedEvent(env.ctx, "doc", fmt.Sprintf("k%d", i), i); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, bookmark string) {
		ctx, cancel := env.call(t)
		defer cancel()
		page, _, err := env.client.SearchCorrelatedEvents(ctx, "doc", herald.CorrelatedSearch{Bookmark: bookmark, Limit: 2})
		if err != nil && !errors.Is(err, herald.ErrInvalidArgument) {
			t.Fatalf("search: %v is not ErrInvalidArgument", err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d", len(page))
		}
	})
}
