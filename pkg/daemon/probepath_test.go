package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
)

// TestDataPathHost: a data-path check's default Host names the VIP it
// probes (with the port unless it is the scheme's); a Host the operator
// set, and direct checks, are left alone.
func TestDataPathHost(t *testing.T) {
	vip4, vip6 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("fd00:203:113::10")
	for _, tc := range []struct {
		vip   netip.Addr
		path  config.ProbePath
		check health.Check
		want  string
	}{
		{vip4, config.ProbeDataPath, health.Check{Kind: health.HTTP, Port: 80}, "203.0.113.10"},
		{vip4, config.ProbeDataPath, health.Check{Kind: health.HTTP, Port: 8080}, "203.0.113.10:8080"},
		{vip6, config.ProbeDataPath, health.Check{Kind: health.HTTPS, Port: 443}, "[fd00:203:113::10]"},
		{vip6, config.ProbeDataPath, health.Check{Kind: health.HTTP2, Port: 443, TLS: true}, "[fd00:203:113::10]"},
		{vip6, config.ProbeDataPath, health.Check{Kind: health.HTTP2, Port: 443}, "[fd00:203:113::10]:443"},
		{vip4, config.ProbeDataPath, health.Check{Kind: health.HTTP, Port: 80, Host: "www.example.com"}, "www.example.com"},
		{vip4, config.ProbeDirect, health.Check{Kind: health.HTTP, Port: 80}, ""},
	} {
		r := &config.Rule{VIP: tc.vip, HealthCheck: config.HealthCheck{Path: tc.path}}
		c := tc.check
		dataPathHost(r, &c)
		if c.Host != tc.want {
			t.Errorf("%s %s %s:%d: Host %q, want %q", tc.path, tc.vip, c.Kind, c.Port, c.Host, tc.want)
		}
	}
}

// TestDirectByDefault: the rules an operator is told about are the checked
// ones that probe directly while xlb.toml says nothing.
func TestDirectByDefault(t *testing.T) {
	cfg := &config.Config{Rules: []*config.Rule{
		{Name: "web", HealthCheck: config.HealthCheck{Type: config.HealthHTTP}},
		{Name: "dns", HealthCheck: config.HealthCheck{Type: config.HealthUDP, Path: config.ProbeDataPath}},
		{Name: "none", HealthCheck: config.HealthCheck{Type: config.HealthNone}},
	}}
	if got := directByDefault(cfg); !reflect.DeepEqual(got, []string{"web"}) {
		t.Errorf("got %v, want [web]", got)
	}
	cfg.HealthCheckPathSet = true
	if got := directByDefault(cfg); got != nil {
		t.Errorf("with health_check_path set: %v", got)
	}
}

// TestProbeRoute: a data-path target's route is its backend's template in
// the published snapshot, with the rule's VIP and the hash seed; a backend
// without a template says why; a direct rule's target is dialled directly.
func TestProbeRoute(t *testing.T) {
	be1, be2 := netip.MustParseAddr("198.18.1.100"), netip.MustParseAddr("198.18.1.101")
	tm, err := encap.NewTemplate(encap.Spec{Kind: encap.IPIP, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("198.18.0.2"), Dst: be1})
	if err != nil {
		t.Fatal(err)
	}
	snap := &dataplane.Snapshot{Seed: 0x1ab5eed, Rules: []*dataplane.Rule{{Name: "web", Present: true, Backends: []dataplane.Backend{
		{Present: true, Template: tm, Addr: be1.As16(), Name: be1.String()},
		{Present: true, Addr: be2.As16(), Name: be2.String()},
	}}}}
	d := &daemon{dataPath: newDataPathProbes()}
	d.dataPath.routes.Store(&probeRoutes{snap: snap, rules: map[string]probeRule{
		"web": {slot: 0, vip: netip.MustParseAddr("203.0.113.10"), noHop: map[netip.Addr]error{be2: errors.New("no next hop: FAILED")}},
	}})
	close(d.dataPath.ready)

	r, err := d.probeRoute(health.Key{Rule: "web", Backend: be1})
	if err != nil || r.Template != tm || r.VIP != netip.MustParseAddr("203.0.113.10") || r.Seed != 0x1ab5eed {
		t.Errorf("be1: %+v, %v", r, err)
	}
	if _, err := d.probeRoute(health.Key{Rule: "web", Backend: be2}); err == nil || err.Error() != "no next hop: FAILED" {
		t.Errorf("be2: %v, want the reason it has no template", err)
	}
	if _, err := d.probeRoute(health.Key{Rule: "web", Backend: netip.MustParseAddr("198.18.1.9")}); err == nil {
		t.Error("a backend not in the snapshot has a route")
	}

	// A direct rule's probe is the appliance's own socket to backend:port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.dialProbe(ctx, "tcp", health.Key{Rule: "api", Backend: netip.MustParseAddr("127.0.0.1")}, netip.MustParseAddrPort(ln.Addr().String()))
	if err != nil {
		t.Fatalf("direct: %v", err)
	}
	c.Close()
	// A data-path rule without an open path fails, saying so.
	if _, err := d.dialProbe(ctx, "tcp", health.Key{Rule: "web", Backend: be1}, netip.AddrPortFrom(be1, 80)); err == nil || !strings.Contains(err.Error(), "data path unavailable") {
		t.Errorf("data path not open: %v", err)
	}
}

