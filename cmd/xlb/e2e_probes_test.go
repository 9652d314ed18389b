package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/probepath"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// dataPathCheck is a [health_check] body probing through the data path
// every second; kind and port first (e.g. "type = \"TCP\"\nport = 80\n").
func dataPathCheck(kindAndPort string) string {
	return kindAndPort + "path = \"DATA_PATH\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 2\n"
}

// healthOf returns rule's health and health detail of each lab backend in
// st, by index, whichever address (tunnel or link) the rule lists it by.
func healthOf(l *lab.Lab, st control.Status, rule string) (h, detail []string) {
	h, detail = make([]string, len(l.Backends)), make([]string, len(l.Backends))
	for i, b := range l.Backends {
		for _, a := range []netip.Addr{b.Tunnel4, b.Tunnel6, b.Link4, b.Link6} {
			if row := backendOf(st, rule, a.String()); row.Health != "" {
				h[i], detail[i] = row.Health, row.HealthDetail
			}
		}
	}
	return h, detail
}

// waitRules waits until, in every rule of rules, the backends of idx have
// health want (and the others do not), with a detail containing why.
func waitRules(t *testing.T, l *lab.Lab, x *labXLB, rules []string, want string, why string, idx ...int) {
	t.Helper()
	testutil.WaitFor(t, 45*time.Second, fmt.Sprintf("%v: be%v %s", rules, idx, want), func() (bool, string) {
		st := x.status(t)
		var seen []string
		ok := true
		for _, r := range rules {
			if !ruleStatus(t, st, r).FirstChecksDone {
				return false, r + ": first health checks not published yet"
			}
			h, detail := healthOf(l, st, r)
			seen = append(seen, fmt.Sprintf("%s %v %q", r, h, detail))
			for i := range l.Backends {
				in := false
				for _, j := range idx {
					in = in || i == j
				}
				if in != (h[i] == want) || (in && why != "" && !strings.Contains(detail[i], why)) {
					ok = false
				}
			}
		}
		return ok, strings.Join(seen, "; ")
	})
}

// allZero reports whether every rule of rules counts 0 in n.
func allZero(n map[string]int, rules []string) bool {
	for _, r := range rules {
		if n[r] != 0 {
			return false
		}
	}
	return true
}

// probeHost lists what data-path probes left in the appliance's
// namespace: the marks of the policy rules (one per family) and the TUNs.
func probeHost(t *testing.T, l *lab.Lab) (marks, tuns []string) {
	t.Helper()
	for _, fam := range []string{"-4", "-6"} {
		out, err := l.XLB.Output("ip", fam, "rule", "show")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(out) {
			if strings.HasPrefix(f, fmt.Sprintf("%#x", probepath.MarkBase)[:8]) {
				marks = append(marks, f)
			}
		}
	}
	out, err := l.XLB.Output("ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], probepath.TUNPrefix) {
			tuns = append(tuns, strings.TrimSuffix(f[1], ":"))
		}
	}
	return marks, tuns
}

// onEachRule counts the new connections backend idx takes on each of the
// lab's default rules (web4, web6: 150 TCP requests; udp4, udp6: a UDP flow
// from each of 40 client addresses from the from'th), with the rules'
// unanswered requests and flows beside them. The UDP rules keep each
// client address on its backend (CLIENT_IP, PER_SESSION): a step that
// expects other backends takes other addresses.
func onEachRule(t *testing.T, l *lab.Lab, idx, from int) (on, unanswered map[string]int) {
	t.Helper()
	on, unanswered = map[string]int{}, map[string]int{}
	for _, fam := range []int{4, 6} {
		web, udp := fmt.Sprintf("web%d", fam), fmt.Sprintf("udp%d", fam)
		res := drive(t, l, 150, fam)
		on[web], unanswered[web] = res.PerBackend[idx], res.Errors+res.Mismatched
		dst := netip.AddrPortFrom(vipOf(l, fam), l.Opts.UDPPort)
		on[udp], unanswered[udp] = 0, 0
		for _, src := range clientsOf(l, fam)[from : from+40] {
			f := openUDPFlow(t, l, src, dst)
			switch f.who(16) {
			case idx:
				on[udp]++
			case -1:
				unanswered[udp]++
			}
			f.c.Close()
		}
	}
	return on, unanswered
}

// waitServes waits until backend idx takes new connections of every rule
// of rules again (UDP flows from the 40 client addresses from the from'th),
// and nothing goes unanswered.
func waitServes(t *testing.T, l *lab.Lab, idx, from int, rules ...string) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("be%d serves %v again", idx, rules), func() (bool, string) {
		on, unanswered := onEachRule(t, l, idx, from)
		ok := true
		for r, n := range unanswered {
			ok = ok && n == 0 && (on[r] > 0 || !slices.Contains(rules, r))
		}
		return ok, fmt.Sprintf("be%d took %v, unanswered %v", idx, on, unanswered)
	})
}

