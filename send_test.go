package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// ppState is a ping-pong player's state, carried across continue-as-new.
type ppState struct {
	Peer   string
	Queue  bool // receive on the queue lane (and so send on the positional one)
	Serve  bool // send ball 1 first
	Next   int  // the ball expected next
	Total  int
	Got    int
	Rounds int // receives per execution
}

func registerPingPong(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "pp", func(ctx *herald.Context, st ppState) (int, error) {
		send := func(n int) error {
			var err error
			if st.Queue {
				_, err = ctx.RaiseEvent(st.Peer, "ball", n)
			} else {
				_, err = ctx.Enqueue(st.Peer, "ball", n)
			}
			return err
		}
		if st.Serve {
			if err := send(1); err != nil {
				return 0, err
			}
			st.Serve = false
		}
		for range st.Rounds {
			f := ctx.WaitEvent("ball")
			if st.Queue {
				f = ctx.Dequeue("ball")
			}
			var n int
			if err := f.Get(&n); err != nil {
				return 0, err
			}
			if n != st.Next {
				return 0, fmt.Errorf("got ball %d, want %d", n, st.Next)
			}
			st.Got++
			if n == st.Total {
				return st.Got, nil
			}
			if err := send(n + 1); err != nil {
				return 0, err
			}
			if n+1 == st.Total {
				return st.Got, nil
			}
			st.Next = n + 2
		}
		return 0, ctx.ContinueAsNew(st)
	})
}

// 200 messages between two instances, each sent from a workflow (a on
// the positional lane, b on the queue lane), across continue-as-new every
// 10 receives (ten executions each): none lost, none duplicated, each with its sender in the
// ledger, and every execution replays without sending again. a serves
// before b exists: its first ball waits for b.
func TestSend_PingPong(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerPingPong)
	const total, rounds = 200, 10
	b.start("pp", "pp-a", ppState{Peer: "pp-b", Queue: true, Serve: true, Next: 2, Total: total, Rounds: rounds})
	b.waitFate("pp-a/1/2", history.FatePending)
	b.start("pp", "pp-b", ppState{Peer: "pp-a", Next: 1, Total: total, Rounds: rounds})
	for _, id := range []string{"pp-a", "pp-b"} {
		if got := resultOf[int](b, id); got != total/2 {
			t.Fatalf("%s received %d balls, want %d", id, got, total/2)
		}
	}
	for _, c := range []struct{ id, sender string }{{"pp-a", "pp-b"}, {"pp-b", "pp-a"}} {
		recs := b.events(c.id)
		if len(recs) != total/2 {
			t.Fatalf("%s: %d events in its ledger, want %d", c.id, len(recs), total/2)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if r.Fate != history.FateDelivered || r.Sender != c.sender || r.Name != "ball" || seen[r.EventID] {
				t.Fatalf("%s: ledger record %+v (want delivered from %s, once)", c.id, r, c.sender)
			}
			seen[r.EventID] = true
		}
		info, err := b.client.Status(b.ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Execution < total/2/rounds {
			t.Fatalf("%s ended in execution %d: the test wants continue-as-new", c.id, info.Execution)
		}
		sent := 0
		for e := 1; e <= info.Execution; e++ {
			for _, ev := range b.history(c.id, e) {
				if ev.Kind == history.EventSent {
					if ev.Target != c.sender || ev.Lane == "" {
						t.Fatalf("%s: %+v", c.id, ev)
					}
					sent++
				}
			}
		}
		if sent != total/2 {
			t.Fatalf("%s: %d EventSent in its histories, want %d", c.id, sent, total/2)
		}
		b.replayAll(c.id)
	}
}

// ambiguousCommits reports the first commit that sends as failed after it
// committed (a connection lost under the commit's answer).
type ambiguousCommits struct {
	storage.Store
	done atomic.Bool
}

func (s *ambiguousCommits) TurnCommit(ctx context.Context, p *storage.TurnCommitParams) ([]history.Event, error) {
	// done is set before the commit lands: once it has, the receiver may
	// answer and the sender complete before this call returns.
	if len(p.Sends) == 0 || !s.done.CompareAndSwap(false, true) {
		return s.Store.TurnCommit(ctx, p)
	}
	dropped, err := s.Store.TurnCommit(ctx, p)
	if err != nil {
		s.done.Store(false)
		return dropped, err
	}
	return nil, errors.New("injected: connection lost after the commit")
}

