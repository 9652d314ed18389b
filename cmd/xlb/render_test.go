package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/daemon"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.golden from the renderers' output")

// renderNow is the clock of every golden file: a fixed instant in a fixed
// zone that is not UTC, so a renderer that printed in the machine's zone
// or measured from the real clock would differ.
var renderNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.FixedZone("UTC+2", 2*3600))

func renderBackends() []control.Backend {
	until := renderNow.Add(90 * time.Second)
	past := renderNow.Add(-time.Minute)
	drained := renderNow.Add(-30 * time.Second)
	probed, flipped := renderNow.Add(-3*time.Second), renderNow.Add(-20*time.Second)
	return []control.Backend{
		{Rule: "web", Address: "192.0.2.1", Group: "a", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config",
			Health: "HEALTHY", WeightConfigured: -1, WeightSource: "config", WeightEffective: 1, Share: 0.5, Eligible: true, Tier: "PRIMARY",
			Connections: 12, SessionEntries: 0, Packets: 100, PacketsPerSec: 42.4,
			Traffic:   control.Traffic{Bytes: 150000, BytesPerSec: 63500, NewConnections: 20, NewConnectionsPerSec: 3.5, ActiveConnections: 9, InactiveConnections: 3},
			CheckInfo: control.CheckInfo{LastCheck: &past, ProbeLatencySeconds: 0.0012, HealthSince: &past, HealthChanges: 1}},
		{Rule: "web", Address: "192.0.2.2", Group: "a", Role: "failover", RoleSource: "cli", Admin: "DRAINED", AdminSource: "cli",
			DrainedAt: &drained, DrainUntil: &until, Health: "HEALTHY", WeightConfigured: 5, WeightSource: "cli", Tier: "PRIMARY",
			Connections: -1, Packets: -1, Traffic: control.Traffic{ActiveConnections: -1, InactiveConnections: -1}},
		{Rule: "web", Address: "192.0.2.3", Group: "a", Role: "-", RoleSource: "config", Admin: "REMOVED", AdminSource: "config",
			DrainUntil: &past, Health: "UNKNOWN", WeightConfigured: -1, WeightSource: "config", Tier: "PRIMARY",
			Connections: 0, Packets: 7, NextHop: "not resolved yet"},
		{Rule: "dns", Address: "2001:db8::53", Group: "b", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config",
			Health: "UNHEALTHY", HealthDetail: "connection refused", WeightConfigured: 200, WeightSource: "config", WeightEffective: 0, Share: 0, Tier: "FAILOVER",
			Connections: 0, SessionEntries: 0, Packets: 0, WeightState: "OK",
			CheckInfo: control.CheckInfo{LastCheck: &probed, ProbeLatencySeconds: 0.000345, HealthSince: &flipped, HealthChanges: 3}},
		{Rule: "dns", Address: "2001:db8::54", Group: "b", Role: "primary", RoleSource: "config", Admin: "IN_SERVICE", AdminSource: "config",
			Health: "HEALTHY", WeightConfigured: -1, WeightSource: "config", WeightEffective: 0, Share: 0, Tier: "FAILOVER",
			Connections: 0, SessionEntries: 5, Packets: 40, WeightState: "MISSING_WEIGHT",
			Traffic: control.Traffic{Bytes: 4000, NewConnections: 5, ActiveConnections: 3, InactiveConnections: 2}},
	}
}

