package main

// Renderers: the control API's answers (and simulate's) as text for a
// person. They only print what they are given; the commands in ctl.go and
// simulate.go fetch it. Each is covered by a golden file under
// testdata/render (render_test.go; go test -run TestRender -update
// rewrites them). Times are printed in now's location, and "left"
// durations are measured from now, so a golden file does not depend on
// the clock or the zone of the machine.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/control"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printStatus prints `xlb status`.
func printStatus(w io.Writer, st *control.Status, now time.Time) {
	printStatusHead(w, st, now)
	for _, r := range st.Rules {
		fmt.Fprintln(w)
		printRuleStatus(w, &r, st.Rates, now)
	}
	printPageHint(w, st, len(st.Rules))
	printStatusTail(w, st, now)
}

// printPageHint says which of the selected rules a page of n shows, when
// it does not show them all.
func printPageHint(w io.Writer, st *control.Status, n int) {
	if n >= st.RulesSelected && st.RulesOffset == 0 {
		return
	}
	fmt.Fprintln(w)
	if n == 0 {
		fmt.Fprintf(w, "no rule from %d of %d selected\n", st.RulesOffset+1, st.RulesSelected)
		return
	}
	fmt.Fprintf(w, "rules %d-%d of %d selected", st.RulesOffset+1, st.RulesOffset+n, st.RulesSelected)
	if next := st.RulesOffset + n; next < st.RulesSelected {
		fmt.Fprintf(w, " (--offset %d for the next)", next)
	}
	fmt.Fprintln(w)
}

// printBackendSummary is backend list beyond summaryAbove rules: the
// backends counted over every rule and the rules that need attention.
func printBackendSummary(w io.Writer, st *control.Status) {
	sum := st.Summary
	if sum == nil {
		return
	}
	fmt.Fprintf(w, "backends of %d rules: %d (%s), %d drained or removed, %d eligible\n", sum.Rules, sum.Backends, countsLine(sum.Health), sum.Drained, sum.Eligible)
	printAttention(w, st)
	fmt.Fprintln(w, "\nbackends per rule: xlb backend list --rule NAME | --vip ADDR | --backend ADDR | --all [--limit N --offset N]")
}

// printStatusSummary is status without the rule tables: the appliance,
// the counts over every rule and the rules that need attention.
func printStatusSummary(w io.Writer, st *control.Status, now time.Time) {
	printStatusHead(w, st, now)
	if sum := st.Summary; sum != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "rules: %d (%s)", sum.Rules, countsLine(sum.Tiers))
		if sum.Cold > 0 {
			fmt.Fprintf(w, ", %d with the first health checks under way", sum.Cold)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "backends of rules: %d (%s), %d drained or removed, %d eligible\n", sum.Backends, countsLine(sum.Health), sum.Drained, sum.Eligible)
		printAttention(w, st)
		fmt.Fprintln(w, "\nper rule and backend: xlb status --rule NAME | --vip ADDR | --backend ADDR | --all [--limit N --offset N]")
	}
	printStatusTail(w, st, now)
}

// printAttention lists the summary's rules that need attention.
func printAttention(w io.Writer, st *control.Status) {
	sum := st.Summary
	if sum.AttentionTotal == 0 {
		fmt.Fprintln(w, "every rule serves from its PRIMARY tier with every backend healthy")
		return
	}
	n := len(sum.Attention)
	if n == 0 {
		fmt.Fprintf(w, "%d rules need attention; none from %d\n", sum.AttentionTotal, st.RulesOffset+1)
		return
	}
	fmt.Fprintf(w, "\nrules that need attention (%d-%d of %d):\n", st.RulesOffset+1, st.RulesOffset+n, sum.AttentionTotal)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tVIP\tTIER\tBACKENDS\tELIGIBLE\tNOT HEALTHY\tREASON")
	for _, r := range sum.Attention {
		reason := r.Reason
		if !r.Warm {
			reason = "first health checks under way; " + reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Name, r.VIP, r.Tier, r.Backends, r.Eligible, r.Unhealthy, reason)
	}
	tw.Flush()
	if next := st.RulesOffset + n; next < sum.AttentionTotal {
		fmt.Fprintf(w, "(--offset %d for the next)\n", next)
	}
}

// countsLine is "A 3, B 1": a count per name, largest first.
func countsLine(m map[string]int) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s %d", n, m[n]))
	}
	return strings.Join(out, ", ")
}

