package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/crashfs"
	"github.com/heraldwf/herald/storage/sqlite"
)

// The power-loss test runs a workload on a store kept on crashfs (a FUSE
// file system that keeps only what was fsynced, as a disk does through a
// power loss), in a child process that logs every call acknowledged to it
// to a file outside the mount. It kills the child at a random moment, drops
// everything that was not synced, reopens the database from what is left
// and checks it: PRAGMA integrity_check, and every acknowledged start,
// raise and completion is there. Each cycle continues on the previous
// cycle's surviving database.
//
// HERALD_POWERLOSS_CYCLES sets the number of cycles for each sync mode
// (default 1, so the README's test command stays short; .ci/run runs the
// test once more with 3: a later cycle starts from a database an earlier
// power loss left). The test needs FUSE (/dev/fuse and the right to mount:
// root); without it, it skips, except in CI (CI=true), where it fails.

const (
	plWorkflow = "powerloss.flow"
	plActivity = "powerloss.step"
	plDB       = "herald.db"
)

// plModes are the sync modes under test: the sync pipeline (the default)
// and SQLite's own FULL.
var plModes = map[string][]sqlite.Option{
	"pipeline":       nil,
	"sync-in-commit": {sqlite.WithSyncInCommit()},
}

func plCycles(t *testing.T) int {
	v := os.Getenv("HERALD_POWERLOSS_CYCLES")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HERALD_POWERLOSS_CYCLES=%q: want a positive number", v)
	}
	return n
}

// mountCrashFS mounts fsys on a new directory, or skips the test where FUSE
// cannot be mounted (failing it in CI).
func mountCrashFS(t *testing.T, fsys *crashfs.FS) string {
	t.Helper()
	dir := t.TempDir()
	err := crashfs.Available()
	if err == nil {
		err = fsys.Mount(dir)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE IS NOT AVAILABLE: the power-loss test needs /dev/fuse and the right to mount (root): %v", err)
		}
		t.Skipf("FUSE IS NOT AVAILABLE, power-loss test skipped (it fails in CI): %v", err)
	}
	return dir
}

func TestPowerLoss(t *testing.T) {
	for _, mode := range []string{"pipeline", "sync-in-commit"} {
		t.Run(mode, func(t *testing.T) {
			state := t.TempDir() // the surviving files between cycles
			logs := t.TempDir()
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			var acks []plAck
			for cycle := range plCycles(t) {
				acks = append(acks, plCycle(t, mode, cycle, state, filepath.Join(logs, fmt.Sprintf("acks-%d.log", cycle)), rng)...)
				plCheck(t, mode, cycle, state, acks)
			}
		})
	}
}