func renderStatus() *control.Status {
	bs := renderBackends()
	return &control.Status{
		Config: "/etc/xlb/xlb.toml", Loaded: time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC), XDPMode: "native", ZeroCopy: true, Queues: []int{0, 1, 3},
		Conntrack: 15, Counters: control.Counters{RX: 1000, TX: 990, Tracked: 700, Drops: map[string]uint64{"no-rule": 10, "ipv4-bad-checksum": 2}, Passes: map[string]uint64{"pass-non-ip": 3}, RXPerSec: 123.6, KernelRXD: 4},
		Build: control.Build{Version: "v1.2.3 0123456789ab", Started: renderNow.Add(-(26*time.Hour + 3*time.Minute + 7*time.Second)), UptimeSeconds: (26*time.Hour + 3*time.Minute + 7*time.Second).Seconds()},
		Rates: control.RateInterval{Seconds: 2.004, WindowSeconds: 2},
		QueueStats: []control.QueueStat{{Queue: 0, RXPackets: 600, TXPackets: 590, RXPerSec: 123.6, QueueTraffic: control.QueueTraffic{Drops: 10}}, {Queue: 1, RXPackets: 0},
			{Queue: 3, RXPackets: 400, TXPackets: 400, QueueTraffic: control.QueueTraffic{Drops: 2, XSK: control.XSK{RXRingFull: 4}}}},
		Arenas: []control.ArenaStat{{Table: "queue-0", Queue: 0, Bytes: 75501568, HugeBytes: 73400320}, {Table: "queue-1", Queue: 1, Bytes: 75501568, HugeBytes: 73400320},
			{Table: "queue-3", Queue: 3, Bytes: 75501568, HugeBytes: 73400320}, {Table: "sessions", Queue: -1, Bytes: 16781312, HugeBytes: 16777216}, {Table: "fragments", Queue: -1, Bytes: 16781312, HugeBytes: 16777216}},
		ShmemTHP: "advise",
		Warnings: []string{"queue 1 received nothing over the last 2s while the appliance received 124 packets/s: the NIC's receive hashing (RSS) sends it no flow"},
		Rules: []control.Rule{
			{Name: "web", VIP: "203.0.113.10", Protocol: "TCP", Ports: "80,443", Affinity: "NONE", Tracking: "PER_CONNECTION", Policy: "MAGLEV", Encap: "IPIP",
				Tier: "PRIMARY", Reason: "2 of 3 primaries usable", Eligible: 1, Backends: bs[:3], TableDigest: "9f86d081884c7d65", FirstChecksDone: true,
				RuleTraffic: control.RuleTraffic{Packets: 107, PacketsPerSec: 42.4, Traffic: control.Traffic{Bytes: 150000, BytesPerSec: 63500, NewConnections: 20, NewConnectionsPerSec: 3.5, ActiveConnections: 9, InactiveConnections: 3}}},
			{Name: "dns", VIP: "2001:db8::10", Protocol: "UDP", Ports: "all", Affinity: "CLIENT_IP", Tracking: "PER_SESSION", Policy: "WEIGHTED_MAGLEV", Encap: "GUE",
				Tier: "FAILOVER", Reason: "no primary usable", Eligible: 0, Backends: bs[3:], TableDigest: "2c26b46b68ffc68f", SessionActiveSeconds: 10,
				RuleTraffic: control.RuleTraffic{Packets: 40, Traffic: control.Traffic{Bytes: 4000, NewConnections: 5, ActiveConnections: 3, InactiveConnections: 2}}},
		},
		Events: []control.RuleEvent{
			{Rule: "dns", At: time.Date(2025, 3, 14, 13, 0, 0, 0, time.UTC), Kind: "tier-switch", From: "PRIMARY", To: "FAILOVER", Reason: "no primary usable"},
			{Rule: "web", At: time.Date(2025, 3, 14, 13, 5, 0, 0, time.UTC), Kind: "failover-drain", Group: "b", Reason: "failover group left"},
			{Rule: "web", At: time.Date(2025, 3, 14, 13, 6, 0, 0, time.UTC), Kind: "health", Backend: "192.0.2.3", From: "HEALTHY", To: "UNHEALTHY", Reason: "connection refused"},
			{Rule: "www6", At: time.Date(2025, 3, 14, 13, 6, 30, 0, time.UTC), Kind: "health", Backend: "2001:db8:1::10", From: "HEALTHY", To: "UNHEALTHY", Reason: "no answer to 2 packet(s) sent to [2001:db8::31]:8080 inside IPIP to 2001:db8:1::10",
				Service: "www", Rules: []string{"udp4", "udp6", "www4", "www6"}},
			{Rule: "web", At: time.Date(2025, 3, 14, 13, 7, 0, 0, time.UTC), Kind: "cli", Backend: "192.0.2.2", Reason: "192.0.2.2 of rule web drained", By: "uid 0 (pid 4242)"},
			{At: time.Date(2025, 3, 14, 13, 8, 0, 0, time.UTC), Kind: "reload", To: "rejected", Reason: "rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]"},
			{At: time.Date(2025, 3, 14, 13, 9, 0, 0, time.UTC), Kind: "bgp", Backend: "203.0.113.10", To: "announced", Reason: "serving"},
		},
		Stale:     []string{`state.toml:7: override[1]: rule "old" is not in the configuration; override kept, not applied`},
		Appliance: renderAppliance(false),
	}
}

