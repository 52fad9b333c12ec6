// Command heraldplot draws the round trip of a heraldbench JSON file as one
// PNG with two panels: throughput (instances resumed per second) against N,
// and latency (send → resumed; p50 solid, p99 dashed) against N, one line per
// system, both on log scales.
//
//	go run ./cmd/heraldbench -json results/run.json      # includes the sweep scenario
//	go run ./cmd/heraldplot -o results/roundtrip.png results/run.json
//
// It uses the rows "round trip (positional)" and "sweep round trip
// (positional)" without an error; a system with one size only is drawn as a
// point.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// row is the part of a heraldbench result the plot reads.
type row struct {
	Scenario   string  `json:"scenario"`
	System     string  `json:"system"`
	Durability string  `json:"durability"`
	N          int     `json:"n"`
	Rate       float64 `json:"rate"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Error      string  `json:"error"`
	Peer       string  `json:"peer"`
}

type input struct {
	Date    time.Time `json:"date"`
	CPUs    int       `json:"cpus"`
	LoadAvg string    `json:"load_average_before"`
	Results []row     `json:"results"`
}

// series is one system's round trips by N.
type series struct {
	system string
	peer   bool
	rows   []row
}

func main() {
	out := flag.String("o", "roundtrip.png", "PNG file to write")
	width := flag.Float64("width", 13, "width in inches")
	height := flag.Float64("height", 5.5, "height in inches")
	dpi := flag.Int("dpi", 110, "dots per inch")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: heraldplot [-o out.png] results.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, *width, *height, *dpi); err != nil {
		fmt.Fprintln(os.Stderr, "heraldplot:", err)
		os.Exit(1)
	}
}

func run(in, out string, w, h float64, dpi int) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var data input
	if err := json.Unmarshal(b, &data); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	ss := collect(data.Results)
	if len(ss) == 0 {
		return fmt.Errorf("%s has no round-trip rows (run heraldbench with the roundtrip or sweep scenario)", in)
	}

	thr := plot.New()
	thr.Title.Text = fmt.Sprintf("Round trip: throughput vs N\n%s, %d CPUs, load average before %s",
		data.Date.Format("2006-01-02 15:04 UTC"), data.CPUs, data.LoadAvg)
	thr.X.Label.Text = "N (instances parked, then each sent one event)"
	thr.Y.Label.Text = "instances resumed per second (log)"
	lat := plot.New()
	lat.Title.Text = "Round trip: latency send → resumed vs N\np50 solid, p99 dashed"
	lat.X.Label.Text = "N"
	lat.Y.Label.Text = "latency, ms (log)"
	var ns []float64
	for _, s := range ss {
		for _, r := range s.rows {
			ns = append(ns, float64(r.N))
		}
	}
	for _, p := range []*plot.Plot{thr, lat} {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, ticks{at: ns}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks{}
		p.Add(plotter.NewGrid())
	}

	nh := 0
	for _, s := range ss {
		if !s.peer {
			nh++
		}
	}
	for i, s := range ss {
		c := heraldColors[i%len(heraldColors)]
		width := vg.Points(2.2)
		var shape draw.GlyphDrawer = draw.CircleGlyph{}
		if s.peer {
			c = peerColors[(i-nh)%len(peerColors)]
			width = vg.Points(1.4)
			shape = draw.TriangleGlyph{}
		}
		var rate, p50, p99 plotter.XYs
		for _, r := range s.rows {
			rate = append(rate, plotter.XY{X: float64(r.N), Y: r.Rate})
			if r.P50 > 0 {
				p50 = append(p50, plotter.XY{X: float64(r.N), Y: r.P50})
			}
			if r.P99 > 0 {
				p99 = append(p99, plotter.XY{X: float64(r.N), Y: r.P99})
			}
		}
		l, pts, err := line(rate, c, width, shape, nil)
		if err != nil {
			return err
		}
		thr.Add(l, pts)
		thr.Legend.Add(s.system, l, pts)
		if len(p50) > 0 {
			l, pts, err := line(p50, c, width, shape, nil)
			if err != nil {
				return err
			}
			lat.Add(l, pts)
			lat.Legend.Add(s.system, l, pts)
		}
		if len(p99) > 0 {
			l, pts, err := line(p99, c, width, shape, []vg.Length{vg.Points(5), vg.Points(3)})
			if err != nil {
				return err
			}
			lat.Add(l, pts)
		}
	}

	// Room above the data for the legend (top left): the log axes get the
	// headroom the legend's rows need.
	plotH := float64(h)*72 - 110 // points, less titles and axes
	for _, p := range []*plot.Plot{thr, lat} {
		f := min((float64(len(ss))*16+12)/plotH, 0.6)
		lo, hi := p.Y.Min, p.Y.Max
		if lo <= 0 || hi <= lo {
			continue
		}
		lo /= 1.25
		decades := math.Log10(hi / lo)
		p.Y.Min, p.Y.Max = lo, hi*math.Pow(10, decades*f/(1-f))
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(6)
	}

	img := vgimg.NewWith(vgimg.UseWH(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 3, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8,
		PadLeft: vg.Inch / 8, PadRight: vg.Inch / 4}
	canvases := plot.Align([][]*plot.Plot{{thr, lat}}, tiles, dc)
	thr.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "heraldplot: %s: %d systems\n", out, len(ss))
	return nil
}

// collect groups the round-trip rows by system, sorted by N (one row per N:
// the first), Herald's systems first.
func collect(rs []row) []series {
	by := map[string]*series{}
	var order []string
	for _, r := range rs {
		if r.Error != "" || r.Rate <= 0 || r.N <= 0 ||
			(r.Scenario != "round trip (positional)" && r.Scenario != "sweep round trip (positional)") {
			continue
		}
		s := by[r.System]
		if s == nil {
			s = &series{system: r.System, peer: r.Peer != "" || !strings.HasPrefix(r.System, "herald")}
			by[r.System] = s
			order = append(order, r.System)
		}
		if !slices.ContainsFunc(s.rows, func(x row) bool { return x.N == r.N }) {
			s.rows = append(s.rows, r)
		}
	}
	var out []series
	for _, name := range order {
		s := by[name]
		sort.Slice(s.rows, func(i, j int) bool { return s.rows[i].N < s.rows[j].N })
		out = append(out, *s)
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].peer && out[j].peer })
	return out
}

// Herald's systems are drawn in blues and greens, thick with circles; the
// peers in warm colours, thin with triangles.
var heraldColors = []color.Color{
	color.RGBA{0x1f, 0x4e, 0xb4, 0xff}, // blue
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, // green
	color.RGBA{0x17, 0xbe, 0xcf, 0xff}, // cyan
	color.RGBA{0x0b, 0x2a, 0x5c, 0xff}, // navy
}

var peerColors = []color.Color{
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, // red
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, // orange
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, // purple
	color.RGBA{0x8c, 0x56, 0x4b, 0xff}, // brown
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, // pink
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, // grey
}

// ticks are log ticks labelled 1, 10, 100, 1,000 … and, on the N axis, at
// every N measured.
type ticks struct{ at []float64 }

func (t ticks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, tk := range (plot.LogTicks{Prec: -1}).Ticks(lo, hi) {
		if slices.ContainsFunc(out, func(x plot.Tick) bool { return near(x.Value, tk.Value) }) {
			continue // LogTicks gives a power of ten twice: labelled, and as a minor tick
		}
		if tk.Label != "" {
			tk.Label = label(tk.Value)
		}
		if slices.ContainsFunc(t.at, func(v float64) bool { return near(v, tk.Value) }) {
			tk.Label = label(tk.Value)
		}
		out = append(out, tk)
	}
	for _, v := range t.at {
		if v >= lo && v <= hi && !slices.ContainsFunc(out, func(x plot.Tick) bool { return near(x.Value, v) }) {
			out = append(out, plot.Tick{Value: v, Label: label(v)})
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// label writes 0.5, 10, 1,000, 100,000.
func label(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func line(xys plotter.XYs, c color.Color, w vg.Length, shape draw.GlyphDrawer, dashes []vg.Length) (*plotter.Line, *plotter.Scatter, error) {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, err
	}
	l.Color, l.Width, l.Dashes = c, w, dashes
	pts.Color, pts.Shape, pts.Radius = c, shape, vg.Points(3)
	return l, pts, nil
}