// plCycle runs one cycle: the surviving files of state mounted on crashfs,
// a worker on them killed at a random moment, and what survives written
// back to state. It returns what the worker acknowledged.
func plCycle(t *testing.T, mode string, cycle int, state, ackLog string, rng *rand.Rand) []plAck {
	files := map[string][]byte{}
	entries, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(state, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	fsys := crashfs.New(files)
	mnt := mountCrashFS(t, fsys)
	unmounted := false
	defer func() {
		if !unmounted {
			fsys.Unmount()
		}
	}()

	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerLossWorker$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), "HERALD_POWERLOSS_WORKER=1", "HERALD_POWERLOSS_MODE="+mode,
		"HERALD_POWERLOSS_DB="+filepath.Join(mnt, plDB), "HERALD_POWERLOSS_ACKS="+ackLog,
		"HERALD_POWERLOSS_PREFIX="+fmt.Sprintf("c%d", cycle))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "worker ready" {
				close(ready)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("cycle %d: worker exited before it was ready: %v\n%s", cycle, err, stderr.String())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("cycle %d: worker not ready\n%s", cycle, stderr.String())
	}
	// The kill lands at a random moment once the worker is under way: after
	// a random number of acknowledgements, plus a random delay.
	want := 1 + rng.IntN(150)
	deadline := time.Now().Add(30 * time.Second)
	for len(readAcks(t, ackLog)) < want && time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("cycle %d: worker exited: %v\n%s", cycle, err, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the random moment itself
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	acks := readAcks(t, ackLog)
	if len(acks) < want {
		t.Fatalf("cycle %d: only %d acknowledgements in 30 s\n%s", cycle, len(acks), stderr.String())
	}
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	unmounted = true

	// The power loss: only what was synced is left (even cycles), or that
	// and a random part of what was not (odd cycles: the disk had written
	// some of it, in any order).
	for _, e := range entries {
		os.Remove(filepath.Join(state, e.Name()))
	}
	left := fsys.Durable()
	if cycle%2 == 1 {
		left = fsys.Torn(func() bool { return rng.IntN(2) == 0 })
	}
	for name, b := range left {
		if err := os.WriteFile(filepath.Join(state, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cycle %d: killed after %d acknowledgements, %d fsyncs", cycle, len(acks), fsys.Syncs())
	return acks
}

// plCheck opens what survived and checks every acknowledgement so far.
func plCheck(t *testing.T, mode string, cycle int, state string, acks []plAck) {
	path := filepath.Join(state, plDB)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("cycle %d: the database did not survive: %v", cycle, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var check string
	err = db.QueryRow("PRAGMA integrity_check").Scan(&check)
	db.Close()
	if err != nil || check != "ok" {
		t.Fatalf("cycle %d: integrity_check: %q, %v", cycle, check, err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, plModes[mode]...)
	if err != nil {
		t.Fatalf("cycle %d: reopen: %v", cycle, err)
	}
	defer st.Close()
	c, err := herald.NewClient(st, herald.DefaultTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, a := range acks {
		var err error
		switch a.kind {
		case "start":
			_, err = c.Status(ctx, a.id)
		case "raise":
			_, err = c.EventFate(ctx, a.id)
		case "done":
			var info *herald.InstanceInfo
			if info, err = c.Status(ctx, a.id); err == nil && (info.Status != herald.StatusCompleted || string(info.Output) != a.arg) {
				err = fmt.Errorf("status %s, output %s; want completed with %s", info.Status, info.Output, a.arg)
			}
		}
		if err != nil {
			lost++
			if lost <= 10 {
				t.Errorf("cycle %d: acknowledged %s %s lost: %v", cycle, a.kind, a.id, err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("cycle %d: %d of %d acknowledgements lost", cycle, lost, len(acks))
	}
}

// plAck is one acknowledged call: "start" (id: the instance), "raise" (id:
// the event) or "done" (id: the instance, arg: its output as JSON).
type plAck struct{ kind, id, arg string }

func readAcks(t *testing.T, path string) []plAck {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []plAck
	for line := range strings.Lines(string(b)) {
		if !strings.HasSuffix(line, "\n") {
			break // cut by the kill
		}
		f := strings.Fields(line)
		a := plAck{kind: f[0], id: f[1]}
		if len(f) > 2 {
			a.arg = f[2]
		}
		out = append(out, a)
	}
	return out
}

// TestPowerLossWorker is the child process of TestPowerLoss (it does
// nothing unless HERALD_POWERLOSS_WORKER=1): it runs a Runtime on the store
// and clients that start instances, raise the event each waits for and
// wait for its completion, logging each acknowledgement, until killed.
func TestPowerLossWorker(t *testing.T) {
	if os.Getenv("HERALD_POWERLOSS_WORKER") != "1" {
		return
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv("HERALD_POWERLOSS_DB"), plModes[os.Getenv("HERALD_POWERLOSS_MODE")]...)
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(os.Getenv("HERALD_POWERLOSS_ACKS"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	ack := func(kind, id, arg string) {
		logMu.Lock()
		defer logMu.Unlock()
		if _, err := io.WriteString(logf, strings.TrimSpace(kind+" "+id+" "+arg)+"\n"); err != nil {
			panic(err)
		}
	}
	rt, err := herald.NewRuntime(st, &herald.Config{
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))},
		TurnLease:    time.Second,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	herald.RegisterActivity(rt, plActivity, func(_ context.Context, in string) (string, error) { return in + "+step", nil })
	herald.RegisterWorkflow(rt, plWorkflow, func(ctx *herald.Context, in string) (string, error) {
		var got string
		if err := ctx.WaitEvent("go").Get(&got); err != nil {
			return "", err
		}
		var out string
		if err := ctx.CallActivity(plActivity, got).Get(&out); err != nil {
			return "", err
		}
		return in + "/" + out, nil
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	prefix := os.Getenv("HERALD_POWERLOSS_PREFIX")
	fmt.Println("worker ready")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				if _, err := c.StartWorkflow(ctx, plWorkflow, id, herald.WithInstanceID(id)); err != nil {
					panic(err)
				}
				ack("start", id, "")
				ev := id + "/go"
				if _, err := c.RaiseEvent(ctx, id, "go", "p"+id, herald.WithEventID(ev)); err != nil {
					panic(err)
				}
				ack("raise", ev, "")
				info, err := c.WaitForCompletion(ctx, id)
				if err != nil {
					panic(err)
				}
				ack("done", id, string(info.Output))
			}
		}()
	}
	wg.Wait()
}
