package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"
)

// Diagnostics of the paced load scenario (-trace, -load-dump).

var (
	diagMu   sync.Mutex
	diagUsed = map[string]int{}
)

// traceFile returns path for its first use and path.2, path.3, … after
// that, so that the runs of several systems do not overwrite each other.
func traceFile(path string) string {
	diagMu.Lock()
	defer diagMu.Unlock()
	diagUsed[path]++
	if k := diagUsed[path]; k > 1 {
		return fmt.Sprintf("%s.%d", path, k)
	}
	return path
}

// startTrace starts runtime/trace into path; stop ends it and closes the file.
func startTrace(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-trace: %w", err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}

// startCPUProfile starts the CPU profiler into path; stop ends it and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-load-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-load-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// dumpLoad writes one CSV line per paced send: its scheduled time after
// start and its latency, in milliseconds.
func dumpLoad(path string, start time.Time, sched []time.Time, lat dist) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "sched_ms,latency_ms")
	for i := range sched {
		fmt.Fprintf(w, "%.3f,%.3f\n", ms(sched[i].Sub(start)), ms(lat[i]))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
