package config

import (
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// bgpMain is mainOK with a valid [bgp] table; its lines are:
//
//	1 interface = "eth0"
//	2 hash_seed = "0x1"
//	3 [bgp]
//	4 local_as = 65001
//	5 [[bgp.peer]]
//	6 address = "192.0.2.1"
//	7 peer_as = 65000
func bgpMain(extra ...string) string {
	return mainOK + lines(append([]string{`[bgp]`, `local_as = 65001`, `[[bgp.peer]]`, `address = "192.0.2.1"`, `peer_as = 65000`}, extra...)...)
}

func TestBGPAbsent(t *testing.T) {
	cfg, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": webRule})
	if errs != nil {
		t.Fatal(errs)
	}
	if cfg.BGP != nil {
		t.Errorf("no [bgp] table, but BGP = %+v", cfg.BGP)
	}
}

func TestBGPDefaultsAndFull(t *testing.T) {
	cfg, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": webRule, "xlb.toml": bgpMain()})
	if errs != nil || len(ws) != 0 {
		t.Fatal(errs, ws)
	}
	want := &BGP{LocalAS: 65001, HoldTime: 3 * time.Second, WithdrawDelay: 2 * time.Second, BFD: BFDTimers{100 * time.Millisecond, 100 * time.Millisecond, 3},
		Peers: []BGPPeer{{Address: netip.MustParseAddr("192.0.2.1"), PeerAS: 65000, Port: 179}}}
	if !reflect.DeepEqual(cfg.BGP, want) {
		t.Errorf("BGP = %+v, want %+v", cfg.BGP, want)
	}
	if k := cfg.BGP.Keepalive(); k != time.Second {
		t.Errorf("keepalive = %v, want 1s", k)
	}

	full := mainOK + lines(
		`[bgp]`,
		`local_as = 4200000001`,
		`router_id = "192.0.2.2"`,
		`hold_time = "9s"`,
		`withdraw_delay = "0s"`,
		`graceful_restart = "30s"`,
		`communities = ["65000:80", "4200000001:1:2"]`,
		`med = 10`,
		`[bgp.bfd]`,
		`min_tx = "50ms"`,
		`min_rx = "200ms"`,
		`multiplier = 5`,
		`[[bgp.peer]]`,
		`address = "192.0.2.1"`,
		`peer_as = 65000`,
		`port = 1179`,
		`password = "secret"`,
		`ebgp_multihop = 2`,
		`passive = true`,
		`[[bgp.peer]]`,
		`address = "2001:db8::1"`,
		`peer_as = 4200000001`,
		`bfd = true`,
	)
	cfg, errs, ws = loadFiles(t, map[string]string{"rules.d/web.toml": webRule, "xlb.toml": full})
	if errs != nil || len(ws) != 0 {
		t.Fatal(errs, ws)
	}
	want = &BGP{LocalAS: 4200000001, RouterID: netip.MustParseAddr("192.0.2.2"), HoldTime: 9 * time.Second, GracefulRestart: 30 * time.Second,
		Communities: []Community{{65000, 80}}, LargeCommunities: []LargeCommunity{{4200000001, 1, 2}}, MED: 10,
		BFD: BFDTimers{50 * time.Millisecond, 200 * time.Millisecond, 5},
		Peers: []BGPPeer{
			{Address: netip.MustParseAddr("192.0.2.1"), PeerAS: 65000, Port: 1179, Password: "secret", EBGPMultihop: 2, Passive: true},
			{Address: netip.MustParseAddr("2001:db8::1"), PeerAS: 4200000001, Port: 179, BFD: true},
		}}
	if !reflect.DeepEqual(cfg.BGP, want) {
		t.Errorf("BGP = %+v\nwant %+v", cfg.BGP, want)
	}
	if k := cfg.BGP.Keepalive(); k != 3*time.Second {
		t.Errorf("keepalive = %v, want 3s", k)
	}
	if c := cfg.BGP.Communities[0]; c.String() != "65000:80" || c.Uint32() != 65000<<16|80 {
		t.Errorf("community %v = %#x", c, c.Uint32())
	}
}

// TestBGPErrors: every bad [bgp] input is rejected with file:line: key:.
func TestBGPErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		main string
		want []string
	}{
		{"bad AS", mainOK + lines(`[bgp]`, `local_as = 0`, `[[bgp.peer]]`, `address = "192.0.2.1"`, `peer_as = 65000`),
			[]string{"xlb.toml:4: bgp.local_as: 0 is outside [1, 4294967294]"}},
		{"AS too large", bgpMain(`[[bgp.peer]]`, `address = "192.0.2.3"`, `peer_as = 4294967295`),
			[]string{"xlb.toml:10: bgp.peer[1].peer_as: 4294967295 is outside [1, 4294967294]"}},
		{"AS_TRANS", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 23456", 1),
			[]string{"xlb.toml:4: bgp.local_as: 23456 is AS_TRANS (RFC 6793), not an AS number"}},
		{"AS as string", strings.Replace(bgpMain(), "peer_as = 65000", `peer_as = "AS65000"`, 1),
			[]string{`xlb.toml:7: bgp.peer[0].peer_as: "AS65000": write the AS number as an integer (peer_as = 65001); 4-byte numbers in asplain`}},
		{"missing local_as", strings.Replace(bgpMain(), "local_as = 65001", "med = 0", 1),
			[]string{"xlb.toml:3: bgp.local_as: missing (the appliance's autonomous system number)"}},
		{"peer not an address", strings.Replace(bgpMain(), `"192.0.2.1"`, `"router1"`, 1),
			[]string{`xlb.toml:6: bgp.peer[0].address: "router1" is not an IPv4 or IPv6 address`}},
		{"peer loopback", strings.Replace(bgpMain(), `"192.0.2.1"`, `"127.0.0.1"`, 1),
			[]string{`xlb.toml:6: bgp.peer[0].address: "127.0.0.1" is a loopback address`}},
		{"peer twice", bgpMain(`[[bgp.peer]]`, `address = "192.0.2.1"`, `peer_as = 65000`),
			[]string{`xlb.toml:9: bgp.peer[1].address: 192.0.2.1 is also bgp.peer[0]`}},
		{"no peer", mainOK + lines(`[bgp]`, `local_as = 65001`),
			[]string{"xlb.toml:3: bgp.peer: no [[bgp.peer]]: at least one router to announce to is needed"}},
		{"peer without address", mainOK + lines(`[bgp]`, `local_as = 65001`, `[[bgp.peer]]`, `peer_as = 65000`),
			[]string{"xlb.toml:5: bgp.peer[0].address: missing (the router's address)"}},
		{"unknown key", bgpMain(`hold = "3s"`),
			[]string{"xlb.toml:8: bgp.peer[0].hold: unknown key"}},
		{"unknown key in bgp", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\nholdtime = \"3s\"", 1),
			[]string{"xlb.toml:5: bgp.holdtime: unknown key (did you mean hold_time?)"}},
		{"hold time too short", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\nhold_time = \"1s\"", 1),
			[]string{"xlb.toml:5: bgp.hold_time: 1s is outside [3s, 3600s]"}},
		{"hold time fraction", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\nhold_time = \"3500ms\"", 1),
			[]string{"xlb.toml:5: bgp.hold_time: 3.5s is not a whole number of seconds (BGP carries seconds)"}},
		{"graceful restart fraction", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\ngraceful_restart = \"2500ms\"", 1),
			[]string{"xlb.toml:5: bgp.graceful_restart: 2.5s is not a whole number of seconds (BGP carries seconds)"}},
		{"graceful restart too long", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\ngraceful_restart = \"2h\"", 1),
			[]string{"xlb.toml:5: bgp.graceful_restart: 2h is outside [0s, 4095s]"}},
		{"router id v6", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\nrouter_id = \"2001:db8::2\"", 1),
			[]string{`xlb.toml:5: bgp.router_id: "2001:db8::2" is not an IPv4 address (the BGP identifier is written as one)`}},
		{"bad community", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\ncommunities = [\"65000:80\", \"70000:1\", \"a\", 5]", 1),
			[]string{
				`xlb.toml:5: bgp.communities[1]: "70000:1": a community is AS:VALUE, each 0..65535`,
				`xlb.toml:5: bgp.communities[2]: "a" is neither a community (AS:VALUE) nor a large community (GLOBAL:LOCAL1:LOCAL2)`,
				`xlb.toml:5: bgp.communities[3]: want a string like "65000:80", got an integer`,
			}},
		{"med negative", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\nmed = -1", 1),
			[]string{"xlb.toml:5: bgp.med: -1 is outside [0, 4294967295]"}},
		{"multihop on iBGP", strings.Replace(bgpMain(`ebgp_multihop = 2`), "peer_as = 65000", "peer_as = 65001", 1),
			[]string{"xlb.toml:8: bgp.peer[0].ebgp_multihop: the session is iBGP (peer_as = local_as 65001): multihop applies to eBGP only"}},
		{"password too long", bgpMain(`password = "` + strings.Repeat("x", 81) + `"`),
			[]string{"xlb.toml:8: bgp.peer[0].password: want 1..80 characters (TCP MD5 key), got 81"}},
		{"bfd not a boolean", bgpMain(`bfd = "yes"`),
			[]string{`xlb.toml:8: bgp.peer[0].bfd: want a boolean (true or false), got a string`}},
		{"bfd with multihop", bgpMain(`ebgp_multihop = 2`, `bfd = true`),
			[]string{"xlb.toml:9: bgp.peer[0].bfd: BFD runs single hop (RFC 5881) to a directly connected router: not with ebgp_multihop = 2"}},
		{"bfd interval too short", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\n[bgp.bfd]\nmin_tx = \"1ms\"", 1),
			[]string{"xlb.toml:6: bgp.bfd.min_tx: 1ms is outside [10ms, 60s]"}},
		{"bfd interval not a duration", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\n[bgp.bfd]\nmin_rx = \"fast\"", 1),
			[]string{`xlb.toml:6: bgp.bfd.min_rx: "fast" is not a duration (write a number with a unit, like "60s" or "10m")`}},
		{"bfd multiplier 1", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\n[bgp.bfd]\nmultiplier = 1", 1),
			[]string{"xlb.toml:6: bgp.bfd.multiplier: 1 is outside [2, 255]"}},
		{"bfd unknown key", strings.Replace(bgpMain(), "local_as = 65001", "local_as = 65001\n[bgp.bfd]\nmintx = \"100ms\"", 1),
			[]string{"xlb.toml:6: bgp.bfd.mintx: unknown key (did you mean min_tx?)"}},
		{"bgp not a table", mainOK + lines(`bgp = 5`),
			[]string{"xlb.toml:3: bgp: want a table, got an integer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": webRule, "xlb.toml": tc.main})
			if cfg != nil {
				t.Fatalf("accepted: %+v", cfg.BGP)
			}
			if !reflect.DeepEqual(errs, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestBGPFamilyWarning: an IPv6 VIP with only IPv4 peers is not announced,
// and Load says so.
func TestBGPFamilyWarning(t *testing.T) {
	rule6 := strings.Replace(strings.Replace(webRule, `"203.0.113.10"`, `"2001:db8:80::10"`, 1), `["10.0.1.10", "10.0.1.11"]`, `["2001:db8:1::10"]`, 1)
	_, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": webRule, "rules.d/web6.toml": strings.Replace(rule6, `"web"`, `"web6"`, 1), "xlb.toml": bgpMain()})
	if errs != nil {
		t.Fatal(errs)
	}
	want := []string{"xlb.toml:5: bgp.peer: IPv6 VIPs (2001:db8:80::10 of rule web6) are not announced: no IPv6 peer"}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("warnings %q, want %q", ws, want)
	}
}

