package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// serviceRules are the rules of the lab's backend service www: TCP on the
// HTTP port (web4, web6) and UDP on the echo port (udp4, udp6), one of
// each per VIP family.
var serviceRules = []string{"udp4", "udp6", "web4", "web6"}

// writeServiceConfig writes the lab's web4, web6, udp4 and udp6 rules (the
// UDP ones on the echo port only) as four rules naming one backend service
// www (services.d/www.toml) whose backends are the lab backends' IPv6
// tunnel addresses, so the IPv4 VIP reaches them IPv4 inside IPv6, whose
// HTTP check probes through the data path, and whose source_ranges admit
// the client addresses but the last of each family (admitted). It returns
// xlb.toml's path.
func writeServiceConfig(t *testing.T, l *lab.Lab, dir string) string {
	t.Helper()
	udp := func(name string) lab.Rule {
		r := rule(l, name, "")
		r.Ports = fmt.Sprintf(`["%d"]`, l.Opts.UDPPort)
		return r
	}
	cfg, err := l.WriteConfig(dir, []lab.Rule{rule(l, "web4", ""), rule(l, "web6", ""), udp("udp4"), udp("udp6")})
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, "rules.d", name+".toml"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	web6 := read("web6")
	// The service: web6's tables ([encap], [health_check], [[group]]).
	service := web6[strings.Index(web6, "\n[")+1:]
	service = strings.Replace(service, "[health_check]\n", "[health_check]\npath = \"DATA_PATH\"\n", 1)
	service = sourceRangesTOML(append(admitted(l, 4), admitted(l, 6)...)) + service
	os.MkdirAll(filepath.Join(dir, "services.d"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "services.d", "www.toml"), []byte(service), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each rule keeps its top-level keys and names the service.
	for _, name := range serviceRules {
		text := read(name)
		text = text[:strings.Index(text, "\n[")+1] + "backend_service = \"www\"\n"
		if err := os.WriteFile(filepath.Join(dir, "rules.d", name+".toml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// admitted are the client addresses of family that the service's
// source_ranges admit: all but the last.
func admitted(l *lab.Lab, family int) []netip.Addr {
	all := clientsOf(l, family)
	return all[:len(all)-1]
}

// tcpOn opens a TCP connection from every admitted client address of
// family to the VIP's HTTP port and counts the backends that answered, by
// index; errs counts the connections nobody answered.
func tcpOn(t *testing.T, l *lab.Lab, family int) (per []int, errs int) {
	t.Helper()
	per = make([]int, len(l.Backends))
	for _, src := range admitted(l, family) {
		k, err := dialVIP(l, src, vipOf(l, family))
		if err != nil {
			errs++
			continue
		}
		if b := k.on(); b >= 0 {
			per[b]++
		} else {
			errs++
		}
		k.c.Close()
	}
	return per, errs
}

// udpOn opens a UDP flow (a new socket, so a new connection) from every
// admitted client address of family to the VIP's echo port and counts the
// backends that answered, by index; errs counts the flows nobody answered.
func udpOn(t *testing.T, l *lab.Lab, family int) (per []int, errs int) {
	t.Helper()
	per = make([]int, len(l.Backends))
	dst := netip.AddrPortFrom(vipOf(l, family), l.Opts.UDPPort)
	for _, src := range admitted(l, family) {
		f := openUDPFlow(t, l, src, dst)
		if b := f.who(16); b >= 0 {
			per[b]++
		} else {
			errs++
		}
		f.c.Close()
	}
	return per, errs
}

// onlyOnCounts is onlyOn for tcpOn's and udpOn's counts.
func onlyOnCounts(per []int, errs int, idx ...int) bool {
	return onlyOn(lab.DriveResult{PerBackend: per, Errors: errs}, idx...)
}

// serviceGoesTo checks that new TCP connections and new UDP flows of both
// families, to all four rules of the service, land on the backends idx
// only, each of them taking some.
func serviceGoesTo(t *testing.T, l *lab.Lab, when string, idx ...int) {
	t.Helper()
	for _, fam := range []int{4, 6} {
		if per, errs := tcpOn(t, l, fam); !onlyOnCounts(per, errs, idx...) {
			t.Errorf("%s: TCP over IPv%d: %v, %d unanswered, want answers from be%v only", when, fam, per, errs, idx)
		}
		if per, errs := udpOn(t, l, fam); !onlyOnCounts(per, errs, idx...) {
			t.Errorf("%s: UDP over IPv%d: %v, %d unanswered, want answers from be%v only", when, fam, per, errs, idx)
		}
	}
}

// One backend service behind four rules, TCP and UDP over an IPv4 and an
// IPv6 VIP (docs/design.md#backend-services; the rules' part of
// docs/design.md#rules-and-vips), on real packets: TCP connections and UDP
// flows to every rule reach the same backends; each backend is probed once
// for the four rules, through the data path (the probe goes to the first
// IPv6 rule's VIP, udp6's: the service's HTTP check, whatever the rule's
// protocol), counted at the backend; the four rules build the same table;
// status, metrics and lookup name the service; one drain by the service's
// name takes the backend out of all four and an undrain through one rule
// brings it back; a backend failing its check turns UNHEALTHY in all four
// at once, and the event, the log line, the health detail and the metrics
// name the service and its rules. The service's source_ranges refuse a
// client of each family on all four rules, counted.
func TestWireBackendService(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 2, ClientAddrs: 40})
	dir := t.TempDir()
	x := xlbRun(t, l, dir, writeServiceConfig(t, l, dir))
	for _, r := range serviceRules {
		waitHealth(t, l, x, r, "HEALTHY", 0, 1)
	}
	probes := func() (n, toVIP []uint64) {
		for _, be := range l.Backends {
			st := be.Stats()
			n, toVIP = append(n, st.HealthRequests), append(toVIP, st.HealthToVIP)
		}
		return n, toVIP
	}
	probes0, _ := probes()
	t0 := time.Now()
	serviceGoesTo(t, l, "before the drain", 0, 1)
	// The service's source_ranges hold for its four rules: the last client
	// address of each family gets nothing, TCP or UDP, and is counted.
	refusedBefore := x.status(t).Counters.Drops["source-range"]
	var refusals sync.WaitGroup
	for _, fam := range []int{4, 6} {
		src := clientsOf(l, fam)[len(clientsOf(l, fam))-1]
		refusals.Add(2)
		go func() {
			defer refusals.Done()
			if !refusedTCP(l, src, vipOf(l, fam)) {
				t.Errorf("TCP from %s, outside the service's source_ranges, was answered", src)
			}
		}()
		go func() {
			defer refusals.Done()
			f := openUDPFlow(t, l, src, netip.AddrPortFrom(vipOf(l, fam), l.Opts.UDPPort))
			if b := f.who(16); b >= 0 {
				t.Errorf("UDP from %s, outside the service's source_ranges, reached be%d", src, b)
			}
		}()
	}
	refusals.Wait()
	if n := x.status(t).Counters.Drops["source-range"] - refusedBefore; n < 4 {
		t.Errorf("%d source-range drops for a SYN and a datagram of each family, want at least 4", n)
	}

	st := x.status(t)
	digest := ruleStatus(t, st, "web4").TableDigest
	for _, name := range serviceRules {
		r := ruleStatus(t, st, name)
		if r.Service != "www" {
			t.Errorf("status: %s backend_service %q, want www", name, r.Service)
		}
		if digest == "" || r.TableDigest != digest {
			t.Errorf("table digest of %s %q, web4's %q: one service's rules build the same table", name, r.TableDigest, digest)
		}
	}
	for _, be := range l.Backends {
		a := be.Tunnel6.String()
		ref := backendOf(st, "udp6", a).CheckInfo
		for _, name := range serviceRules {
			c := backendOf(st, name, a).CheckInfo
			if c.LastCheck == nil || ref.LastCheck == nil || !c.LastCheck.Equal(*ref.LastCheck) || c.ProbeRule != "udp6" {
				t.Errorf("%s of %s: last check %v (udp6's %v), probe rule %q, want udp6's one probe", a, name, c.LastCheck, ref.LastCheck, c.ProbeRule)
			}
		}
	}
	out, errOut, err := xlbCtl(t, x.Socket(), 1, "status")
	for _, name := range serviceRules {
		if err != nil || !strings.Contains(out, "rule "+name+" (backend service www)") {
			t.Errorf("xlb status does not name the service of %s: %v %s\n%s", name, err, errOut, out)
		}
	}
	body := scrape(t, l)
	for _, r := range serviceRules {
		if want := `xlb_rule_backend_service{backend_service="www",rule="` + r + `"} 1`; !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
		if want := `xlb_backend_healthy{backend="` + l.Backends[0].Tunnel6.String() + `",backend_service="www",rule="` + r + `"} 1`; !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	src := l.ClientAddrs4[0].String() + ":40000"
	out, errOut, err = xlbCtl(t, x.Socket(), 1, "lookup", "--rule", "udp4", "--src", src)
	if err != nil || !regexp.MustCompile(`rule\s+udp4 \(backend service www\)`).MatchString(out) {
		t.Errorf("xlb lookup does not name the service: %v %s\n%s", err, errOut, out)
	}
	if _, errOut, err := xlbCtl(t, x.Socket(), 1, "lookup", "--rule", "www", "--src", src); err == nil || !strings.Contains(errOut+err.Error(), `"www" is a backend service: name one of its rules (udp4, udp6, web4, web6)`) {
		t.Errorf("xlb lookup --rule www: %v %s", err, errOut)
	}

	// One drain, by the service's name, drains be0 in all four.
	be0 := l.Backends[0].Tunnel6.String()
	out, errOut, err = xlbCtl(t, x.Socket(), 2, "backend", "drain", "--rule", "www", be0)
	if err != nil || !strings.Contains(out, "backend service www (rules udp4, udp6, web4, web6)") {
		t.Fatalf("backend drain --rule www %s: %v %s\n%s", be0, err, errOut, out)
	}
	st = x.status(t)
	for _, r := range serviceRules {
		if b := backendOf(st, r, be0); b.Admin != "DRAINED" || b.AdminSource != "cli" {
			t.Errorf("rule %s: %s admin %s (%s), want DRAINED by the cli", r, be0, b.Admin, b.AdminSource)
		}
	}
	serviceGoesTo(t, l, "be0 drained", 1)
	// An undrain through one rule undrains it everywhere.
	if out, errOut, err := xlbCtl(t, x.Socket(), 2, "backend", "undrain", "--rule", "udp4", be0); err != nil {
		t.Fatalf("backend undrain --rule udp4: %v %s\n%s", err, errOut, out)
	}
	serviceGoesTo(t, l, "be0 undrained", 0, 1)

	// be0 fails its check: the one probe turns it UNHEALTHY in all four
	// rules, and back.
	l.Backends[0].SetHealthy(false)
	for _, r := range serviceRules {
		waitHealth(t, l, x, r, "UNHEALTHY", 0)
	}
	st = x.status(t)
	for _, r := range serviceRules {
		if d := backendOf(st, r, be0).HealthDetail; !strings.Contains(d, "backend service www, probed through rule udp6: ") {
			t.Errorf("rule %s: health detail of %s %q does not name the service's probe", r, be0, d)
		}
	}
	serviceGoesTo(t, l, "be0 unhealthy", 1)
	l.Backends[0].SetHealthy(true)
	for _, r := range serviceRules {
		waitHealth(t, l, x, r, "HEALTHY", 0)
	}
	st = x.status(t)
	var seen []string
	for _, e := range st.Events {
		if e.Kind == "health" && e.Backend == be0 && e.From != "" {
			seen = append(seen, e.From+"→"+e.To)
			if e.Service != "www" || e.Rule != "udp6" || strings.Join(e.Rules, ",") != strings.Join(serviceRules, ",") {
				t.Errorf("health event %+v: want backend service www, rules %v, probed through udp6", e, serviceRules)
			}
		}
	}
	if strings.Join(seen, " ") != "HEALTHY→UNHEALTHY UNHEALTHY→HEALTHY" {
		t.Errorf("health events of %s: %v, want one HEALTHY→UNHEALTHY and one back (one probe, one state)", be0, seen)
	}
	for _, h := range []string{"UNHEALTHY", "HEALTHY"} {
		want := "backend_service=www rules=" + strings.Join(serviceRules, ",") + " probe_rule=udp6 backend=" + be0 + " health=" + h + " "
		if !strings.Contains(x.log.String(), want) {
			t.Errorf("the log has no health line with %q", want)
		}
	}
	out, _, _ = xlbCtl(t, x.Socket(), 1, "status")
	if want := "service www (udp4, udp6, web4, web6)  health UNHEALTHY → HEALTHY " + be0 + " probed through udp6"; !strings.Contains(out, want) {
		t.Errorf("xlb status's events lack %q:\n%s", want, out)
	}
	serviceGoesTo(t, l, "be0 healthy again", 0, 1)

	// One probe per backend for the four rules over the whole test: at most
	// one an interval (1 s, less 10 % jitter) since t0, plus one a late
	// probe lets its successor catch up, where four probers would send
	// four. Every probe came to a VIP: through the data path.
	probes1, toVIP := probes()
	elapsed := time.Since(t0)
	for i := range l.Backends {
		n, most := probes1[i]-probes0[i], uint64(elapsed/(900*time.Millisecond))+2
		if n == 0 || n > most {
			t.Errorf("be%d answered %d health checks in %v, want 1 to %d: one probe per backend for the service's four rules", i, n, elapsed.Round(time.Millisecond), most)
		}
		if toVIP[i] != probes1[i] {
			t.Errorf("be%d: %d of its %d health checks came to a VIP, want all: the service's check probes through the data path", i, toVIP[i], probes1[i])
		}
		t.Logf("be%d: %d health checks in %v", i, n, elapsed.Round(time.Millisecond))
	}
}

// The rules of a backend service name it in xlb status and xlb top (the
// lab test above reads status; this one the rendering of both).
func TestRenderNamesService(t *testing.T) {
	st := renderStatus()
	st.Rules[0].Service = "www"
	var status, top strings.Builder
	printStatus(&status, st, renderNow)
	printTop(&top, st, topView{Sort: "name", Interval: time.Second}, renderNow, 0, 0)
	for what, out := range map[string]string{"status": status.String(), "top": top.String()} {
		if !strings.Contains(out, st.Rules[0].Name+" (") || !strings.Contains(out, "service www)") {
			t.Errorf("%s does not name the service www beside rule %s:\n%s", what, st.Rules[0].Name, out)
		}
	}
}