// printStatusHead is status's appliance part: configuration, build,
// packets, queues, arenas, warnings, drops and the appliance's BGP.
func printStatusHead(w io.Writer, st *control.Status, now time.Time) {
	mode := st.XDPMode + " XDP, copy mode"
	if st.ZeroCopy {
		mode = st.XDPMode + " XDP, zero-copy"
	}
	fmt.Fprintf(w, "xlb: %s, published %s, %s, queues %s\n", st.Config, st.Loaded.In(now.Location()).Format(time.DateTime), mode, joinInts(st.Queues))
	if st.Version != "" {
		fmt.Fprintf(w, "version %s, up %s (since %s)\n", st.Version, uptime(st.UptimeSeconds), st.Started.In(now.Location()).Format(time.DateTime))
	}
	rate := "-"
	if st.Rates.Seconds > 0 {
		rate = fmt.Sprintf("%.0f/s over the last %s", st.Counters.RXPerSec, windowName(st.Rates))
	} else if st.Rates.WindowSeconds > 0 {
		rate = fmt.Sprintf("rates after the first %s window", windowName(st.Rates))
	}
	fmt.Fprintf(w, "packets: rx %d (%s), tx %d, placed by a tracked entry %d, kernel rx drops %d; conntrack %d entries\n",
		st.Counters.RX, rate, st.Counters.TX, st.Counters.Tracked, st.Counters.KernelRXD, st.Conntrack)
	if len(st.QueueStats) > 0 {
		var qs []string
		for _, q := range st.QueueStats {
			s := fmt.Sprintf("%d rx %d", q.Queue, q.RXPackets)
			if st.Rates.Seconds > 0 {
				s += fmt.Sprintf(" (%.0f/s)", q.RXPerSec)
			}
			s += fmt.Sprintf(" tx %d drops %d", q.TXPackets, q.Drops)
			if x := q.XSK; x.RXDropped+x.RXRingFull+x.RXInvalidDescs+x.TXInvalidDescs > 0 {
				s += fmt.Sprintf(" (socket: rx dropped %d, rx ring full %d, invalid rx/tx descriptors %d/%d)", x.RXDropped, x.RXRingFull, x.RXInvalidDescs, x.TXInvalidDescs)
			}
			qs = append(qs, s)
		}
		fmt.Fprintf(w, "queues: %s\n", strings.Join(qs, ", "))
	}
	if len(st.Arenas) > 0 {
		fmt.Fprintln(w, arenaLine(st.Arenas, st.ShmemTHP))
	}
	for _, warning := range st.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	for _, c := range []struct {
		what string
		m    map[string]uint64
	}{{"dropped", st.Counters.Drops}, {"passed (not ours)", st.Counters.Passes}} {
		if len(c.m) > 0 {
			var ds []string
			for _, k := range slices.Sorted(maps.Keys(c.m)) {
				ds = append(ds, fmt.Sprintf("%s %d", k, c.m[k]))
			}
			fmt.Fprintf(w, "%s: %s\n", c.what, strings.Join(ds, ", "))
		}
	}
	printAppliance(w, &st.Appliance, now) // appliance.go
}

// printRuleStatus is one rule's part of status: its line, tier, digest,
// traffic and backend table.
func printRuleStatus(w io.Writer, r *control.Rule, rates control.RateInterval, now time.Time) {
	name := r.Name
	if r.Service != "" {
		name += " (backend service " + r.Service + ")"
	}
	fmt.Fprintf(w, "%s %s %s  rule %s  %s  affinity %s  %s  encap %s\n", r.Protocol, r.VIP, r.Ports, name, r.Policy, r.Affinity, r.Tracking, r.Encap)
	fmt.Fprintf(w, "  tier %s: %d eligible — %s\n", r.Tier, r.Eligible, r.Reason)
	if r.TableDigest != "" {
		pending := ""
		if !r.FirstChecksDone {
			pending = " (first round of health checks not finished)"
		}
		fmt.Fprintf(w, "  table digest %s%s\n", r.TableDigest, pending)
	}
	if r.Packets > 0 || r.NewConnections > 0 {
		fmt.Fprintf(w, "  sent %d packets (%.0f/s), %s (%s/s), %d new connections (%.1f/s)", r.Packets, r.PacketsPerSec, bytesName(float64(r.Bytes)), bytesName(r.BytesPerSec), r.NewConnections, r.NewConnectionsPerSec)
		if r.ActiveConnections >= 0 && r.SessionActiveSeconds > 0 {
			// Shared-table sessions see no FIN or RST: active by their last packet.
			fmt.Fprintf(w, "; sessions %d active (a packet in the last %s), %d inactive", r.ActiveConnections, secondsName(r.SessionActiveSeconds), r.InactiveConnections)
		} else if r.ActiveConnections >= 0 {
			fmt.Fprintf(w, "; %d active, %d inactive", r.ActiveConnections, r.InactiveConnections)
		}
		fmt.Fprintln(w)
	}
	printBackendTable(w, r.Backends, nil, rates, now)
}