// TestBGPExample uncomments the [bgp] block of deploy/examples/xlb.toml
// and loads it: the documented example must be valid.
func TestBGPExample(t *testing.T) {
	b, err := os.ReadFile("../../deploy/examples/xlb.toml")
	if err != nil {
		t.Fatal(err)
	}
	main := uncommentBlock(t, string(b), "[bgp]", nil)
	cfg, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": webRule, "xlb.toml": main})
	if errs != nil || len(ws) != 0 {
		t.Fatalf("the uncommented example:\n%s\nerrors %v, warnings %v", main, errs, ws)
	}
	if cfg.BGP == nil || len(cfg.BGP.Peers) == 0 || len(cfg.BGP.Communities) == 0 {
		t.Errorf("example read as %+v", cfg.BGP)
	}
}

// TestBGPDesignExample: the [bgp] example of docs/design.md#configuration
// (in testdata/design) reads as written.
func TestBGPDesignExample(t *testing.T) {
	cfg, _, err := Load("testdata/design/xlb.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &BGP{LocalAS: 65001, RouterID: netip.MustParseAddr("192.0.2.2"), HoldTime: 3 * time.Second, WithdrawDelay: 2 * time.Second,
		BFD:   DefaultBFDTimers(),
		Peers: []BGPPeer{{Address: netip.MustParseAddr("192.0.2.1"), PeerAS: 65000, Port: 179}}}
	if !reflect.DeepEqual(cfg.BGP, want) {
		t.Errorf("BGP = %+v, want %+v", cfg.BGP, want)
	}
}

// uncommentBlock returns text (deploy/examples/xlb.toml) up to its
// commented "# <section>" block, followed by that block's key and table
// lines uncommented (the explanation lines dropped); rewrite, when set,
// may change a key's line.
func uncommentBlock(t *testing.T, text, section string, rewrite func(key, line string) string) string {
	t.Helper()
	start := strings.Index(text, "# "+section)
	if start < 0 {
		t.Fatalf("deploy/examples/xlb.toml has no commented %s block", section)
	}
	var block []string
	for _, l := range strings.Split(text[start:], "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		l = strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")
		if k, _, ok := strings.Cut(l, " ="); ok && !strings.Contains(k, " ") || strings.HasPrefix(l, "[") {
			if rewrite != nil {
				l = rewrite(k, l)
			}
			block = append(block, l)
		}
	}
	return text[:start] + strings.Join(block, "\n") + "\n"
}
