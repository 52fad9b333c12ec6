package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Peers the benchmark can run (-peers).
const (
	peerDurableTask = "durabletask"
	peerTemporal    = "temporal"
)

var knownPeers = []string{peerDurableTask, peerDBOSPostgres, peerDBOSSQLite, peerDBOSSQLiteFull, peerTemporal, peerRiver, peerRiverFast}

// laneSupporter is implemented by a System that lacks some lanes; the
// scenarios of a lane it lacks are shown as unsupported instead of run.
type laneSupporter interface {
	Supports(Lane) bool
}

func supports(s System, l Lane) bool {
	if ls, ok := s.(laneSupporter); ok {
		return ls.Supports(l)
	}
	return true
}

// The peers have the positional lane only (external event, message, signal).
func (s *durableTaskSystem) Supports(l Lane) bool { return l == LanePositional }
func (s *dbosSystem) Supports(l Lane) bool        { return l == LanePositional }
func (s *temporalSystem) Supports(l Lane) bool    { return l == LanePositional }

// heraldPeer pairs a peer with the Herald system its figures are divided
// into in the ratio lines: the one with the same kind of storage and, where
// it can be had, the same durability.
var heraldPeer = map[string]string{
	peerDurableTask:    "herald sqlite FULL",
	peerDBOSPostgres:   "herald postgres",
	peerDBOSSQLite:     "herald sqlite NORMAL",
	peerDBOSSQLiteFull: "herald sqlite FULL",
	peerTemporal:       "herald sqlite FULL",
	peerRiver:          "herald postgres",
	peerRiverFast:      "herald postgres",
}

func openPeer(ctx context.Context, peer string, o *options, tag string) (System, error) {
	switch peer {
	case peerDurableTask:
		return openDurableTask(ctx, o.dir, tag, o.dtWorkers)
	case peerDBOSPostgres, peerDBOSSQLite, peerDBOSSQLiteFull:
		return openDBOS(ctx, peer, dbosOptions{dir: o.dir, postgresURL: o.postgresURL, tag: tag})
	case peerTemporal:
		return openTemporal(ctx, o.temporalBin, o.dir, tag, o.temporalPollers, o.temporalSticky)
	}
	return nil, fmt.Errorf("unknown peer %q (known: %s)", peer, strings.Join(knownPeers, ","))
}

// unsupported is the row of a scenario a system cannot run.
func unsupported(scenario string, s System) Result {
	return Result{Scenario: scenario, System: s.Name(), Durability: s.Durability(), Unsupported: true,
		Note: "lane not supported by this system"}
}

// sweepScenario is the scenario name of the round trips the sweep adds.
const sweepScenario = "sweep round trip (positional)"

// runSystem runs the selected round-trip scenarios on one open system: the
// round trip at n, isolated latency, the queue and correlated lanes, latency
// under load, and the sweep's round trips at the sizes in sweep other than n
// (when the round trip ran at n).
func runSystem(ctx context.Context, s System, o *options, n, samples int, sweep []int, add func(...Result)) {
	has := func(sc string) bool { return slices.Contains(o.scenarios, sc) }
	t := newTarget(s)
	var peak float64
	if has("roundtrip") || (has("load") && o.loadRate <= 0) {
		r := roundTrip(ctx, t, LanePositional, n, o.clients)
		peak = r.Rate
		add(r)
	}
	if o.loadRate > 0 {
		peak = 2 * o.loadRate
	}
	if has("isolated") && ctx.Err() == nil {
		add(isolated(ctx, t, LanePositional, samples)...)
	}
	if has("queue") && ctx.Err() == nil {
		if supports(s, LaneQueue) {
			add(roundTrip(ctx, t, LaneQueue, n, o.clients))
		} else {
			add(unsupported("round trip (queue)", s))
		}
	}
	if has("correlated") && ctx.Err() == nil {
		if supports(s, LaneCorrelated) {
			add(roundTrip(ctx, t, LaneCorrelated, n, o.clients))
			add(fanOut(ctx, t, n, 100, o.clients))
		} else {
			add(unsupported("round trip (correlated)", s))
		}
	}
	if has("load") && peak > 0 && ctx.Err() == nil {
		pace := "half the measured peak"
		if o.loadRate > 0 {
			pace = "-load-rate"
		}
		add(underLoad(ctx, t, LanePositional, peak/2, pace, o.loadFor, o.diag))
	}
	if has("sweep") {
		for _, sn := range sweep {
			if ctx.Err() != nil {
				break
			}
			if sn == n && (has("roundtrip") || (has("load") && o.loadRate <= 0)) {
				continue // the round trip above is this point
			}
			r := roundTripAs(ctx, t, LanePositional, sn, o.clients, fmt.Sprintf("sweep%d", sn))
			r.Scenario = sweepScenario
			add(r)
		}
	}
}