// A turn whose commit went through but was reported failed (released and
// retried by the runtime): the next turn replays the send and sends
// nothing; the receiver gets the event once. A send whose id the ledger
// already has for the same target (a client sent it first) is a duplicate.
func TestSend_ReplayNeverResends(t *testing.T) {
	t.Parallel()
	st := &ambiguousCommits{Store: testStore(t)}
	b := setupOn(t, st, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "caller", func(ctx *herald.Context, _ struct{}) (string, error) {
			if _, err := ctx.RaiseEvent("callee", "req", "hello"); err != nil {
				return "", err
			}
			if _, err := ctx.RaiseEvent("callee", "req", "dup", herald.WithEventID("given")); err != nil {
				return "", err
			}
			var answer string
			err := ctx.WaitEvent("answer").Get(&answer)
			return answer, err
		})
		herald.RegisterWorkflow(rt, "callee", func(ctx *herald.Context, _ struct{}) (string, error) {
			var a, c string
			if err := ctx.WaitEvent("req").Get(&a); err != nil {
				return "", err
			}
			if err := ctx.WaitEvent("req").Get(&c); err != nil {
				return "", err
			}
			_, err := ctx.RaiseEvent("caller", "answer", a+"+"+c)
			return a + "+" + c, err
		})
	})
	b.start("callee", "callee", nil)
	b.raise("callee", "req", "client first", "given")
	b.start("caller", "caller", nil)
	if got := resultOf[string](b, "caller"); got != "client first+hello" {
		t.Fatalf("caller: %q", got)
	}
	if !st.done.Load() {
		t.Fatal("no commit was reported failed: the test tests nothing")
	}
	recs := b.events("callee")
	if len(recs) != 2 || recs[0].Sender != "" || recs[0].EventID != "given" || recs[1].Sender != "caller" ||
		recs[1].EventID != "caller/1/2" || recs[1].Fate != history.FateDelivered {
		t.Fatalf("callee's ledger: %s", recordsString(recs))
	}
	if n := countKind(b.history("caller", 1), history.EventSent, "req"); n != 2 {
		t.Fatalf("caller's history has %d EventSent, want 2", n)
	}
	rec := b.fate("caller/1/2")
	if rec.Sender != "caller" || rec.InstanceID != "callee" || rec.WaitNumber != 2 {
		t.Fatalf("fate of caller/1/2: %+v", rec)
	}
	b.replayAll("caller")
	b.replayAll("callee")
}

func recordsString(recs []*herald.EventRecord) string {
	var sb strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&sb, "\n  %s → %s %s %s/%s sender=%q", r.EventID, r.InstanceID, r.Name, r.Fate, r.Reason, r.Sender)
	}
	return sb.String()
}

