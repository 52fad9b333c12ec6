package replay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// A latest-value message superseded before the code first ran leaves its
// drop breadcrumb in the at-start block, so replay starts the code at the
// same point as the first run did.
func TestSupersededAtStartReplays(t *testing.T) {
	t.Parallel()
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		v, ok := s.TryDequeue("settings")
		if !ok {
			return json.RawMessage(`"none"`), nil
		}
		if _, err := s.NewTimer(time.Second).Get(); err != nil {
			return nil, err
		}
		return v, nil
	}
	t0 := time.Unix(1000, 0).UTC()
	h := []history.Event{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "w", Execution: 1}}
	msg := func(id int64, eid, payload string) storage.Message {
		return storage.Message{ID: id, Kind: storage.MsgEvent, Lane: history.LaneQueue, Latest: true, EventID: eid,
			Name: "settings", Payload: json.RawMessage(payload)}
	}
	out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: wf, History: h, Now: t0,
		Messages: []storage.Message{{ID: 1, Kind: storage.MsgKick}, msg(2, "s1", `1`), msg(3, "s2", `2`)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range out.NewEvents {
		if ev.Kind == history.EventDropped && !ev.AtStart {
			t.Fatalf("superseded drop before the code ran is not marked at-start: %+v", ev)
		}
	}
	h = append(h, out.NewEvents...)
	out, err = replay.Run(&replay.Input{InstanceID: "i", Workflow: wf, History: h, Now: t0.Add(time.Second),
		Messages: []storage.Message{{ID: 4, Kind: storage.MsgTimerFired, Execution: 1, TaskSeq: out.Timers[0].TaskSeq}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != heraldtype.StatusCompleted || string(out.Result) != "2" {
		t.Fatalf("status %s result %s failure %v", out.Status, out.Result, out.Failure)
	}
}