// runPeers runs every selected peer through runSystem, one after the other.
func runPeers(ctx context.Context, o *options, tag string, add func(...Result)) {
	for _, p := range o.peers {
		if ctx.Err() != nil {
			return
		}
		if isBusPeer(p) {
			continue // the event bus's peers run with the bus scenarios (runRiver)
		}
		progress("Peer %s", p)
		s, err := openPeer(ctx, p, o, tag+"_"+strings.ReplaceAll(p, "-", "_"))
		if err != nil {
			add(Result{Scenario: "open", System: p, Error: err.Error()})
			continue
		}
		runSystem(ctx, s, o, o.peerN, o.peerSamples, o.peerSweepN, func(rs ...Result) {
			for i := range rs {
				rs[i].Peer = p
			}
			add(rs...)
		})
		if err := s.Close(); err != nil {
			progress("  close %s: %v", p, err)
		}
	}
}

// Ratio is Herald's figure divided by a peer's (for a latency: the peer's
// divided by Herald's, so that above 1 always means Herald is better).
type Ratio struct {
	Figure            string  `json:"figure"`
	Herald            string  `json:"herald"`
	Peer              string  `json:"peer"`
	HeraldN           int     `json:"herald_n"`
	PeerN             int     `json:"peer_n"`
	HeraldValue       float64 `json:"herald_value"`
	PeerValue         float64 `json:"peer_value"`
	Unit              string  `json:"unit"`
	Ratio             float64 `json:"ratio"`
	HeraldDurability  string  `json:"herald_durability"`
	PeerDurability    string  `json:"peer_durability"`
	SameN             bool    `json:"same_n"`
	HeraldBetterAbove string  `json:"meaning"`
}

