package replay_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/gopool"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// loopWorkflow waits for events named "e" for ever: each event adds two
// history events (the arrival and the next wait).
func loopWorkflow(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
	for {
		if _, err := s.WaitEvent("e", 0).Get(); err != nil {
			return nil, err
		}
	}
}

func eventMsg(id int64) storage.Message {
	return storage.Message{ID: id, Kind: storage.MsgEvent, Lane: history.LanePositional,
		EventID: fmt.Sprintf("ev-%d", id), Name: "e", Payload: json.RawMessage(`"x"`)}
}

// loopHistory returns a history of about size events of loopWorkflow,
// built the way the runtime builds it: a first turn, then one turn that
// takes every event.
func loopHistory(b *testing.B, size int) []history.Event {
	b.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hist := []history.Event{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "loop", Execution: 1}}
	turn := func(msgs []storage.Message) {
		out, err := replay.Run(&replay.Input{InstanceID: "bench", Workflow: loopWorkflow, History: hist, Messages: msgs, Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		if out.Failure != nil {
			b.Fatalf("workflow failed: %s", out.Failure.Message)
		}
		hist = append(hist, out.NewEvents...)
	}
	turn([]storage.Message{{ID: 1, Kind: storage.MsgKick}})
	msgs := make([]storage.Message, 0, size/2)
	for i := range max((size-2)/2, 0) {
		msgs = append(msgs, eventMsg(int64(i+2)))
	}
	turn(msgs)
	return hist
}

// BenchmarkReplay times one turn of an instance whose history has size
// events: replay the whole history, then take one new event. The ns/event
// metric stays flat if replay grows linearly with history length (a target in bench/results.md, the run of record).
// The workflow's code runs on a reused goroutine, as the runtime runs it
// (Input.Go).
func BenchmarkReplay(b *testing.B) {
	for _, size := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("events=%d", size), func(b *testing.B) {
			hist := loopHistory(b, size)
			gos := gopool.New(1, time.Minute)
			defer gos.Close()
			in := &replay.Input{InstanceID: "bench", Workflow: loopWorkflow, History: hist,
				Messages: []storage.Message{eventMsg(1 << 40)}, Now: hist[len(hist)-1].Time.Add(time.Second), Go: gos.Go}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out, err := replay.Run(in)
				if err != nil || len(out.NewEvents) != 2 {
					b.Fatalf("turn: %v, %d new events", err, len(out.NewEvents))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(hist)), "ns/event")
		})
	}
}

// names registers waits on other names too, so the lane's maps are not
// trivially small.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("name-%d", i)
	}
	return out
}

// BenchmarkPositionalArrive: an event arrives for an active wait (rule 1).
func BenchmarkPositionalArrive(b *testing.B) {
	p := replay.NewPositional(100)
	for i, n := range names(50) {
		p.Wait(n, -i-1)
	}
	ev := &replay.Buffered{Event: history.Event{Kind: history.EventRaised, Name: "e", EventID: "x"}}
	seq := 0
	for b.Loop() {
		seq++
		p.Wait("e", seq)
		if o := p.Arrive(ev); !o.Delivered || o.WaitSeq != seq {
			b.Fatalf("outcome %+v", o)
		}
	}
}

// BenchmarkPositionalWait: an event is buffered, then a wait takes it at
// once (rule 2).
func BenchmarkPositionalWait(b *testing.B) {
	p := replay.NewPositional(100)
	for i, n := range names(50) {
		p.Wait(n, -i-1)
	}
	seq := 0
	for b.Loop() {
		seq++
		if o := p.Arrive(&replay.Buffered{Event: history.Event{Kind: history.EventRaised, Name: "e", EventID: "x"}}); o.Delivered || o.Dropped {
			b.Fatalf("outcome %+v", o)
		}
		if _, got := p.Wait("e", seq); got == nil {
			b.Fatal("the buffered event was not taken")
		}
	}
}

// BenchmarkQueueArrive: a message arrives for a waiting receive, and a
// message is buffered and taken by the next receive.
func BenchmarkQueueArrive(b *testing.B) {
	q := replay.NewQueue(20)
	for i, n := range names(50) {
		q.Wait(n, -i-1)
	}
	seq := 0
	for b.Loop() {
		seq++
		q.Wait("q", seq)
		if o, _ := q.Arrive(&replay.Buffered{Event: history.Event{Kind: history.EventRaised, Lane: history.LaneQueue, Name: "q"}}, false); !o.Delivered {
			b.Fatalf("outcome %+v", o)
		}
		if o, _ := q.Arrive(&replay.Buffered{Event: history.Event{Kind: history.EventRaised, Lane: history.LaneQueue, Name: "q"}}, false); o.Delivered || o.Dropped {
			b.Fatalf("outcome %+v", o)
		}
		seq++
		if got := q.Wait("q", seq); got == nil {
			b.Fatal("the buffered message was not taken")
		}
	}
}