// renderAppliance is an appliance with [bgp]: one peer up, one down with
// its last error, one VIP announced and one withdrawn.
func renderAppliance(drained bool) control.Appliance {
	up := renderNow.Add(-150 * time.Second)
	failed := renderNow.Add(-20 * time.Second)
	a := control.Appliance{BGP: &control.BGP{LocalAS: 65001, RouterID: "198.18.0.2", HoldTimeSeconds: 3, WithdrawDelaySec: 2,
		Peers: []control.BGPPeer{
			{Address: "198.18.0.1", PeerAS: 65000, State: "established", Since: &up, Announced: []string{"203.0.113.10/32"}, BFD: "up"},
			{Address: "fd00:18::1", PeerAS: 65000, State: "active", Since: &failed, Announced: []string{}, LastError: "hold timer expired", LastErrorAt: &failed},
		},
		VIPs: []control.VIPAnnouncement{
			{VIP: "203.0.113.10", Announced: true, Reason: "serving (web: PRIMARY, 1 eligible)", Since: up},
			{VIP: "2001:db8::10", Reason: "no rule can place a new flow on a usable backend (dns: LAST_RESORT)", Since: failed},
		}}}
	if drained {
		a.Drained, a.DrainedAt = true, &failed
		for i := range a.BGP.VIPs {
			a.BGP.VIPs[i].Announced, a.BGP.VIPs[i].Reason = false, "appliance drained (xlb appliance drain)"
		}
		a.BGP.Peers[0].Announced = []string{}
	}
	return a
}

