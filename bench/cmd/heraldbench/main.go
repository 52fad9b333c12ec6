// Command heraldbench runs Herald's benchmark scenarios (bench/README.md) and prints
// a table, with progress lines on stderr while it runs and, with -json, the
// results as JSON.
//
//	go run ./cmd/heraldbench -quick                 # smoke run, well under 2 minutes
//	go run ./cmd/heraldbench -json results.json     # the full run
//
// Scenarios (-scenarios, comma-separated; default all):
//
//	roundtrip  N instances each wait for one positional event; the events are
//	           raised to all from concurrent clients; instances resumed per
//	           second and the raise → resumed latency under that load
//	isolated   one raise → resumed round trip at a time on parked instances
//	queue      the round trip on the queue lane (Enqueue → Dequeue)
//	correlated the round trip on the correlated lane (one key per instance),
//	           and fan-out: one put reaches the 100 instances waiting on its key
//	load       raise → resumed latency at half the measured peak rate (paced)
//	physical   plain commits per second of the same SQLite file settings and
//	           PostgreSQL database: one row per commit, and batched
//	replay     cost of one turn for histories of 10 … 10,000 events
//	scaleout   the round trip with Herald's workers in 1 and in 3 separate
//	           processes on one PostgreSQL schema (needs the postgres backend)
//	sweep      the round trip again at the sizes of -sweep-n (Herald) and
//	           -peer-sweep-n (peers), for the plot (cmd/heraldplot)
//	bus-script the event bus: N events published by concurrent publishers →
//	           a subscription whose target is the script `return 1;`;
//	           events/s until every event is done, publish → done latency,
//	           and the attempts' durations (under load and one at a time)
//	bus-handler the same with a Go handler target; the River peers (river,
//	           river-fast) run the same workload as jobs
//	bus-dlq    the same with a handler that fails permanently: the
//	           duration of the dead-letter write (BusFinish)
//	bus-match  the router with 10,000 subscriptions: µs per event
//
// Peers (-peers, comma-separated; default durabletask,dbos-postgres,dbos-sqlite;
// "none" for Herald alone) run the round-trip scenarios in the same run, on
// their positional lane (external event, message, signal): durabletask-go on
// a SQLite file, DBOS on PostgreSQL and on its SQLite system database (and
// with synchronous=FULL: dbos-sqlite-full), and the Temporal dev server
// (temporal: opt-in, its CLI is built with go install the first time).
// River (river, river-fast) is the event bus's peer: it runs with the
// bus-handler scenario, on PostgreSQL.
//
// Diagnostics of the load scenario: -load-rate R paces it at R sends/s
// instead of half the measured peak (A/B runs of two builds at one rate);
// -trace FILE records a runtime/trace of the paced part (go tool trace),
// -load-cpuprofile FILE a CPU profile of it;
// -load-dump FILE writes each send's scheduled time and latency as CSV, to
// see whether the tail comes in bursts; -load-stages adds Herald's stage
// breakdown (stages.go) of the paced sends: each stage's distribution, and
// the mean of each stage over the slowest 1 % of the sends.
//
// A resumed time is taken when the turn that took the event has been
// committed: the benchmark wraps the store Herald's runtime uses and notes
// the time right after TurnCommit returns (see stampStore). That is later
// than the moment the workflow code ran and includes the commit's fsync, so
// it is the conservative choice; the workflow does nothing else (no extra
// activity), which keeps the measured work the scenario's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldwf/herald"
)

var began = time.Now()

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
}

// ticker calls line every two seconds and prints it until stop is called.
func ticker(line func() string) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress("%s", line())
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

type options struct {
	n, postgresN, clients, samples int
	backends, scenarios            []string
	postgresURL, jsonPath, dir     string
	cpuProfile, workerSchema       string
	diag                           loadDiag
	loadRate                       float64
	quick                          bool
	turnWorkers, pgConns           int
	loadFor, physicalFor           time.Duration
	replaySizes                    []int
	peers                          []string
	peerN, peerSamples, dtWorkers  int
	temporalPollers                int
	temporalSticky                 time.Duration
	temporalBin                    string
	sweepN, peerSweepN             []int
	bus                            busOptions
	matchEvents                    int
}

