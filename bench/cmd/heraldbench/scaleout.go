package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage/postgres"
)

// Scale-out runs Herald's workers in separate processes (this command
// started again with -worker-schema) on one PostgreSQL schema; this process
// only starts instances and sends events through a Client. Each worker
// stamps its resumed commits (stampStore, as in every other scenario) and
// reports them on its stdout as "C <id> <unix ns>"; a parked instance is
// "P <id>". Every process runs on this machine, so the clocks agree.

// runWorker is the worker process: it runs a runtime on the schema until
// its stdin closes.
func runWorker(url, schema string, pgConns, turnWorkers int) error {
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, postgres.WithSchema(schema), postgres.WithMaxConns(int32(pgConns)))
	if err != nil {
		return err
	}
	defer store.Close()
	lines := make(chan string, 1<<16)
	wrapped := &stampStore{Store: store, onCommit: func(id string, status heraldtype.Status, at time.Time) {
		switch status {
		case heraldtype.StatusRunning:
			lines <- "P " + id
		case heraldtype.StatusCompleted:
			lines <- fmt.Sprintf("C %s %d", id, at.UnixNano())
		}
	}}
	rt, err := herald.NewRuntime(wrapped, &herald.Config{TurnWorkers: turnWorkers,
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}})
	if err != nil {
		return err
	}
	registerWait(rt)
	if err := rt.Start(ctx); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		w := bufio.NewWriter(os.Stdout)
		for l := range lines {
			w.WriteString(l)
			w.WriteByte('\n')
			if len(lines) == 0 {
				w.Flush()
			}
		}
		w.Flush()
		close(done)
	}()
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = rt.Stop(sctx)
	close(lines)
	<-done
	return err
}

// nodesSystem is Herald with its workers in n processes on one schema.
type nodesSystem struct {
	name, durability string
	url, schema      string
	store            *postgres.Store
	client           *herald.Client
	procs            []*exec.Cmd
	stdins           []io.WriteCloser
	resumed          chan Stamp
	parked           atomic.Int64
}

func openNodes(ctx context.Context, nodes int, o heraldOptions) (*nodesSystem, error) {
	schema := "heraldbench_" + o.tag
	store, err := postgres.Open(ctx, o.postgresURL, postgres.WithSchema(schema), postgres.WithMaxConns(int32(o.pgConns)))
	if err != nil {
		return nil, err
	}
	sc, _ := pgSetting(ctx, o.postgresURL, "synchronous_commit")
	client, err := herald.NewClient(store, herald.DefaultTenant, nil)
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &nodesSystem{name: fmt.Sprintf("herald postgres, %d worker process(es)", nodes),
		durability: "WAL flush per commit (synchronous_commit=" + sc + ")",
		url:        o.postgresURL, schema: schema, store: store, client: client,
		resumed: make(chan Stamp, 1<<16)}
	self, err := os.Executable()
	if err != nil {
		s.Close()
		return nil, err
	}
	for range nodes {
		cmd := exec.Command(self, "-worker-schema", schema, "-postgres", o.postgresURL,
			"-pg-conns", strconv.Itoa(o.pgConns), "-turn-workers", strconv.Itoa(o.turnWorkers))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			s.Close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			s.Close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			s.Close()
			return nil, err
		}
		s.procs, s.stdins = append(s.procs, cmd), append(s.stdins, in)
		go s.read(out)
	}
	return s, nil
}

func (s *nodesSystem) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "P":
			s.parked.Add(1)
		case len(f) == 3 && f[0] == "C":
			ns, err := strconv.ParseInt(f[2], 10, 64)
			if err == nil {
				s.resumed <- Stamp{ID: f[1], At: time.Unix(0, ns)}
			}
		}
	}
}

func (s *nodesSystem) Name() string          { return s.name }
func (s *nodesSystem) Durability() string    { return s.durability }
func (s *nodesSystem) Resumed() <-chan Stamp { return s.resumed }

func (s *nodesSystem) Park(ctx context.Context, lane Lane, ids []string, key func(i int) string) error {
	before := s.parked.Load()
	if err := parkInstances(ctx, s.client, lane, ids, key); err != nil {
		return err
	}
	want := before + int64(len(ids))
	return poll(ctx, 2*time.Millisecond, func() bool { return s.parked.Load() >= want })
}

func (s *nodesSystem) Send(ctx context.Context, lane Lane, to string) error {
	return send(ctx, s.client, lane, to)
}

func (s *nodesSystem) Close() error {
	for _, in := range s.stdins {
		in.Close()
	}
	for _, p := range s.procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	err := s.store.Close()
	dropSchema(s.url, s.schema)
	return err
}

// scaleOut runs the round trip with 1 and with 3 worker processes.
func scaleOut(ctx context.Context, n, clients int, o func(suffix string) heraldOptions) []Result {
	var out []Result
	var one float64
	for _, nodes := range []int{1, 3} {
		if ctx.Err() != nil {
			break
		}
		progress("Scale-out: %d worker process(es) on PostgreSQL", nodes)
		s, err := openNodes(ctx, nodes, o(fmt.Sprintf("nodes%d", nodes)))
		if err != nil {
			out = append(out, Result{Scenario: "scale-out", System: fmt.Sprintf("herald postgres, %d nodes", nodes), Error: err.Error()})
			continue
		}
		r := roundTrip(ctx, newTarget(s), LanePositional, n, clients)
		r.Scenario = "scale-out round trip"
		if nodes == 1 {
			one = r.Rate
		} else if one > 0 {
			r.Note += fmt.Sprintf("; %.2f× one process", r.Rate/one)
		}
		out = append(out, r)
		if err := s.Close(); err != nil {
			progress("  close: %v", err)
		}
	}
	return out
}
