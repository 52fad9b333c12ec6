package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU returns the CPU time this process (Herald and the benchmark's
// clients, or a peer's in-process parts) has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the machine's and this process's CPU over a part of a
// run.
type cpuMeter struct {
	machine, steal, own time.Duration
	start               time.Time
	ok                  bool
}

func startCPU() cpuMeter {
	m, st, ok := machineCPU()
	return cpuMeter{machine: m, steal: st, own: processCPU(), start: time.Now(), ok: ok}
}

// fill sets r.CPU to the machine's CPU per instance since c started, and
// adds this process's share to r's note.
func (c cpuMeter) fill(r *Result, n int) {
	m, st, ok := machineCPU()
	if !ok || !c.ok || n == 0 {
		return
	}
	r.CPU = float64((m - c.machine).Microseconds()) / float64(n)
	own := float64((processCPU() - c.own).Microseconds()) / float64(n)
	r.Note += fmt.Sprintf("; machine CPU %.0f µs an instance, %.0f of it in this process", r.CPU, own)
	if el := time.Since(c.start); el > 0 {
		r.Steal = 100 * float64(st-c.steal) / float64(el*time.Duration(runtime.NumCPU()))
		r.Note += fmt.Sprintf("; the hypervisor took %.0f %% of the CPUs' time (steal)", r.Steal)
	}
}

// machineCPU returns the machine's busy CPU time so far (every CPU's user,
// nice, system, irq and softirq time from /proc/stat) and its steal time
// (what the hypervisor gave other machines while this one had work to run:
// a run with much of it measured the host as much as the systems), and
// false where there is no /proc/stat. The difference over a run, divided by the
// instances it resumed, is what one instance cost the whole machine:
// Herald's process, the benchmark's clients and the database server
// alike, and a peer's just the same. It is steadier than a rate on a
// shared machine, where the rate also measures what else runs.
func machineCPU() (busy, steal time.Duration, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	var ticks [9]int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		if ticks[i], err = strconv.ParseInt(fields[i], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	// USER_HZ is 100 on every Linux platform Go supports.
	const tick = 10 * time.Millisecond
	return time.Duration(ticks[1]+ticks[2]+ticks[3]+ticks[6]+ticks[7]) * tick, time.Duration(ticks[8]) * tick, true
}