// dataPathRoutes is a daemon without a data plane whose rules all probe
// through the data path (the path itself is not opened), a snapshot's
// rules for them, each backend without a template, and the computed list
// of a publication that computed them all.
func dataPathRoutes(rules, backends int) (*daemon, []*dataplane.Rule, []computed) {
	d := &daemon{dataPath: newDataPathProbes(), cfg: &config.Config{HealthCheckPathSet: true}, view: &config.View{}, rules: map[string]*ruleRuntime{}}
	d.dataPath.lastTry = time.Now() // the path is not opened: routes alone are under test
	var snapRules []*dataplane.Rule
	var all []computed
	for i := range rules {
		name := fmt.Sprintf("r%04d", i)
		d.view.Rules = append(d.view.Rules, config.RuleView{Rule: &config.Rule{Name: name, VIP: netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}),
			HealthCheck: config.HealthCheck{Type: config.HealthTCP, Path: config.ProbeDataPath}}})
		d.rules[name] = &ruleRuntime{slot: uint16(i)}
		r := &dataplane.Rule{Name: name, Present: true}
		for j := range backends {
			a := netip.AddrFrom4([4]byte{198, 18, byte(i), byte(j + 1)})
			r.Backends = append(r.Backends, dataplane.Backend{Present: true, Addr: a.As16(), Name: a.String()}) // no template: each has a reason
		}
		snapRules = append(snapRules, r)
		all = append(all, computed{status: &ruleStatus{Name: name}})
	}
	return d, snapRules, all
}

// BenchmarkProbeRoutes: publishing the data-path routes at 1000 rules x
// 100 backends after a publication that computed one rule, and the
// reference, one that computed every rule (every publication walked every
// rule's backends before).
func BenchmarkProbeRoutes(b *testing.B) {
	d, snapRules, all := dataPathRoutes(1000, 100)
	snap := &dataplane.Snapshot{Rules: snapRules}
	d.publishProbeRoutes(snap, all)
	one := all[500:501]
	for _, bc := range []struct {
		name string
		done []computed
	}{{"one-rule", one}, {"every-rule", all}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.publishProbeRoutes(snap, bc.done)
			}
		})
	}
}

// TestProbeRoutesFollowComputedRules: a publication walks the backends of
// the data-path rules it computed and keeps every other rule's route from
// the publication before; a rule computed again gets a fresh route.
func TestProbeRoutesFollowComputedRules(t *testing.T) {
	const rules, backends = 50, 20
	d, snapRules, all := dataPathRoutes(rules, backends)
	snap := &dataplane.Snapshot{Rules: snapRules}
	d.publishProbeRoutes(snap, all)
	if d.dataPath.walked != rules {
		t.Fatalf("first publication walked %d rules, want %d", d.dataPath.walked, rules)
	}
	first := d.dataPath.routes.Load()

	// One rule computed again (a health verdict, a drain).
	next := &dataplane.Snapshot{Rules: slices.Clone(snapRules)}
	changed := *snapRules[7]
	next.Rules[7] = &changed
	d.publishProbeRoutes(next, []computed{{status: &ruleStatus{Name: "r0007"}}})
	if got := d.dataPath.walked - rules; got != 1 {
		t.Errorf("a publication computing one rule walked %d rules' backends", got)
	}
	pr := d.dataPath.routes.Load()
	if pr.snap != next || len(pr.rules) != rules {
		t.Fatalf("routes of %d rules for the new snapshot, want %d", len(pr.rules), rules)
	}
	for name, r := range pr.rules {
		same := reflect.ValueOf(r.noHop).Pointer() == reflect.ValueOf(first.rules[name].noHop).Pointer()
		if same == (name == "r0007") {
			t.Errorf("rule %s: route kept %v, want kept only for rules not computed", name, same)
		}
		if len(r.noHop) != backends {
			t.Errorf("rule %s: %d backends without a template, want %d", name, len(r.noHop), backends)
		}
	}
	if _, err := d.probeRoute(health.Key{Rule: "r0003", Backend: netip.AddrFrom4([4]byte{198, 18, 3, 5})}); err == nil || !strings.Contains(err.Error(), "not resolved yet") {
		t.Errorf("a kept route: %v, want its reason", err)
	}
}