func main() {
	// Script targets run in child processes that re-execute this binary:
	// in such a child this serves scripts and never returns.
	herald.ServeScriptChild()
	var (
		o                  options
		backends           string
		scenarios          string
		peers              string
		sweepN, peerSweepN string
	)
	defURL := os.Getenv("HERALD_BENCH_POSTGRES_URL")
	if defURL == "" {
		defURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	flag.IntVar(&o.n, "n", 10000, "instances per round-trip run")
	flag.IntVar(&o.postgresN, "postgres-n", 0, "instances per round-trip run on PostgreSQL (default -n)")
	flag.IntVar(&o.clients, "clients", 32, "concurrent clients sending events")
	flag.IntVar(&o.samples, "samples", 100, "round trips in the isolated-latency scenario")
	flag.StringVar(&backends, "backends", "sqlite,postgres", "backends: sqlite (= sqlite-full,sqlite-normal), sqlite-full, sqlite-normal, postgres")
	flag.StringVar(&scenarios, "scenarios", strings.Join(knownScenarios, ","), "scenarios to run")
	flag.StringVar(&peers, "peers", strings.Join([]string{peerDurableTask, peerDBOSPostgres, peerDBOSSQLite, peerRiver, peerRiverFast}, ","),
		"peers run in the same run: "+strings.Join(knownPeers, ", ")+"; none for Herald alone")
	flag.IntVar(&o.peerN, "peer-n", 1000, "instances per round-trip run of a peer (300 with -quick)")
	flag.IntVar(&o.peerSamples, "peer-samples", 100, "round trips in a peer's isolated-latency scenario (30 with -quick)")
	flag.IntVar(&o.dtWorkers, "durabletask-workers", 32, "durabletask-go orchestration worker parallelism (its default is 1)")
	flag.IntVar(&o.temporalPollers, "temporal-pollers", 0, "Temporal worker MaxConcurrentWorkflowTaskPollers (0: the SDK's default, 2)")
	flag.DurationVar(&o.temporalSticky, "temporal-sticky-timeout", 10*time.Minute,
		"Temporal worker StickyScheduleToStartTimeout (0: the SDK's default, 5 s, with which the round trip collapses under load)")
	flag.StringVar(&o.temporalBin, "temporal-bin", "", "Temporal CLI "+temporalCLIVersion+" binary (default $HOME/.cache/heraldbench/bin/temporal, built with go install if missing)")
	flag.StringVar(&sweepN, "sweep-n", "100,1000,10000", "round-trip sizes of the sweep for Herald (100,500 with -quick)")
	flag.StringVar(&peerSweepN, "peer-sweep-n", "100,1000", "round-trip sizes of the sweep for the peers (100,300 with -quick)")
	flag.StringVar(&o.postgresURL, "postgres", defURL, "PostgreSQL URL (default $HERALD_BENCH_POSTGRES_URL or the local test database)")
	flag.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	flag.StringVar(&o.dir, "dir", "", "directory for SQLite files (default a temporary directory)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&o.quick, "quick", false, "small N and short runs: a smoke test")
	flag.IntVar(&o.turnWorkers, "turn-workers", 64, "Herald Config.TurnWorkers")
	flag.IntVar(&o.pgConns, "pg-conns", 16, "Herald's PostgreSQL pool size")
	flag.DurationVar(&o.loadFor, "load-for", 10*time.Second, "how long the paced load runs")
	flag.Float64Var(&o.loadRate, "load-rate", 0,
		"pace the load scenario at this many sends/s instead of half the measured peak (then the round trip runs only if selected); for A/B runs at one rate")
	flag.StringVar(&o.diag.trace, "trace", "", "write a runtime/trace of each paced load run to this file (go tool trace)")
	flag.StringVar(&o.diag.cpu, "load-cpuprofile", "", "write a CPU profile of each paced load run to this file (not with -cpuprofile)")
	flag.StringVar(&o.diag.dump, "load-dump", "", "write each paced send's scheduled offset and latency (CSV, ms) to this file")
	flag.BoolVar(&o.diag.stages, "load-stages", false, "print the stages of Herald's paced sends: each stage's p50, p99 and max, and its mean over the slowest 1 %")
	flag.DurationVar(&o.physicalFor, "physical-for", 3*time.Second, "how long each physical-limit run lasts")
	flag.IntVar(&o.bus.n, "bus-n", 10000, "events per loaded bus run, and jobs per River run (1000 with -quick)")
	flag.IntVar(&o.bus.publishers, "bus-publishers", 32, "concurrent publishers (River: producers) in the bus runs")
	flag.IntVar(&o.bus.samples, "bus-samples", 200, "events published one at a time in the bus runs' isolated part (30 with -quick)")
	flag.IntVar(&o.bus.workers, "bus-workers", 32, "Herald Config.Bus.Workers in the bus runs, and River's MaxWorkers")
	flag.IntVar(&o.bus.scriptProcs, "bus-script-processes", defaultScriptProcs(), "Herald Config.Bus.ScriptProcesses in the bus runs (default: the CPUs)")
	flag.IntVar(&o.bus.tenantScriptProcs, "bus-tenant-script-processes", 0, "Herald Config.Bus.TenantScriptProcesses in the bus runs (default Herald's: half the script processes); the runs are of one tenant")
	flag.IntVar(&o.matchEvents, "match-events", 200000, "events routed in the bus-match scenario")
	flag.StringVar(&o.workerSchema, "worker-schema", "", "internal: run as a scale-out worker process on this PostgreSQL schema")
	flag.Parse()
	if o.workerSchema != "" {
		if err := runWorker(o.postgresURL, o.workerSchema, o.pgConns, o.turnWorkers); err != nil {
			fmt.Fprintln(os.Stderr, "heraldbench worker:", err)
			os.Exit(1)
		}
		return
	}

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.replaySizes = []int{10, 100, 1000, 10000}
	if o.quick {
		if !set["n"] {
			o.n = 500
		}
		if !set["samples"] {
			o.samples = 30
		}
		if !set["load-for"] {
			o.loadFor = 2 * time.Second
		}
		if !set["physical-for"] {
			o.physicalFor = time.Second
		}
		o.replaySizes = []int{10, 100, 1000}
		if !set["peer-n"] {
			o.peerN = 300
		}
		if !set["peer-samples"] {
			o.peerSamples = 30
		}
		if !set["sweep-n"] {
			sweepN = "100,500"
		}
		if !set["peer-sweep-n"] {
			peerSweepN = "100,300"
		}
		if !set["bus-n"] {
			o.bus.n = 1000
		}
		if !set["bus-samples"] {
			o.bus.samples = 30
		}
		if !set["match-events"] {
			o.matchEvents = 20000
		}
	}
	o.bus.warmup = 50
	var err error
	if o.sweepN, err = parseInts(sweepN); err != nil {
		fmt.Fprintln(os.Stderr, "heraldbench: -sweep-n:", err)
		os.Exit(2)
	}
	if o.peerSweepN, err = parseInts(peerSweepN); err != nil {
		fmt.Fprintln(os.Stderr, "heraldbench: -peer-sweep-n:", err)
		os.Exit(2)
	}
	for _, p := range strings.Split(peers, ",") {
		switch p = strings.TrimSpace(p); {
		case p == "" || p == "none":
		case slices.Contains(knownPeers, p):
			if !slices.Contains(o.peers, p) {
				o.peers = append(o.peers, p)
			}
		default:
			fmt.Fprintf(os.Stderr, "heraldbench: unknown peer %q (known: %s, none)\n", p, strings.Join(knownPeers, ","))
			os.Exit(2)
		}
	}
	if o.postgresN <= 0 {
		o.postgresN = o.n
	}
	for _, b := range strings.Split(backends, ",") {
		switch b = strings.TrimSpace(b); b {
		case "":
		case "sqlite":
			o.backends = append(o.backends, backendSQLiteFull, backendSQLiteNormal)
		case backendSQLiteFull, backendSQLiteNormal, backendPostgres:
			o.backends = append(o.backends, b)
		default:
			fmt.Fprintf(os.Stderr, "heraldbench: unknown backend %q\n", b)
			os.Exit(2)
		}
	}
	for _, s := range strings.Split(scenarios, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(knownScenarios, s) {
			fmt.Fprintf(os.Stderr, "heraldbench: unknown scenario %q (known: %s)\n", s, strings.Join(knownScenarios, ","))
			os.Exit(2)
		}
		o.scenarios = append(o.scenarios, s)
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "heraldbench")
		if err != nil {
			fmt.Fprintln(os.Stderr, "heraldbench:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d) // also on the way out below, where os.Exit skips deferred calls
		o.dir = d
		tmpDir = d
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "heraldbench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "heraldbench:", err)
			os.Exit(1)
		}
	}
	results := run(ctx, &o)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}

	fmt.Printf("\nheraldbench %s — %d CPUs, load average before the run %s, -n %d (PostgreSQL %d), -peer-n %d\n\n",
		began.UTC().Format(time.RFC3339), runtime.NumCPU(), loadAvg, o.n, o.postgresN, o.peerN)
	printTable(os.Stdout, results)
	rats := ratios(results)
	printRatios(os.Stdout, rats)
	if o.jsonPath != "" {
		out := struct {
			Date      time.Time `json:"date"`
			CPUs      int       `json:"cpus"`
			LoadAvg   string    `json:"load_average_before"`
			GoVersion string    `json:"go_version"`
			Args      []string  `json:"args"`
			Results   []Result  `json:"results"`
			Ratios    []Ratio   `json:"ratios,omitempty"`
		}{began.UTC(), runtime.NumCPU(), loadAvg, runtime.Version(), os.Args[1:], results, rats}
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "heraldbench:", err)
			os.Exit(1)
		}
	}
	for _, r := range results {
		if r.Error != "" {
			if tmpDir != "" {
				os.RemoveAll(tmpDir)
			}
			os.Exit(1)
		}
	}
}