// printStatusTail is status's end: recent events and stale overrides.
func printStatusTail(w io.Writer, st *control.Status, now time.Time) {
	if len(st.Events) > 0 {
		fmt.Fprintln(w, "\nrecent events:")
		for _, e := range st.Events {
			what := e.Kind
			switch {
			case e.From != "":
				what = fmt.Sprintf("%s %s → %s", e.Kind, e.From, e.To)
			case e.To != "":
				what = fmt.Sprintf("%s %s", e.Kind, e.To)
			}
			if e.Group != "" {
				what += " group " + e.Group
			}
			if e.Backend != "" {
				what += " " + e.Backend
			}
			if e.By != "" {
				what += " by " + e.By
			}
			rule := e.Rule
			switch {
			case e.Service != "" && len(e.Rules) > 0:
				// One probe decides for every rule of a backend service.
				rule = fmt.Sprintf("service %s (%s)", e.Service, strings.Join(e.Rules, ", "))
				what += " probed through " + e.Rule
			case len(e.Rules) > 0:
				// One probe decides for rules with equal direct checks.
				rule = "rules " + strings.Join(e.Rules, ", ")
				what += " probed through " + e.Rule
			case e.Service != "":
				rule = fmt.Sprintf("%s (service %s)", e.Rule, e.Service)
			case rule == "":
				rule = "-"
			}
			fmt.Fprintf(w, "  %s  %s  %s  %s\n", e.At.In(now.Location()).Format(time.DateTime), rule, what, e.Reason)
		}
	}
	if len(st.Stale) > 0 {
		fmt.Fprintln(w, "\nstate overrides not applied (xlb backend reset removes them):")
		for _, s := range st.Stale {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
}

// arenaLine is status's line on the conntrack arenas: their size, how
// much of it 2 MiB pages map, each table's share, and how to get huge
// pages when the kernel's setting gives none.
func arenaLine(as []control.ArenaStat, mode string) string {
	var size, huge int64
	var tables []string
	known := true
	for _, a := range as {
		size += a.Bytes
		huge += a.HugeBytes
		known = known && a.HugeBytes >= 0
		tables = append(tables, fmt.Sprintf("%s %.1f/%.1f", a.Table, float64(max(a.HugeBytes, 0))/(1<<20), float64(a.Bytes)/(1<<20)))
	}
	if !known {
		return fmt.Sprintf("conntrack arenas: %s, pages unknown (shmem_thp %s)", bytesName(float64(size)), mode)
	}
	line := fmt.Sprintf("conntrack arenas: %s, %s in huge pages (shmem_thp %s); MiB huge/all: %s", bytesName(float64(size)), bytesName(float64(huge)), mode, strings.Join(tables, ", "))
	if huge == 0 && !conntrack.ShmemTHPAdvised(mode) {
		line += fmt.Sprintf("; 4 KiB pages: echo advise > %s before xlb starts", conntrack.ShmemTHPPath)
	}
	return line
}

// secondsName is a count of seconds as a duration ("10s", "2.5s").
func secondsName(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// windowName is the rate estimator's window as the tables print it ("2s").
func windowName(r control.RateInterval) string {
	return (time.Duration(r.WindowSeconds * float64(time.Second))).Round(time.Millisecond).String()
}

// printBackendList prints `xlb backend list`: backends of any number of
// rules, with the rule's name and VIP (vips maps rule names to VIPs; a
// rule it lacks gets an empty VIP column). rates says the window of the
// packets/s column.
func printBackendList(w io.Writer, bs []control.Backend, vips map[string]string, rates control.RateInterval, now time.Time) {
	if vips == nil {
		vips = map[string]string{}
	}
	printBackendTable(w, bs, vips, rates, now)
}

// printBackendTable prints the ipvsadm-style backend table, with the RULE
// and VIP columns when vips is not nil.
func printBackendTable(w io.Writer, bs []control.Backend, vips map[string]string, rates control.RateInterval, now time.Time) {
	withRule := vips != nil
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "  -> BACKEND\tROLE\tADMIN\tHEALTH (FOR)\tCHECKED (PROBE)\tWEIGHT CFG\tEFF\tSHARE\tELIGIBLE\tCONNS (ACT/INACT)\tPKTS/S"
	if rates.WindowSeconds > 0 {
		head += " (" + windowName(rates) + ")"
	}
	if withRule {
		head = "RULE\tVIP\t" + strings.TrimPrefix(head, "  -> ")
	}
	fmt.Fprintln(tw, head)
	for _, b := range bs {
		cfgW := "-"
		if b.WeightConfigured >= 0 {
			cfgW = fmt.Sprintf("%d (%s)", b.WeightConfigured, b.WeightSource)
		}
		eligible := "no"
		if b.Eligible {
			eligible = "yes, " + b.Tier
		}
		conns := "-"
		if b.Connections >= 0 {
			conns = strconv.Itoa(b.Connections + b.SessionEntries)
			if b.ActiveConnections >= 0 && b.Connections+b.SessionEntries > 0 {
				conns += fmt.Sprintf(" (%d/%d)", b.ActiveConnections, b.InactiveConnections)
			}
		}
		pps := "-"
		if b.Packets >= 0 {
			pps = fmt.Sprintf("%.0f", b.PacketsPerSec)
		}
		admin := fmt.Sprintf("%s (%s)", b.Admin, b.AdminSource)
		if b.DrainUntil != nil && b.Admin != "IN_SERVICE" {
			if left := b.DrainUntil.Sub(now); left > 0 {
				admin += fmt.Sprintf(" %s left", left.Round(time.Second))
			}
		}
		health := b.Health
		if b.HealthSince != nil && now.After(*b.HealthSince) {
			health += " " + now.Sub(*b.HealthSince).Round(time.Second).String() // since the last change
		}
		if b.HealthDetail != "" || b.NextHop != "" {
			health += "*" // the detail follows the table
		}
		eff := strconv.Itoa(int(b.WeightEffective))
		if b.WeightState != "" && b.WeightState != "OK" {
			eff += " (" + b.WeightState + ")" // why a weighted backend gets no share
		}
		row := fmt.Sprintf("  -> %s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s",
			b.Address, b.Role, b.RoleSource, admin, health, checked(&b.CheckInfo, now), cfgW, eff, 100*b.Share, eligible, conns, pps)
		if withRule {
			row = b.Rule + "\t" + vips[b.Rule] + "\t" + strings.TrimPrefix(row, "  -> ")
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	for _, b := range bs {
		var why []string
		if b.HealthDetail != "" {
			why = append(why, b.HealthDetail)
		}
		if b.NextHop != "" {
			why = append(why, "next hop: "+b.NextHop)
		}
		if len(why) > 0 {
			who := "     * " + b.Address
			if withRule {
				who = "* " + b.Rule + " " + b.Address
			}
			fmt.Fprintf(w, "%s: %s\n", who, strings.Join(why, "; "))
		}
	}
}

// checked is the CHECKED (PROBE) column: how long ago the last health
// probe ended and how long it took ("4s ago (1.2ms)"), "-" before the
// first one (or without a check).
func checked(c *control.CheckInfo, now time.Time) string {
	if c.LastCheck == nil {
		return "-"
	}
	ago := max(now.Sub(*c.LastCheck), 0).Round(time.Second)
	probe := time.Duration(c.ProbeLatencySeconds * float64(time.Second))
	if probe >= time.Millisecond {
		probe = probe.Round(100 * time.Microsecond)
	} else {
		probe = probe.Round(time.Microsecond)
	}
	return fmt.Sprintf("%s ago (%s)", ago, probe)
}

// printBackendChange prints the answer to `xlb backend mark|drain|…`.
func printBackendChange(w io.Writer, res *control.BackendChangeResult, now time.Time) {
	fmt.Fprintln(w, res.Message)
	if res.Backend.Address != "" {
		printBackendTable(w, []control.Backend{res.Backend}, nil, control.RateInterval{}, now)
	}
}

// printReload prints an accepted reload.
func printReload(w io.Writer, res *control.ReloadResult) {
	fmt.Fprintf(w, "reloaded %s: %d rule(s)\n", res.Config, res.Rules)
}

// printReloadIssues prints a rejected reload's file:line: key: messages.
func printReloadIssues(w io.Writer, e *control.Error) {
	for _, i := range e.Issues {
		fmt.Fprintf(w, "error: %s\n", i)
	}
}

// printConntrack prints the answer to `xlb conntrack list|count|flush`.
func printConntrack(w io.Writer, op control.ConntrackOp, res *control.ConntrackResult) {
	switch op {
	case control.ConntrackCount:
		fmt.Fprintf(w, "%d\n", res.Count)
	case control.ConntrackFlush:
		fmt.Fprintf(w, "flushed %d entries\n", res.Count)
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tRULE\tFLOW\tBACKEND\tEXPIRES IN\tSTATE")
		for _, e := range res.Entries {
			q, state := strconv.Itoa(e.Queue), "confirmed"
			if e.Queue < 0 {
				q = "shared"
			}
			if e.Unconfirmed {
				state = "unconfirmed (SYN)"
			}
			if e.Stale {
				state += ", stale (re-selected on the next packet)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q, e.Rule, e.Key, e.Backend, e.ExpiresIn, state)
		}
		tw.Flush()
		fmt.Fprintf(w, "%d of %d entries shown\n", len(res.Entries), res.Count)
	}
}

// printLookup prints `xlb lookup`.
func printLookup(w io.Writer, r *control.LookupResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rule := r.Rule
	if rule == "" {
		rule = "none"
	}
	if r.Service != "" {
		rule += " (backend service " + r.Service + ")"
	}
	fmt.Fprintf(tw, "rule\t%s\n", rule)
	fmt.Fprintf(tw, "flow\t%s\n", r.Flow)
	if r.SelectionKey != "" {
		fmt.Fprintf(tw, "selection key\t%s (hash %s)\n", r.SelectionKey, r.SelectionHash)
		tk := "not tracked"
		if r.Trackable {
			tk = r.TrackingKey
			if r.SharedTable {
				tk += " (shared PER_SESSION table)"
			}
		}
		fmt.Fprintf(tw, "tracking key\t%s\n", tk)
		entry := "none"
		switch {
		case r.EntryFound && r.EntryValid && r.EntryPeer != "":
			entry = "yes, to " + r.EntryBackend + ", from fleet peer " + r.EntryPeer
		case r.EntryFound && r.EntryValid && r.EntryFromPeer:
			entry = "yes, to " + r.EntryBackend + ", from a fleet peer"
		case r.EntryFound && r.EntryValid:
			entry = "yes, to " + r.EntryBackend
		case r.EntryFound:
			entry = "yes, to " + r.EntryBackend + ", no longer valid"
		case !r.Trackable:
			entry = "-"
		case !r.EntryChecked:
			entry = "not found among the entries searched (the tables were too large to search completely)"
		}
		fmt.Fprintf(tw, "tracked entry\t%s\n", entry)
		fmt.Fprintf(tw, "eligible tier\t%s (%d backends)\n", r.Tier, r.Eligible)
		mb := r.MaglevBackend
		if mb == "" {
			mb = "none (empty table)"
		}
		fmt.Fprintf(tw, "maglev slot\t%d → %s\n", r.MaglevSlot, mb)
	}
	b := r.Backend
	if b == "" {
		b = "none"
	}
	fmt.Fprintf(tw, "backend\t%s (%s)\n", b, r.Verdict)
	fmt.Fprintf(tw, "why\t%s\n", r.Why)
	tw.Flush()
}

func pct(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

// uptime is a duration in seconds as "3d4h5m", "4h5m6s", "5m6s".
func uptime(secs float64) string {
	d := time.Duration(secs) * time.Second
	if d >= 24*time.Hour {
		days := d / (24 * time.Hour)
		return fmt.Sprintf("%dd%s", days, (d % (24 * time.Hour)).Truncate(time.Minute))
	}
	return d.String()
}

// bytesName is a byte count with a binary prefix: "1.5 MiB".
func bytesName(n float64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%.0f B", n)
	}
	exp, div := 0, float64(unit)
	for n/div >= unit && exp < 4 {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", n/div, "KMGTP"[exp])
}