// Sends to a missing instance (kept until it starts), to an ended one
// (dropped: instance_terminal), with payloads refused in the workflow
// (typed errors it can handle) or by the definition at commit (the sender
// fails, kind send, nothing of the turn written), with an event id taken
// by another target (the sender fails), and across tenants (impossible:
// the same id in the sender's tenant).
func TestSend_Fates(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "sender", func(ctx *herald.Context, target string) ([]string, error) {
			var out []string
			id, err := ctx.RaiseEvent(target, "note", "hi")
			if err != nil {
				return nil, err
			}
			out = append(out, id)
			big := strings.Repeat("x", 2<<20)
			var ei *herald.EventInvalidError
			for _, try := range []func() error{
				func() error { _, err := ctx.RaiseEvent(target, "note", big); return err },
				func() error { _, err := ctx.Enqueue("", "q", 1); return err },
				func() error { _, err := ctx.Enqueue(target, "bad\x00name", 1); return err },
				func() error { _, err := ctx.RaiseEvent(target, "note", deep(200)); return err },
				func() error {
					_, err := ctx.RaiseEvent(target, "note", 1, herald.StartIfAbsent("sender", "x"))
					return err
				},
			} {
				err := try()
				if !errors.As(err, &ei) || !errors.Is(err, herald.ErrEventInvalid) {
					return nil, fmt.Errorf("want an *EventInvalidError, got %v", err)
				}
				out = append(out, ei.Kind.String())
			}
			return out, nil
		})
		herald.RegisterWorkflow(rt, "badsender", func(ctx *herald.Context, payload any) (string, error) {
			_, err := ctx.RaiseEvent("sink", "typed", payload, herald.WithEventID("bad-send"))
			return "sent", err
		})
		herald.RegisterWorkflow(rt, "conflict", func(ctx *herald.Context, _ struct{}) (string, error) {
			_, err := ctx.RaiseEvent("sink", "note", 1, herald.WithEventID("taken"))
			return "sent", err
		})
		herald.RegisterWorkflow(rt, "sink", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("note").Get(&s)
			return s, err
		})
	})

	// Missing: kept, pending, until the instance starts.
	b.start("sender", "s1", "ghost")
	got := resultOf[[]string](b, "s1")
	want := []string{"s1/1/2", "too_large", "malformed", "malformed", "malformed", "malformed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sender: %q, want %q", got, want)
	}
	if rec := b.fate("s1/1/2"); rec.Fate != history.FatePending || rec.Sender != "s1" || rec.InstanceID != "ghost" {
		t.Fatalf("send to a missing instance: %+v", rec)
	}
	b.start("sink", "ghost", nil)
	if got := resultOf[string](b, "ghost"); got != "hi" {
		t.Fatalf("ghost: %q", got)
	}
	if rec := b.fate("s1/1/2"); rec.Fate != history.FateDelivered || rec.Sender != "s1" {
		t.Fatalf("after the start: %+v", rec)
	}

	// Ended: dropped, instance_terminal, with its sender.
	b.start("sender", "s2", "ghost")
	resultOf[[]string](b, "s2")
	if rec := b.fate("s2/1/2"); rec.Fate != history.FateDropped || rec.Reason != history.DropInstanceTerminal || rec.Sender != "s2" {
		t.Fatalf("send to an ended instance: %+v", rec)
	}

	// The definition refuses the payload at commit: the sender fails.
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "typed",
		Schema: json.RawMessage(`{"type":"integer"}`)}); err != nil {
		t.Fatal(err)
	}
	b.start("sink", "sink", nil)
	b.start("badsender", "bs", "not an integer")
	info := b.waitDone("bs")
	var we *herald.WorkflowError
	if info.Status != herald.StatusFailed || !errors.As(info.Err(), &we) || we.Kind != herald.FailureSend ||
		!strings.Contains(we.Message, "typed") {
		t.Fatalf("bad payload: %s %v", info.Status, info.Err())
	}
	if _, err := b.client.EventFate(b.ctx, "bad-send"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("the refused event is in the ledger: %v", err)
	}
	if n := countKind(b.history("bs", 1), history.EventSent, ""); n != 0 {
		t.Fatalf("the refused send is in the sender's history (%d)", n)
	}
	// A good payload goes through.
	b.start("badsender", "gs", 7)
	if got := resultOf[string](b, "gs"); got != "sent" {
		t.Fatal(got)
	}
	if rec := b.fate("bad-send"); rec.InstanceID != "sink" || rec.Sender != "gs" {
		t.Fatalf("good payload: %+v", rec)
	}

	// An id the ledger has for another target: the sender fails.
	b.raise("ghost2", "other", 1, "taken")
	b.start("conflict", "cf", nil)
	info = b.waitDone("cf")
	if info.Status != herald.StatusFailed || !errors.As(info.Err(), &we) || we.Kind != herald.FailureSend ||
		!strings.Contains(we.Message, "taken") {
		t.Fatalf("id conflict: %s %v", info.Status, info.Err())
	}
	if rec := b.fate("taken"); rec.InstanceID != "ghost2" || rec.Sender != "" {
		t.Fatalf("the conflict changed the first event: %+v", rec)
	}

	// Another tenant's instance of the same id is out of reach.
	other, err := b.rt.Client("other-tenant")
	if err != nil {
		t.Fatal(err)
	}
	ob := b.as(other)
	ob.start("sink", "shared", nil)
	b.start("sender", "s3", "shared")
	resultOf[[]string](b, "s3")
	if rec := b.fate("s3/1/2"); rec.Fate != history.FatePending || rec.InstanceID != "shared" {
		t.Fatalf("send to an id only another tenant has: %+v", rec)
	}
	if _, err := other.EventFate(b.ctx, "s3/1/2"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("the other tenant sees the event: %v", err)
	}
	if recs := ob.events("shared"); len(recs) != 0 {
		t.Fatalf("the other tenant's instance got %s", recordsString(recs))
	}
}

// deep returns an array nested n levels.
func deep(n int) any {
	var v any = 1
	for range n {
		v = []any{v}
	}
	return v
}