// setVIPs adds or removes the VIPs on backend b's loopback.
func setVIPs(t *testing.T, l *lab.Lab, b *lab.Backend, on bool) {
	t.Helper()
	op := "del"
	if on {
		op = "add"
	}
	for _, a := range []string{l.Opts.VIP4.String() + "/32", l.Opts.VIP6.String() + "/128"} {
		args := []string{"addr", op, a, "dev", "lo"}
		if on && strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		if err := b.NS.Run("ip", args...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndToEndDataPathProbes: health checks that prove the data path
// (docs/design.md#data-path-probes). Four rules probe through it, one per
// encapsulation (IPIP, GUE, GRE, DIRECT) and with four check kinds, and a
// fifth probes directly: it names no path and xlb.toml no
// health_check_path, as a configuration written before data-path probes. A backend without the VIPs on
// its loopback turns UNHEALTHY under every data-path rule, explained in
// its health detail, and takes no new connections, TCP or UDP, IPv4 or
// IPv6, while the direct probe still finds it HEALTHY, as it always did;
// with the VIPs back it is HEALTHY and every rule serves it again. A
// backend without its decapsulation fails the tunnelled rules' checks but
// not DIRECT's, takes new connections of DIRECT's rule only, and serves
// every rule again once decapsulating. A
// backend whose next hop cannot be resolved says so in its health detail.
// Across xlb restart the successor probes through a path of its own and
// the predecessor removes its; after the successor's crash a new daemon
// removes what it left; a stop removes the daemon's own.
func TestEndToEndDataPathProbes(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 3, XLBPinDir: bpffsDir(t)})
	rules := l.DefaultRules("IPIP")
	// web4 IPIP with HTTP, web6 GRE with TCP, udp4 GUE with UDP (the echo
	// server on the VIP), udp6 DIRECT with HTTP.
	rules[0].Health = dataPathCheck(fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\n", l.Opts.HealthPort))
	rules[1].Encap, rules[1].Health = "GRE", dataPathCheck(fmt.Sprintf("type = \"TCP\"\nport = %d\n", l.Opts.HTTPPort))
	rules[2].Encap, rules[2].Health = "GUE", dataPathCheck(fmt.Sprintf("type = \"UDP\"\nport = %d\nrequest = \"ping\"\nresponse = \"ping\"\n", l.Opts.UDPPort))
	rules[3].Encap, rules[3].Health = "DIRECT", dataPathCheck(fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\n", l.Opts.HealthPort))
	// direct4 names no path, and the lab's xlb.toml no health_check_path:
	// a configuration written before data-path probes, read as DIRECT.
	direct := lab.Rule{Name: "direct4", VIP: l.Opts.VIP4, Protocol: "TCP", Ports: `["8081"]`, Encap: "IPIP",
		Health: fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 2\n", l.Opts.HealthPort)}
	rules = append(rules, direct)
	dir := t.TempDir()
	cfg, err := l.WriteConfig(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	// A DIRECT rule with a backend nobody answers ARP for: no next hop.
	ghost := fmt.Sprintf("name = \"ghost\"\nvip = %q\nprotocol = \"TCP\"\nports = [\"9\"]\n[encap]\ntype = \"DIRECT\"\n[health_check]\n%s[[group]]\nname = \"lab\"\nbackends = [\"198.18.0.250\"]\n",
		l.Opts.VIP4, dataPathCheck(fmt.Sprintf("type = \"HTTP\"\nport = %d\n", l.Opts.HealthPort)))
	if err := os.WriteFile(filepath.Join(dir, "rules.d", "ghost.toml"), []byte(ghost), 0o644); err != nil {
		t.Fatal(err)
	}
	x := xlbRun(t, l, dir, cfg)

	dataPath := []string{"web4", "web6", "udp4", "udp6"}
	all := append(append([]string{}, dataPath...), "direct4")
	waitLog(t, x, "health_check_path is not set in xlb.toml")
	if !strings.Contains(x.log.String(), "rules=direct4") {
		t.Errorf("the log names the rules probing directly by default as other than direct4:\n%s", x.log)
	}
	waitRules(t, l, x, all, "HEALTHY", "", 0, 1, 2)
	testutil.WaitFor(t, 30*time.Second, "ghost's health detail names its missing next hop", func() (bool, string) {
		b := backendOf(x.status(t), "ghost", "198.18.0.250")
		return b.Health != "HEALTHY" && strings.Contains(b.HealthDetail, "no next hop"), b.Health + ": " + b.HealthDetail
	})

	// be1 without the VIPs on its loopback: it would drop every packet
	// sent to it. The data-path probes see it; the direct probe does not.
	setVIPs(t, l, l.Backends[1], false)
	waitRules(t, l, x, dataPath, "UNHEALTHY", "(data path: ", 1)
	waitRules(t, l, x, []string{"direct4"}, "HEALTHY", "", 0, 1, 2)
	// No new connection on any encapsulation: web4 IPIP, web6 GRE, udp4
	// GUE, udp6 DIRECT.
	if on, unanswered := onEachRule(t, l, 1, 0); !allZero(on, dataPath) || !allZero(unanswered, dataPath) {
		t.Errorf("be1 without the VIP took new connections %v (TCP requests, UDP flows), unanswered %v; want none", on, unanswered)
	}

	// The VIPs back: HEALTHY, and new connections of every rule reach be1
	// again.
	setVIPs(t, l, l.Backends[1], true)
	waitRules(t, l, x, all, "HEALTHY", "", 0, 1, 2)
	waitServes(t, l, 1, 40, dataPath...)

	// be2 without its decapsulation: the tunnelled rules' probes die in its
	// kernel; DIRECT needs none.
	if err := l.Backends[2].StopDecap(); err != nil {
		t.Fatal(err)
	}
	waitRules(t, l, x, []string{"web4", "web6", "udp4"}, "UNHEALTHY", "(data path: ", 2)
	waitRules(t, l, x, []string{"udp6", "direct4"}, "HEALTHY", "", 0, 1, 2)
	tunnelled := []string{"web4", "web6", "udp4"}
	if on, unanswered := onEachRule(t, l, 2, 80); !allZero(on, tunnelled) || on["udp6"] == 0 || !allZero(unanswered, dataPath) {
		t.Errorf("be2 without decapsulation took new connections %v (TCP requests, UDP flows), unanswered %v; want none but DIRECT's (udp6)", on, unanswered)
	}
	if err := l.Backends[2].StartDecap(); err != nil {
		t.Fatal(err)
	}
	waitRules(t, l, x, all, "HEALTHY", "", 0, 1, 2)
	waitServes(t, l, 2, 120, dataPath...)

	// A hand-over: the successor opens a path of its own (the next slot)
	// while the running daemon probes on, and the predecessor removes its
	// path when it leaves.
	marks, tuns := probeHost(t, l)
	if len(marks) != 2 || len(tuns) != 1 {
		t.Fatalf("before the restart: rules %v, TUNs %v, want one slot's", marks, tuns)
	}
	res, err := restartXLB(t, x, "restart")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("successor pid %d", res.PID)
	testutil.WaitFor(t, 20*time.Second, "the predecessor's probe path gone, the successor's in place", func() (bool, string) {
		m, tu := probeHost(t, l)
		return len(m) == 2 && len(tu) == 1 && m[0] != marks[0] && tu[0] != tuns[0], fmt.Sprint(m, tu)
	})
	setVIPs(t, l, l.Backends[0], false)
	waitRules(t, l, x, dataPath, "UNHEALTHY", "(data path: ", 0)
	setVIPs(t, l, l.Backends[0], true)
	waitRules(t, l, x, all, "HEALTHY", "", 0, 1, 2)

	// A crash of the successor: the kernel removes its TUN (and the routes
	// through it); its rules stay, pointing at an empty table, until the
	// next daemon starts and removes them.
	afterHandOver, _ := probeHost(t, l)
	if err := syscall.Kill(res.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the crashed daemon's TUN gone, its rules left", func() (bool, string) {
		m, tu := probeHost(t, l)
		return len(m) == 2 && len(tu) == 0, fmt.Sprint(m, tu)
	})
	// Its TUN can go before its control socket does: the next daemon
	// found the socket still accepting (TUN gone, process still exiting).
	t.Logf("the crashed daemon exited %v after its TUN was gone", waitExited(t, res.PID, 20*time.Second, "the crashed daemon exited").Round(time.Millisecond))
	x2 := xlbRun(t, l, dir, cfg)
	waitRules(t, l, x2, all, "HEALTHY", "", 0, 1, 2)
	if m, tu := probeHost(t, l); len(m) != 2 || len(tu) != 1 || m[0] == afterHandOver[0] {
		t.Errorf("after the crash and a start: rules %v, TUNs %v; want the new daemon's slot only (the crashed one's %v removed)", m, tu, afterHandOver)
	}
	if err := x2.Stop(); err != nil {
		t.Fatal(err)
	}
	if m, tu := probeHost(t, l); len(m) != 0 || len(tu) != 0 {
		t.Errorf("after a stop: rules %v, TUNs %v left", m, tu)
	}
}
