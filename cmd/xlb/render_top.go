package main

// xlb top's frame (top.go runs the terminal); golden file
// testdata/render/top.golden, with the other renderers' in render_test.go.

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xlbnet/xlb/pkg/control"
)

// topView is how xlb top shows the status: sort key and order, refresh
// interval, the last error (the daemon did not answer).
type topView struct {
	Sort     string // pkts, bytes, conns, active, name
	Reverse  bool   // ascending instead of descending (name: descending)
	Interval time.Duration
	Err      string
}

// topSortKeys are xlb top's sort keys and the key that selects each.
var topSortKeys = []struct {
	key  byte
	name string
	what string
}{{'p', "pkts", "pkts/s"}, {'b', "bytes", "bytes/s"}, {'c', "conns", "new conns/s"}, {'a', "active", "active"}, {'n', "name", "name"}}

// topRow is one line of xlb top's table.
type topRow struct {
	name, state, weight string
	pps, bps, cps       float64
	active, inactive    int
	packets, conns      int64
}

func topSortValue(r *topRow, key string) float64 {
	switch key {
	case "bytes":
		return r.bps
	case "conns":
		return r.cps
	case "active":
		return float64(r.active)
	}
	return r.pps
}

// sortTopRows orders rows by v's key: largest first (names A to Z), or the
// other way round with v.Reverse.
func sortTopRows(rows []topRow, v topView) {
	slices.SortStableFunc(rows, func(a, b topRow) int {
		var c int
		if v.Sort == "name" {
			c = strings.Compare(a.name, b.name)
		} else {
			c = -cmp.Compare(topSortValue(&a, v.Sort), topSortValue(&b, v.Sort))
		}
		if v.Reverse {
			c = -c
		}
		return c
	})
}

// printTop prints one frame of xlb top: the appliance's rates, queues and
// drops, then every rule and its backends with their rates, connections,
// health, weight and tier, sorted as v says. width and height (0: no
// limit) cut the frame to the terminal; the key help stays on the last
// line.
func printTop(w io.Writer, st *control.Status, v topView, now time.Time, width, height int) {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	add("xlb top  %s  version %s  up %s  %s", st.Config, st.Version, uptime(st.UptimeSeconds), now.Format(time.DateTime))
	var txps, dps float64
	var qs []string
	for _, q := range st.QueueStats {
		txps += q.TXPerSec
		dps += q.DropsPerSec
		s := fmt.Sprintf("q%d %s/s", q.Queue, countName(q.RXPerSec))
		if q.DropsPerSec > 0 {
			s += fmt.Sprintf(" (drops %s/s)", countName(q.DropsPerSec))
		}
		qs = append(qs, s)
	}
	add("rx %s/s  tx %s/s  drops %s/s  conntrack %d entries  (rates over the last %s, refresh %s)",
		countName(st.Counters.RXPerSec), countName(txps), countName(dps), st.Conntrack, windowName(st.Rates), v.Interval)
	add("queues: %s", strings.Join(qs, "  "))
	var ds []string
	for _, k := range slices.Sorted(maps.Keys(st.Counters.Drops)) {
		ds = append(ds, fmt.Sprintf("%s %d", k, st.Counters.Drops[k]))
	}
	if len(ds) == 0 {
		ds = []string{"none"}
	}
	add("drops: %s", strings.Join(ds, ", "))
	if v.Err != "" {
		add("error: %s", v.Err)
	}
	add("")
	table := [][]string{{"RULE / BACKEND", "TIER / HEALTH", "WEIGHT", "PKTS/S", "BYTES/S", "NEW/S", "ACTIVE", "INACTIVE", "PACKETS", "CONNS"}}
	var rules []topRow
	backends := map[string][]topRow{}
	for _, r := range st.Rules {
		name := fmt.Sprintf("%s %s %s:%s", r.Name, r.Protocol, r.VIP, r.Ports)
		if r.Service != "" {
			name = fmt.Sprintf("%s (service %s) %s %s:%s", r.Name, r.Service, r.Protocol, r.VIP, r.Ports)
		}
		rules = append(rules, topRow{name: name, state: r.Tier, pps: r.PacketsPerSec, bps: r.BytesPerSec, cps: r.NewConnectionsPerSec,
			active: r.ActiveConnections, inactive: r.InactiveConnections, packets: r.Packets, conns: r.NewConnections})
		for _, be := range r.Backends {
			weight := strconv.Itoa(int(be.WeightEffective))
			if !be.Eligible {
				weight = "-"
			}
			state := be.Health
			if be.HealthSince != nil && now.After(*be.HealthSince) {
				state += " " + now.Sub(*be.HealthSince).Round(time.Second).String() // since the last change
			}
			backends[name] = append(backends[name], topRow{name: "  " + be.Address, state: state, weight: weight,
				pps: be.PacketsPerSec, bps: be.BytesPerSec, cps: be.NewConnectionsPerSec, active: be.ActiveConnections,
				inactive: be.InactiveConnections, packets: be.Packets, conns: be.NewConnections})
		}
	}
	conns := func(n int) string {
		if n < 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	cells := func(r topRow) []string {
		if r.packets < 0 { // the workers do not count this backend
			return []string{r.name, r.state, r.weight, "-", "-", "-", conns(r.active), conns(r.inactive), "-", "-"}
		}
		return []string{r.name, r.state, r.weight, countName(r.pps), bytesName(r.bps), fmt.Sprintf("%.1f", r.cps),
			conns(r.active), conns(r.inactive), strconv.FormatInt(r.packets, 10), strconv.FormatInt(r.conns, 10)}
	}
	sortTopRows(rules, v)
	for _, r := range rules {
		table = append(table, cells(r))
		bs := backends[r.name]
		sortTopRows(bs, v)
		for _, be := range bs {
			table = append(table, cells(be))
		}
	}
	lines = append(lines, alignTable(table, 2)...)
	order := "↓"
	if v.Reverse != (v.Sort == "name") {
		order = "↑"
	}
	var keys []string
	for _, k := range topSortKeys {
		keys = append(keys, fmt.Sprintf("%c %s", k.key, k.what))
		if k.name == v.Sort {
			keys[len(keys)-1] += " " + order
		}
	}
	footer := "q quit  sort: " + strings.Join(keys, ", ") + "  r reverse"
	if height > 0 && len(lines) > height-1 {
		lines = lines[:max(height-1, 0)]
	}
	lines = append(lines, footer)
	for _, l := range lines {
		if width > 0 {
			l = cutRunes(l, width)
		}
		fmt.Fprintln(w, l)
	}
}

// alignTable lays out rows in columns: the first two (names, states)
// aligned left, the others right, gap spaces apart.
func alignTable(rows [][]string, left int) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < left {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// cutRunes cuts s to at most n runes.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// countName is a rate or count with an SI prefix: "950", "12.3k", "4.1M".
func countName(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
