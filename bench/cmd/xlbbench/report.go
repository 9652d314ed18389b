package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// medians reduces the rounds: for each (scenario, queues, target) in
// first-seen order, the round whose forwarded rate is the median (the
// lower middle of an even count).
func medians(raw []Point) []Point {
	type key struct {
		s string
		q int
		t float64
	}
	var order []key
	groups := map[key][]Point{}
	for _, p := range raw {
		k := key{p.Scenario, p.Queues, p.TargetPPS}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	var out []Point
	for _, k := range order {
		g := groups[k]
		sort.Slice(g, func(i, j int) bool { return g[i].ForwardedPPS < g[j].ForwardedPPS })
		out = append(out, g[(len(g)-1)/2])
	}
	return out
}

// saturation returns the point of scenario at queues with the highest
// offered load (the as-fast-as-possible one when measured).
func saturation(pts []Point, scenario string, queues int) (Point, bool) {
	var best Point
	found := false
	for _, p := range pts {
		if p.Scenario != scenario || p.Queues != queues {
			continue
		}
		if !found || p.TargetPPS == 0 || (best.TargetPPS != 0 && p.TargetPPS > best.TargetPPS) {
			best, found = p, true
		}
	}
	return best, found
}

// summarize picks the queue count at which xlb forwarded most and reports
// every forwarder at saturation there.
func summarize(pts []Point, queues []int) Summary {
	var s Summary
	bestQ, bestPPS := 0, -1.0
	for _, q := range queues {
		if p, ok := saturation(pts, "xlb", q); ok && p.ForwardedPPS > bestPPS {
			bestQ, bestPPS = q, p.ForwardedPPS
		}
	}
	s.Queues = bestQ
	x, _ := saturation(pts, "xlb", bestQ)
	r, _ := saturation(pts, "reflector", bestQ)
	n, _ := saturation(pts, "nft", bestQ)
	s.XLBMpps, s.ReflectorMpps, s.NftMpps = round(x.ForwardedPPS/1e6, 4), round(r.ForwardedPPS/1e6, 4), round(n.ForwardedPPS/1e6, 4)
	if r.ForwardedPPS > 0 {
		s.XLBVsReflector = round(x.ForwardedPPS/r.ForwardedPPS, 3)
	}
	if n.ForwardedPPS > 0 {
		s.XLBVsNft = round(x.ForwardedPPS/n.ForwardedPPS, 3)
	}
	s.XLBCPUNsPerPkt, s.NftCPUNsPerPkt, s.ReflectorCPUNsPkt = round(x.CPUNsPerPkt, 0), round(n.CPUNsPerPkt, 0), round(r.CPUNsPerPkt, 0)
	x1, _ := saturation(pts, "xlb", 1)
	r1, _ := saturation(pts, "reflector", 1)
	s.XLBProcNsPerPkt, s.ReflectorProcNsPerPkt = round(x1.ProcNsPerPkt, 0), round(r1.ProcNsPerPkt, 0)
	s.XLBVsReflector1Q = ratio(x1.ForwardedPPS, r1.ForwardedPPS)
	if b1, ok := saturation(pts, "xlb-base", 1); ok {
		s.BaseProcNsPerPkt = round(b1.ProcNsPerPkt, 0)
		s.BaseVsReflector1Q = ratio(b1.ForwardedPPS, r1.ForwardedPPS)
		s.XLBVsBase1Q = ratio(x1.ForwardedPPS, b1.ForwardedPPS)
		s.XLBProcVsBaseProc1Q = ratio(x1.ProcNsPerPkt, b1.ProcNsPerPkt)
	}
	return s
}

// ratio is a/b to three digits, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func printTable(w io.Writer, pts []Point) {
	fmt.Fprintf(w, "%-13s %-11s %6s %12s %12s %14s %7s %9s %12s %12s %12s\n", "scenario", "mix", "queues", "target pps", "offered pps", "forwarded pps", "loss", "cpu busy", "cpu ns/pkt", "-background", "proc ns/pkt")
	for _, p := range pts {
		target := fmt.Sprintf("%.0f", p.TargetPPS)
		if p.TargetPPS == 0 {
			target = "max"
		}
		fmt.Fprintf(w, "%-13s %-11s %6d %12s %12.0f %14.0f %6.1f%% %9.2f %12.0f %12.0f %12.0f\n", p.Scenario, p.Mix, p.Queues, target, p.OfferedPPS, p.ForwardedPPS, 100*p.Loss, p.CPUBusy, p.CPUNsPerPkt, p.CPUNsPerPktBg, p.ProcNsPerPkt)
	}
}

// writeResults writes <out>/<date>.json and the two plots beside it.
func writeResults(out string, res *Results) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(out, strings.ReplaceAll(res.Date, ":", ""))
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := plotPoints(base+"-throughput.png", "Forwarded vs offered load ("+res.Date+")", "offered (kpps)", "forwarded at the sinks (kpps)", res.Points,
		func(p Point) float64 { return p.ForwardedPPS / 1e3 }); err != nil {
		return fmt.Errorf("plot throughput: %w", err)
	}
	if err := plotPoints(base+"-cpu.png", "CPU per forwarded packet, whole machine ("+res.Date+")", "offered (kpps)", "CPU ns per forwarded packet", res.Points,
		func(p Point) float64 { return p.CPUNsPerPkt }); err != nil {
		return fmt.Errorf("plot cpu: %w", err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s.json, %s-throughput.png, %s-cpu.png\n", base, base, base)
	return nil
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 255}, {0xd6, 0x27, 0x28, 255}, {0x2c, 0xa0, 0x2c, 255}, {0xff, 0x7f, 0x0e, 255},
	{0x94, 0x67, 0xbd, 255}, {0x8c, 0x56, 0x4b, 255}, {0xe3, 0x77, 0xc2, 255}, {0x7f, 0x7f, 0x7f, 255},
}

// plotPoints draws one line per (scenario, queues): y(p) against the
// offered load actually achieved.
func plotPoints(path, title, xl, yl string, pts []Point, y func(Point) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.Legend.Top = true
	p.Legend.Left = true
	var keys []string
	series := map[string]plotter.XYs{}
	for _, pt := range pts {
		k := fmt.Sprintf("%s, %dq", pt.Scenario, pt.Queues)
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], plotter.XY{X: pt.OfferedPPS / 1e3, Y: y(pt)})
	}
	for i, k := range keys {
		l, s, err := plotter.NewLinePoints(series[k])
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		l.Color, s.Color = c, c
		if strings.HasSuffix(k, "2q") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		p.Legend.Add(k, l, s)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
