package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one row of the table (and one object of the JSON output).
// Latencies are in milliseconds; zero fields are not shown.
type Result struct {
	Scenario   string  `json:"scenario"`
	System     string  `json:"system"`
	Durability string  `json:"durability"`
	N          int     `json:"n,omitempty"`
	Rate       float64 `json:"rate,omitempty"`
	RateUnit   string  `json:"rate_unit,omitempty"`
	P50        float64 `json:"p50_ms,omitempty"`
	P95        float64 `json:"p95_ms,omitempty"`
	P99        float64 `json:"p99_ms,omitempty"`
	Max        float64 `json:"max_ms,omitempty"`
	// CPU is the machine's busy CPU time per instance (µs) over the
	// measured part of a round trip or paced run: every process's, the
	// database server's too (machineCPU). 0: not measured.
	CPU float64 `json:"cpu_us_per_op,omitempty"`
	// Steal is the share of the CPUs' time (%) the hypervisor gave to other
	// machines over the same part of the run (machineCPU).
	Steal float64 `json:"steal_pct,omitempty"`
	Note  string  `json:"note,omitempty"`
	Error string  `json:"error,omitempty"`
	// Peer is the -peers name of a peer's row ("" for Herald's).
	Peer string `json:"peer,omitempty"`
	// Unsupported marks a scenario the system cannot run (a lane it lacks).
	Unsupported bool `json:"unsupported,omitempty"`
}

// dist holds latency samples.
type dist []time.Duration

func (d dist) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fill sets the latency columns of r from d.
func (d dist) fill(r *Result) {
	r.P50, r.P95, r.P99, r.Max = ms(d.pct(50)), ms(d.pct(95)), ms(d.pct(99)), ms(d.pct(100))
}

func num(v float64) string {
	switch {
	case v == 0:
		return ""
	case v >= 1000:
		s := fmt.Sprintf("%.0f", v)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func printTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsystem\tN\trate\tunit\tp50 ms\tp95 ms\tp99 ms\tmax ms\tCPU µs\tsteal %\t")
	for _, r := range rs {
		n := ""
		if r.N > 0 {
			n = num(float64(r.N))
			if r.N < 1000 {
				n = fmt.Sprint(r.N)
			}
		}
		rate, unit := num(r.Rate), r.RateUnit
		switch {
		case r.Unsupported:
			rate, unit = "unsupported", ""
		case r.Error != "":
			rate, unit = "ERROR", ""
		}
		steal := ""
		if r.CPU > 0 {
			steal = fmt.Sprintf("%.0f", r.Steal)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.System, n, rate, unit,
			num(r.P50), num(r.P95), num(r.P99), num(r.Max), num(r.CPU), steal)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "durability and notes:")
	seen := map[string]bool{}
	for _, r := range rs {
		k := r.Scenario + "|" + r.System
		if seen[k] {
			continue
		}
		seen[k] = true
		line := fmt.Sprintf("  %s / %s: %s", r.Scenario, r.System, r.Durability)
		if r.Note != "" {
			line += "; " + r.Note
		}
		if r.Error != "" {
			line += "; ERROR: " + r.Error
		}
		fmt.Fprintln(w, line)
	}
}
