package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
)

// temporalCLIVersion is the Temporal CLI whose dev server the benchmark runs
// (its go.mod requires go.temporal.io/server v1.29.1 and go.temporal.io/sdk
// v1.37.0, the SDK pinned in bench/go.mod).
const temporalCLIVersion = "v1.5.1"

// temporalSystem is a Temporal dev server (`temporal server start-dev` of
// the Temporal CLI, a child process on a SQLite file in the run's directory,
// bound to 127.0.0.1) driven by go.temporal.io/sdk: a client and a worker in
// this process.
//
// Workflow: receive once on the signal channel "go", then complete; the event
// is sent with SignalWorkflow.
//
// Resumed stamp: the worker's gRPC connection has an interceptor that maps
// each polled workflow task's token to its workflow id and stamps the
// workflow when RespondWorkflowTaskCompleted — carrying the task's
// CompleteWorkflowExecution command — has returned without error: the server
// has then persisted the task's result, the same point as Herald's stamp
// (the turn's commit has returned). A first task that completes without a
// command counts as parked.
type temporalSystem struct {
	cmd        *exec.Cmd
	exited     chan struct{}
	logPath    string
	dbPath     string
	client     client.Client
	worker     worker.Worker
	resumed    chan Stamp
	parked     atomic.Int64
	tokens     sync.Map // task token → workflow id
	durability string
}

const temporalTaskQueue = "heraldbench"

// temporalWait is the benchmark's workflow.
func temporalWait(ctx workflow.Context) (string, error) {
	var v string
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, &v)
	return v, nil
}

// temporalBinary returns the path of the Temporal CLI, building it with `go
// install` into the cache directory when it is not there yet (a few
// minutes).
func temporalBinary(ctx context.Context, path string) (string, error) {
	if path == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(cache, "heraldbench", "bin", "temporal")
	}
	// go install leaves the module version in the binary's build info
	// (`temporal --version` says 0.0.0-DEV).
	if bi, err := buildinfo.ReadFile(path); err == nil {
		if bi.Main.Path != "github.com/temporalio/cli" || bi.Main.Version != temporalCLIVersion {
			return "", fmt.Errorf("%s is %s %s, want github.com/temporalio/cli %s (remove it to rebuild)",
				path, bi.Main.Path, bi.Main.Version, temporalCLIVersion)
		}
		return path, nil
	}
	progress("  building the Temporal CLI %s into %s (go install; takes minutes)", temporalCLIVersion, filepath.Dir(path))
	if filepath.Base(path) != "temporal" {
		return "", fmt.Errorf("%s: not found (and -temporal-bin must end in /temporal to be built)", path)
	}
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/temporalio/cli/cmd/temporal@"+temporalCLIVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(path))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install temporal CLI: %w\n%s", err, out.String())
	}
	return path, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func openTemporal(ctx context.Context, bin, dir, tag string, pollers int, stickyTimeout time.Duration) (_ *temporalSystem, err error) {
	bin, err = temporalBinary(ctx, bin)
	if err != nil {
		return nil, err
	}
	s := &temporalSystem{
		resumed: make(chan Stamp, 1<<16),
		dbPath:  filepath.Join(dir, "temporal-"+tag+".db"),
		logPath: filepath.Join(dir, "temporal-"+tag+".log"),
		durability: "fsync per commit (journal_mode=DELETE, synchronous=FULL: SQLite's defaults, " +
			"start-dev sets no PRAGMA; one connection)",
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	s.cmd = exec.Command(bin, "server", "start-dev", "--headless", "--db-filename", s.dbPath,
		"--ip", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]),
		"--metrics-port", strconv.Itoa(ports[2]), "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with this process, whatever way it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.exited) }()
	progress("  temporal dev server pid %d on 127.0.0.1:%d, file %s", s.cmd.Process.Pid, ports[0], s.dbPath)

	opts := client.Options{
		HostPort:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Namespace: "default",
		Logger:    tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))),
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(s.intercept)},
		},
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := client.Dial(opts)
		if err == nil {
			s.client = c
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("temporal dev server exited: %s", tail(s.logPath))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("temporal dev server not ready after 2 minutes: %w", err)
		}
	}
	// The journal mode is kept in the file (WAL) or not (a rollback
	// journal): check it. synchronous is per connection, inside the server:
	// start-dev passes no PRAGMA (only --sqlite-pragma would), so SQLite's
	// default FULL.
	if jm, _, err := sqlitePragmas(ctx, "file:"+s.dbPath+"?mode=ro&_pragma=busy_timeout(5000)"); err != nil {
		return nil, fmt.Errorf("reading the dev server's journal mode: %w", err)
	} else if jm != "DELETE" {
		s.durability = fmt.Sprintf("journal_mode=%s, synchronous=FULL (SQLite's default; start-dev sets no PRAGMA); one connection", jm)
	}
	s.worker = worker.New(s.client, temporalTaskQueue, worker.Options{MaxConcurrentWorkflowTaskPollers: pollers, StickyScheduleToStartTimeout: stickyTimeout})
	s.worker.RegisterWorkflowWithOptions(temporalWait, workflow.RegisterOptions{Name: "bench.wait"})
	if err := s.worker.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// intercept sees every unary call of the client and the worker.
func (s *temporalSystem) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch r := req.(type) {
	case *workflowservice.PollWorkflowTaskQueueRequest:
		if p, ok := reply.(*workflowservice.PollWorkflowTaskQueueResponse); ok && len(p.TaskToken) > 0 {
			s.tokens.Store(string(p.TaskToken), p.GetWorkflowExecution().GetWorkflowId())
		}
	case *workflowservice.RespondWorkflowTaskCompletedRequest:
		at := time.Now()
		v, ok := s.tokens.LoadAndDelete(string(r.TaskToken))
		if !ok {
			return nil
		}
		// A response may hand the worker its next task at once.
		if p, ok := reply.(*workflowservice.RespondWorkflowTaskCompletedResponse); ok && p.GetWorkflowTask() != nil {
			t := p.GetWorkflowTask()
			s.tokens.Store(string(t.TaskToken), t.GetWorkflowExecution().GetWorkflowId())
		}
		for _, c := range r.Commands {
			if c.GetCommandType() == enums.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION {
				s.resumed <- Stamp{ID: v.(string), At: at}
				return nil
			}
		}
		s.parked.Add(1)
	}
	return nil
}

func (s *temporalSystem) Name() string          { return "temporal dev server sqlite" }
func (s *temporalSystem) Durability() string    { return s.durability }
func (s *temporalSystem) Resumed() <-chan Stamp { return s.resumed }

func (s *temporalSystem) Park(ctx context.Context, lane Lane, ids []string, _ func(int) string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	before := s.parked.Load()
	err := parallel(ctx, 32, len(ids), func(i int) error {
		_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: temporalTaskQueue}, "bench.wait")
		return err
	})
	if err != nil {
		return err
	}
	want := before + int64(len(ids))
	return poll(ctx, 2*time.Millisecond, func() bool { return s.parked.Load() >= want })
}

func (s *temporalSystem) Send(ctx context.Context, lane Lane, to string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	return s.client.SignalWorkflow(ctx, to, "", "go", "x")
}

// Close stops the worker, the client and the server (SIGINT, then SIGKILL
// after 15 s) and removes the server's files.
func (s *temporalSystem) Close() error {
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.client != nil {
		s.client.Close()
	}
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
			err = errors.New("temporal dev server did not stop on SIGINT; killed")
		}
	}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(s.dbPath + suffix)
	}
	os.Remove(s.logPath)
	return err
}

// tail returns the end of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