var tmpDir string

var knownScenarios = []string{"roundtrip", "isolated", "queue", "correlated", "load", "physical", "replay", "scaleout", "sweep",
	scBusScript, scBusHandler, scBusDLQ, scBusMatch}

var loadAvg = func() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}()

func run(ctx context.Context, o *options) []Result {
	var results []Result
	add := func(rs ...Result) {
		for _, r := range rs {
			if r.Error != "" {
				progress("  ERROR %s / %s: %s", r.Scenario, r.System, r.Error)
			}
		}
		results = append(results, rs...)
	}
	has := func(s string) bool { return slices.Contains(o.scenarios, s) }
	tag := began.UTC().Format("20060102_150405")
	hopts := func(suffix string) heraldOptions {
		return heraldOptions{dir: o.dir, postgresURL: o.postgresURL, pgConns: o.pgConns, turnWorkers: o.turnWorkers,
			tag: tag + "_" + suffix}
	}

	if has("roundtrip") || has("isolated") || has("queue") || has("correlated") || has("load") || has("sweep") {
		for _, b := range o.backends {
			if ctx.Err() != nil {
				break
			}
			n := o.n
			if b == backendPostgres {
				n = o.postgresN
			}
			progress("Herald on %s", b)
			h, err := openHerald(ctx, b, hopts(strings.ReplaceAll(b, "-", "_")))
			if err != nil {
				add(Result{Scenario: "open", System: "herald " + b, Error: err.Error()})
				continue
			}
			runSystem(ctx, h, o, n, o.samples, o.sweepN, add)
			if err := h.Close(); err != nil {
				progress("  close: %v", err)
			}
		}
		runPeers(ctx, o, tag, add)
	}

	if (has(scBusScript) || has(scBusHandler) || has(scBusDLQ)) && ctx.Err() == nil {
		runBus(ctx, o, hopts, add)
	}
	if has(scBusHandler) {
		for _, p := range o.peers {
			if isBusPeer(p) && ctx.Err() == nil {
				add(runRiver(ctx, o, p, tag+"_"+strings.ReplaceAll(p, "-", "_"))...)
			}
		}
	}
	if has(scBusMatch) && ctx.Err() == nil {
		progress("Bus matching, 10,000 subscriptions")
		add(busMatch(o.matchEvents))
	}

	if has("physical") && ctx.Err() == nil {
		progress("Physical limit")
		for _, b := range o.backends {
			switch b {
			case backendSQLiteFull:
				add(physicalSQLite(ctx, o.dir, "FULL", 1, o.physicalFor))
				add(physicalSQLite(ctx, o.dir, "FULL", 100, o.physicalFor))
			case backendSQLiteNormal:
				add(physicalSQLite(ctx, o.dir, "NORMAL", 1, o.physicalFor))
			case backendPostgres:
				add(physicalPostgres(ctx, o.postgresURL, 1, 1, o.physicalFor))
				add(physicalPostgres(ctx, o.postgresURL, 16, 1, o.physicalFor))
				add(physicalPostgres(ctx, o.postgresURL, 1, 1000, o.physicalFor))
			}
		}
	}

	if has("scaleout") && ctx.Err() == nil && slices.Contains(o.backends, backendPostgres) {
		add(scaleOut(ctx, o.postgresN, o.clients, hopts)...)
	}

	if has("replay") && ctx.Err() == nil && len(o.backends) > 0 {
		b := o.backends[0]
		progress("Replay cost on %s", b)
		h, err := openHerald(ctx, b, hopts("replay"))
		if err != nil {
			add(Result{Scenario: "open", System: "herald " + b, Error: err.Error()})
		} else {
			for _, size := range o.replaySizes {
				if ctx.Err() != nil {
					break
				}
				add(replayCost(ctx, h, size, 20)...)
			}
			if err := h.Close(); err != nil {
				progress("  close: %v", err)
			}
		}
	}
	return results
}