// TestRender compares every renderer's output with its golden file.
func TestRender(t *testing.T) {
	quiet := *renderStatus()
	quiet.ZeroCopy, quiet.Rates, quiet.Counters.Drops, quiet.Events, quiet.Stale = false, control.RateInterval{WindowSeconds: 2}, nil, nil, nil
	quiet.Rules, quiet.Warnings = nil, nil
	quiet.Appliance = control.Appliance{} // no [bgp], not drained: no appliance lines
	// Arenas on 4 KiB pages under never: the line says how to get huge ones.
	quiet.Arenas, quiet.ShmemTHP = []control.ArenaStat{{Table: "queue-0", Bytes: 9441280}, {Table: "sessions", Queue: -1, Bytes: 2101248}}, "never"
	for _, tc := range []struct {
		name   string
		render func(w *bytes.Buffer)
	}{
		{"status", func(w *bytes.Buffer) { printStatus(w, renderStatus(), renderNow) }},
		{"status-quiet", func(w *bytes.Buffer) { printStatus(w, &quiet, renderNow) }},
		{"status-page", func(w *bytes.Buffer) {
			// The second page of rules 1-2 of 57 selected, then a page past the end.
			st := quiet
			st.Rules, st.RulesSelected, st.RulesOffset = renderStatus().Rules, 57, 20
			printStatus(w, &st, renderNow)
			fmt.Fprintln(w, "---")
			st.Rules, st.RulesOffset = nil, 60
			printStatus(w, &st, renderNow)
		}},
		{"status-summary", func(w *bytes.Buffer) {
			// 1000 rules, three need attention, two of them on this page;
			// then an appliance where none does.
			st := quiet
			st.Events, st.RulesSelected = renderStatus().Events, 1000
			st.Summary = &control.StatusSummary{Rules: 1000, Tiers: map[string]int{"PRIMARY": 997, "FAILOVER": 2, "EMPTY": 1}, Cold: 1,
				Backends: 100000, Health: map[string]int{"HEALTHY": 99790, "UNHEALTHY": 160, "UNKNOWN": 50}, Drained: 12, Eligible: 99700,
				AttentionTotal: 3, Attention: []control.RuleLine{
					{Name: "web", VIP: "203.0.113.10", Tier: "FAILOVER", Reason: "1 of 100 primaries usable", Backends: 100, Eligible: 40, Unhealthy: 99, Warm: true},
					{Name: "dns", VIP: "2001:db8::53", Tier: "EMPTY", Reason: "no usable backend", Backends: 50, Unhealthy: 50}}}
			printStatusSummary(w, &st, renderNow)
			fmt.Fprintln(w, "---")
			st.Events = nil
			st.Summary = &control.StatusSummary{Rules: 1000, Tiers: map[string]int{"PRIMARY": 1000}, Backends: 100000, Health: map[string]int{"HEALTHY": 100000}, Eligible: 100000}
			printStatusSummary(w, &st, renderNow)
		}},
		{"top", func(w *bytes.Buffer) {
			// Sorted by packets/s, then by name backwards, cut to a
			// terminal of 100 columns and 12 lines.
			printTop(w, renderStatus(), topView{Sort: "pkts", Interval: time.Second}, renderNow, 0, 0)
			fmt.Fprintln(w, "---")
			printTop(w, renderStatus(), topView{Sort: "name", Reverse: true, Interval: time.Second, Err: "control socket: connection refused"}, renderNow, 100, 12)
		}},
		{"backend-list", func(w *bytes.Buffer) {
			// dns's VIP is unknown (the status request failed for it).
			printBackendList(w, renderBackends(), map[string]string{"web": "203.0.113.10"}, control.RateInterval{Seconds: 2.004, WindowSeconds: 2}, renderNow)
		}},
		{"backend-summary", func(w *bytes.Buffer) {
			// backend list beyond 20 rules: the status summary's counts, then an
			// appliance where no rule needs attention.
			st := quiet
			st.Summary = &control.StatusSummary{Rules: 1000, Tiers: map[string]int{"PRIMARY": 999, "EMPTY": 1}, Backends: 100000,
				Health: map[string]int{"HEALTHY": 99950, "UNHEALTHY": 50}, Drained: 12, Eligible: 99900, AttentionTotal: 1,
				Attention: []control.RuleLine{{Name: "dns", VIP: "2001:db8::53", Tier: "EMPTY", Reason: "no usable backend", Backends: 50, Unhealthy: 50, Warm: true}}}
			printBackendSummary(w, &st)
			fmt.Fprintln(w, "---")
			st.Summary = &control.StatusSummary{Rules: 1000, Tiers: map[string]int{"PRIMARY": 1000}, Backends: 100000, Health: map[string]int{"HEALTHY": 100000}, Eligible: 100000}
			printBackendSummary(w, &st)
		}},
		{"backend-change", func(w *bytes.Buffer) {
			printBackendChange(w, &control.BackendChangeResult{Changed: true, Message: "192.0.2.2 of rule web drained: no new connections; tracked ones are honoured for 1m30s", Backend: renderBackends()[1]}, renderNow)
			printBackendChange(w, &control.BackendChangeResult{Message: "192.0.2.9 of rule web had no override"}, renderNow)
		}},
		{"appliance", func(w *bytes.Buffer) {
			printApplianceChange(w, &control.ApplianceChangeResult{Changed: true, Message: "appliance drained: every VIP withdrawn from the routers; connections that still arrive are forwarded", Appliance: renderAppliance(true)}, renderNow)
			printApplianceChange(w, &control.ApplianceChangeResult{Message: "appliance was not drained", Appliance: control.Appliance{}}, renderNow)
			printApplianceChange(w, &control.ApplianceChangeResult{Message: "appliance drained (no time)", Appliance: control.Appliance{Drained: true}}, renderNow)
		}},
		{"reload", func(w *bytes.Buffer) {
			printReload(w, &control.ReloadResult{Config: "/etc/xlb/xlb.toml", Rules: 4})
			printReloadIssues(w, &control.Error{Message: "reload rejected", Issues: []string{"rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]", "rules.d/web.toml:20: bogus: unknown key"}})
		}},
		{"conntrack", func(w *bytes.Buffer) {
			res := &control.ConntrackResult{Count: 5, Entries: []control.ConntrackRow{
				{Queue: 0, Rule: "web", Key: "TCP 198.51.100.7:40000 → 203.0.113.10:80", Backend: "192.0.2.1", ExpiresIn: "59s"},
				{Queue: 3, Rule: "web", Key: "TCP 198.51.100.8:40001 → 203.0.113.10:443", Backend: "slot 7", Unconfirmed: true, Stale: true, ExpiresIn: "4s"},
				{Queue: -1, Rule: "dns", Key: "2001:db8::7 → 2001:db8::10", Backend: "2001:db8::53", ExpiresIn: "2m0s"},
			}}
			printConntrack(w, control.ConntrackList, res)
			printConntrack(w, control.ConntrackCount, res)
			printConntrack(w, control.ConntrackFlush, res)
		}},
		{"lookup", func(w *bytes.Buffer) {
			base := control.LookupResult{Rule: "web", Flow: "TCP 198.51.100.7:40000 → 203.0.113.10:80 (established)",
				SelectionKey: "TCP 198.51.100.7:40000 → 203.0.113.10:80", SelectionHash: "0x00000000deadbeef", TrackingKey: "TCP 198.51.100.7:40000 → 203.0.113.10:80",
				Trackable: true, EntryChecked: true, Tier: "PRIMARY", Eligible: 2, MaglevSlot: 17, MaglevBackend: "192.0.2.1", Verdict: "TX", Backend: "192.0.2.1",
				Why: "no tracked entry: new flow, Maglev slot 17 of 65537 → 192.0.2.1"}
			valid := base
			valid.EntryFound, valid.EntryValid, valid.EntryBackend, valid.Backend = true, true, "192.0.2.2", "192.0.2.2"
			valid.Why = "tracked entry valid: the flow stays on 192.0.2.2 (a new flow would get Maglev slot 17 of 65537 → 192.0.2.1)"
			stale := base
			stale.EntryFound, stale.EntryBackend, stale.SharedTable = true, "192.0.2.3", true
			unchecked := base
			unchecked.EntryChecked = false
			untracked := base
			untracked.Trackable, untracked.TrackingKey = false, ""
			empty := base
			empty.MaglevBackend, empty.Backend, empty.Verdict, empty.Why = "", "", "DROP", "eligible set empty (tier NONE): new connections are dropped (no-backend)"
			nomatch := control.LookupResult{Flow: "TCP 198.51.100.7:40000 → 203.0.113.10:81 (established)", Verdict: "PASS", Why: "no forwarding rule matches this destination, protocol and port: the XDP program passes the packet to the appliance's own network stack"}
			for i, r := range []control.LookupResult{base, valid, stale, unchecked, untracked, empty, nomatch} {
				if i > 0 {
					w.WriteString("--\n")
				}
				printLookup(w, &r)
			}
		}},
		{"simulate", func(w *bytes.Buffer) {
			printSimulation(w, []daemon.SimRule{
				{Rule: "web", TableSize: 65537, TierBefore: "PRIMARY", TierAfter: "PRIMARY", Moved: 0.1, SurvivorMoved: 0.001, Flows: 1000, FlowsMoved: 101,
					Backends: []daemon.SimBackend{
						{Address: "192.0.2.1", Before: 0.5, After: 0, MovedAway: 0.5, MovedOwn: 1, InBefore: true, ChangedByRequest: true, FlowsBefore: 500, FlowsMoved: 500},
						{Address: "192.0.2.2", Before: 0.5, After: 0.5, InBefore: true, InAfter: true, FlowsBefore: 500},
						{Address: "192.0.2.3", After: 0.5, Gained: 0.5, InAfter: true, ChangedByRequest: true},
						{Address: "192.0.2.4", Before: 0.25, After: 0.3, Gained: 0.05, InBefore: true, InAfter: true, ChangedByRequest: true},
						{Address: "192.0.2.5"},
					}},
				{Rule: "api", TableSize: 251, TableSizeBefore: 131, TierBefore: "PRIMARY", TierAfter: "FAILOVER", Moved: 1,
					Backends: []daemon.SimBackend{{Address: "192.0.2.1", Before: 1, MovedAway: 1, MovedOwn: 1, InBefore: true, ChangedByRequest: true}}},
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			tc.render(&got)
			path := filepath.Join("testdata", "render", tc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestRender -update writes it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs from %s (go test -run TestRender -update rewrites it after a deliberate change):\n--- got\n%s--- want\n%s", tc.name, path, got.Bytes(), want)
			}
		})
	}
}

// TestCopyIndented: the streamed --json answer printed as it arrives is
// byte for byte what printJSON prints of the decoded answer; a cut answer
// is an error.
func TestCopyIndented(t *testing.T) {
	for i, v := range []any{renderStatus(), renderBackends(), []control.Backend{}, map[string]any{"a": []int{}, "b": map[string]int{}, "c": "x \\\" {[,:]} <&>"}} {
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		printJSON(&want, v)
		if err := copyIndented(&got, bytes.NewReader(append(compact, '\n'))); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("value %d: copyIndented (%v):\n%s\nprintJSON:\n%s", i, err, got.Bytes(), want.Bytes())
		}
		if err := copyIndented(io.Discard, bytes.NewReader(compact[:len(compact)/2])); err == nil {
			t.Errorf("value %d: an answer cut in half printed without an error", i)
		}
	}
}

// A verdict shared by rules with their own backends (equal direct checks)
// names them in xlb status, with the rule whose probe decided.
func TestRenderNamesSharedProbe(t *testing.T) {
	st := renderStatus()
	st.Events = append(st.Events, control.RuleEvent{At: renderNow, Kind: "health", Rule: "web4", Rules: []string{"api4", "web4"},
		Backend: "198.51.100.10", From: "HEALTHY", To: "UNHEALTHY", Reason: "connection refused"})
	var status strings.Builder
	printStatus(&status, st, renderNow)
	if want := "rules api4, web4  health HEALTHY → UNHEALTHY 198.51.100.10 probed through web4  connection refused"; !strings.Contains(status.String(), want) {
		t.Errorf("status does not have %q:\n%s", want, status.String())
	}
}