// ratios pairs each peer's rows with its Herald system's rows of the same
// run: round-trip rate, isolated p50 and p99, and the round-trip rate at equal
// N where the sweep has the same N on both sides.
func ratios(rs []Result) []Ratio {
	find := func(system, scenario string, n int) *Result {
		for i := range rs {
			r := &rs[i]
			if r.System == system && r.Scenario == scenario && r.Error == "" && !r.Unsupported && (n == 0 || r.N == n) {
				return r
			}
		}
		return nil
	}
	var out []Ratio
	seen := map[string]bool{}
	for _, pr := range rs {
		if pr.Peer == "" || seen[pr.Peer] {
			continue
		}
		seen[pr.Peer] = true
		peerName, heraldName := pr.System, heraldPeer[pr.Peer]
		rate := func(figure string, h, p *Result, same bool) {
			if h == nil || p == nil || p.Rate == 0 {
				return
			}
			out = append(out, Ratio{Figure: figure, Herald: heraldName, Peer: peerName, HeraldN: h.N, PeerN: p.N,
				HeraldValue: h.Rate, PeerValue: p.Rate, Unit: h.RateUnit, Ratio: h.Rate / p.Rate,
				HeraldDurability: h.Durability, PeerDurability: p.Durability, SameN: same,
				HeraldBetterAbove: "herald/peer throughput; > 1: Herald faster"})
		}
		lat := func(figure string, h, p *Result, get func(*Result) float64) {
			if h == nil || p == nil || get(h) == 0 {
				return
			}
			out = append(out, Ratio{Figure: figure, Herald: heraldName, Peer: peerName, HeraldN: h.N, PeerN: p.N,
				HeraldValue: get(h), PeerValue: get(p), Unit: "ms", Ratio: get(p) / get(h),
				HeraldDurability: h.Durability, PeerDurability: p.Durability, SameN: h.N == p.N,
				HeraldBetterAbove: "peer/herald latency; > 1: Herald faster"})
		}
		rt := "round trip (positional)"
		rate("round trip", find(heraldName, rt, 0), find(peerName, rt, 0), false)
		// Equal N: the largest N both sides measured (round trip or sweep).
		best := 0
		var hb, pb *Result
		for _, p := range rs {
			if p.System != peerName || (p.Scenario != rt && p.Scenario != sweepScenario) || p.Error != "" || p.N <= best {
				continue
			}
			h := find(heraldName, rt, p.N)
			if h == nil {
				h = find(heraldName, sweepScenario, p.N)
			}
			if h != nil {
				best, hb, pb = p.N, h, &p
			}
		}
		rate("round trip at equal N", hb, pb, true)
		iso := "isolated latency (positional)"
		lat("isolated p50", find(heraldName, iso, 0), find(peerName, iso, 0), func(r *Result) float64 { return r.P50 })
		lat("isolated p99", find(heraldName, iso, 0), find(peerName, iso, 0), func(r *Result) float64 { return r.P99 })
		ld := "latency under load (positional)"
		lat("p99 at half of peak", find(heraldName, ld, 0), find(peerName, ld, 0), func(r *Result) float64 { return r.P99 })
		// The event bus against a job queue (River): publish → Go handler
		// done, against insert → job completed.
		bh, bp := find(heraldName, busScenarioHandler, 0), find(peerName, busScenarioHandler, 0)
		rate("bus → handler", bh, bp, bh != nil && bp != nil && bh.N == bp.N)
		bi := busScenarioHandler + " (isolated)"
		lat("bus isolated p50", find(heraldName, bi, 0), find(peerName, bi, 0), func(r *Result) float64 { return r.P50 })
	}
	return out
}

// printRatios prints the ratio lines after the table.
func printRatios(w io.Writer, rs []Ratio) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Herald against the peers (same run; > 1× means Herald is better):")
	for _, r := range rs {
		ns := fmt.Sprintf("N %s / %s", count(r.HeraldN), count(r.PeerN))
		what := "herald/peer"
		if r.Unit == "ms" {
			what = "peer/herald"
		}
		fmt.Fprintf(w, "  %-22s %s / %s = %s× (%s %s: %s vs %s; %s)\n", r.Figure+":", r.Herald, r.Peer, ratioStr(r.Ratio),
			what, r.Unit, num(r.HeraldValue), num(r.PeerValue), ns)
	}
	fmt.Fprintln(w, "  durability:")
	seen := map[string]bool{}
	for _, r := range rs {
		for _, x := range [][2]string{{r.Herald, r.HeraldDurability}, {r.Peer, r.PeerDurability}} {
			if !seen[x[0]] {
				seen[x[0]] = true
				fmt.Fprintf(w, "    %s: %s\n", x[0], x[1])
			}
		}
	}
}

// count formats a number of instances or samples: 300, 1,000.
func count(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return num(float64(n))
}

func ratioStr(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// parseInts parses a comma-separated list of sizes ("100,1000,10k").
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		mult := 1
		if strings.HasSuffix(f, "k") {
			f, mult = strings.TrimSuffix(f, "k"), 1000
		}
		var v int
		if _, err := fmt.Sscanf(f, "%d", &v); err != nil || v <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}
