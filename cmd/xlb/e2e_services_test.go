package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// writeServiceConfig writes the lab's web4 and web6 rules as two rules
// naming one backend service www (services.d/www.toml) whose backends are
// the lab backends' IPv6 tunnel addresses: the IPv4 VIP reaches them IPv4
// inside IPv6. It returns xlb.toml's path.
func writeServiceConfig(t *testing.T, l *lab.Lab, dir string) string {
	t.Helper()
	cfg, err := l.WriteConfig(dir, []lab.Rule{rule(l, "web4", ""), rule(l, "web6", "")})
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
	os.MkdirAll(filepath.Join(dir, "services.d"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "services.d", "www.toml"), []byte(service), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each rule keeps its top-level keys and names the service.
	for _, name := range []string{"web4", "web6"} {
		text := read(name)
		text = text[:strings.Index(text, "\n[")+1] + "backend_service = \"www\"\n"
		if err := os.WriteFile(filepath.Join(dir, "rules.d", name+".toml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// One backend service behind an IPv4 and an IPv6 rule
// (docs/design.md#backend-services; the rules' part of
// docs/design.md#rules-and-vips), on real packets: traffic to both VIPs
// reaches the same backends; each backend is probed once for both rules
// (their status rows carry the same probe); the two rules build the same
// table; status, metrics and lookup name the service; one drain, given through
// either rule, takes the backend out of both.
func TestWireBackendService(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 2, ClientAddrs: 40})
	dir := t.TempDir()
	x := xlbRun(t, l, dir, writeServiceConfig(t, l, dir))
	for _, r := range []string{"web4", "web6"} {
		waitHealth(t, l, x, r, "HEALTHY", 0, 1)
	}
	for _, fam := range []int{4, 6} {
		if res := driveFor(t, l, 80, fam, 2*time.Second); !onlyOn(res, 0, 1) {
			t.Errorf("IPv%d before the drain: %s, want answers from be0 and be1", fam, describe(res))
		}
	}

	st := x.status(t)
	r4, r6 := ruleStatus(t, st, "web4"), ruleStatus(t, st, "web6")
	if r4.Service != "www" || r6.Service != "www" {
		t.Errorf("status: web4 backend_service %q, web6 %q, want www", r4.Service, r6.Service)
	}
	if r4.TableDigest == "" || r4.TableDigest != r6.TableDigest {
		t.Errorf("table digests web4 %q web6 %q: one service's rules build the same table", r4.TableDigest, r6.TableDigest)
	}
	for _, be := range l.Backends {
		a := be.Tunnel6.String()
		c4, c6 := backendOf(st, "web4", a).CheckInfo, backendOf(st, "web6", a).CheckInfo
		if c4.LastCheck == nil || c6.LastCheck == nil || !c4.LastCheck.Equal(*c6.LastCheck) {
			t.Errorf("%s: last check web4 %v, web6 %v: one probe serves both rules", a, c4.LastCheck, c6.LastCheck)
		}
	}
	out, errOut, err := xlbCtl(t, x.Socket(), 1, "status")
	if err != nil || !strings.Contains(out, "rule web4 (backend service www)") || !strings.Contains(out, "rule web6 (backend service www)") {
		t.Errorf("xlb status does not name the service: %v %s\n%s", err, errOut, out)
	}
	body := scrape(t, l)
	for _, r := range []string{"web4", "web6"} {
		if want := `xlb_rule_backend_service{backend_service="www",rule="` + r + `"} 1`; !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	src := l.ClientAddrs4[0].String() + ":40000"
	out, errOut, err = xlbCtl(t, x.Socket(), 1, "lookup", "--rule", "web4", "--src", src, "--syn")
	if err != nil || !regexp.MustCompile(`rule\s+web4 \(backend service www\)`).MatchString(out) {
		t.Errorf("xlb lookup does not name the service: %v %s\n%s", err, errOut, out)
	}

	if _, errOut, err := xlbCtl(t, x.Socket(), 1, "lookup", "--rule", "www", "--src", src); err == nil || !strings.Contains(errOut+err.Error(), `"www" is a backend service: name one of its rules (web4, web6)`) {
		t.Errorf("xlb lookup --rule www: %v %s", err, errOut)
	}

	// One drain, through the IPv4 rule, drains be0 in both.
	be0 := l.Backends[0].Tunnel6.String()
	out, errOut, err = xlbCtl(t, x.Socket(), 2, "backend", "drain", "--rule", "web4", be0)
	if err != nil || !strings.Contains(out, "backend service www (rules web4, web6)") {
		t.Fatalf("backend drain --rule web4 %s: %v %s\n%s", be0, err, errOut, out)
	}
	st = x.status(t)
	for _, r := range []string{"web4", "web6"} {
		if b := backendOf(st, r, be0); b.Admin != "DRAINED" || b.AdminSource != "cli" {
			t.Errorf("rule %s: %s admin %s (%s), want DRAINED by the cli", r, be0, b.Admin, b.AdminSource)
		}
	}
	for _, fam := range []int{4, 6} {
		if res := driveFor(t, l, 80, fam, 2*time.Second); !onlyOn(res, 1) {
			t.Errorf("IPv%d after draining be0: %s, want be1 only", fam, describe(res))
		}
	}
	// And the service's name undrains it everywhere.
	if out, errOut, err := xlbCtl(t, x.Socket(), 2, "backend", "undrain", "--rule", "www", be0); err != nil {
		t.Fatalf("backend undrain --rule www: %v %s\n%s", err, errOut, out)
	}
	for _, fam := range []int{4, 6} {
		if res := driveFor(t, l, 80, fam, 2*time.Second); !onlyOn(res, 0, 1) {
			t.Errorf("IPv%d after the undrain: %s, want be0 and be1", fam, fmt.Sprint(describe(res)))
		}
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
