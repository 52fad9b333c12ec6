package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"time"
)

// Diagnostics of the paced load scenario (-trace, -load-dump).

var (
	diagMu   sync.Mutex
	diagUsed = map[string]int{}
)

// loadDiag is what the paced load scenario records besides its latencies
// (-trace, -load-cpuprofile, -load-dump; "" for none), and whether to
// split its sends into stages (-load-stages).
type loadDiag struct {
	trace, cpu, dump string
	stages           bool
}

// runFile returns path for its first use and path.2, path.3, … after
// that, so that the runs of several systems do not overwrite each other.
func runFile(path string) string {
	diagMu.Lock()
	defer diagMu.Unlock()
	diagUsed[path]++
	if k := diagUsed[path]; k > 1 {
		return fmt.Sprintf("%s.%d", path, k)
	}
	return path
}

// startRecorders starts runtime/trace and the CPU profiler as d asks, each
// into a file of its own (runFile); stop ends them and closes the files.
func startRecorders(d loadDiag) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	for _, r := range []struct {
		flag, path string
		start      func(io.Writer) error
		end        func()
	}{
		{"-trace", d.trace, trace.Start, trace.Stop},
		{"-load-cpuprofile", d.cpu, pprof.StartCPUProfile, pprof.StopCPUProfile},
	} {
		if r.path == "" {
			continue
		}
		f, err := os.Create(runFile(r.path))
		if err == nil {
			if err = r.start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", r.flag, err)
		}
		stops = append(stops, func() {
			r.end()
			f.Close()
		})
	}
	return stop, nil
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
