package replay_test

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/gopool"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// goid returns the calling goroutine's id, from its stack trace.
func goid(t testing.TB) int64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, err := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		t.Errorf("goroutine id: %v", err)
	}
	return id
}

// With Input.Go, the workflow's code runs on the goroutine it starts. A
// code still blocked at the end of the turn is unwound, and its goroutine
// is free for the next turn's code; a panic of the code fails the
// workflow as it does on a goroutine of its own.
func TestCoroutineOnGivenGoroutines(t *testing.T) {
	p := gopool.New(2, time.Minute)
	defer p.Close()
	started := 0
	goFn := func(fn func()) { started++; p.Go(fn) }
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hist := []history.Event{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "w", Execution: 1}}
	var ids []int64
	waits := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		ids = append(ids, goid(t))
		_, err := s.WaitEvent("e", 0).Get() // blocked at the end of the turn
		return nil, err
	}
	for turn := range 2 {
		out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: waits, History: hist,
			Messages: []storage.Message{{ID: 1, Kind: storage.MsgKick}}, Now: t0, Go: goFn})
		if err != nil || out.Failure != nil {
			t.Fatalf("turn %d: %v %+v", turn, err, out)
		}
		wantKinds(t, "new events", out.NewEvents, history.EventSubscribed)
		if turn == 0 {
			deadline := time.Now().Add(10 * time.Second)
			for p.Idle() != 1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if p.Idle() != 1 {
				t.Fatalf("%d goroutines wait after the code was unwound, want 1", p.Idle())
			}
		}
	}
	if started != 2 || len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("Input.Go called %d times, code ran on goroutines %v: want 2 calls, one goroutine", started, ids)
	}

	panics := func(*replay.State, json.RawMessage) (json.RawMessage, error) { panic("boom") }
	out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: panics, History: hist,
		Messages: []storage.Message{{ID: 1, Kind: storage.MsgKick}}, Now: t0, Go: goFn})
	if err != nil || out.Failure == nil || out.Failure.Kind != replay.FailurePanic {
		t.Fatalf("a panicking code: %v, %+v; want a %s failure", err, out, replay.FailurePanic)
	}
}
