package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wwwService is a valid backend service file. Its lines are:
//
//	1 session_affinity = "CLIENT_IP"
//	2 connection_draining_timeout = "30s"
//	3 [health_check]
//	4 type = "HTTP"
//	5 port = 8080
//	6 [[group]]
//	7 name = "a"
//	8 backends = ["2001:db8:1::10", "2001:db8:1::11"]
var wwwService = lines(
	`session_affinity = "CLIENT_IP"`,
	`connection_draining_timeout = "30s"`,
	`[health_check]`,
	`type = "HTTP"`,
	`port = 8080`,
	`[[group]]`,
	`name = "a"`,
	`backends = ["2001:db8:1::10", "2001:db8:1::11"]`,
)

// serviceRule is a rule file naming a backend service; its lines are
// 1 name, 2 vip, 3 protocol, 4 ports, 5 backend_service.
func serviceRule(name, vip, protocol, service string) string {
	return lines(
		`name = "`+name+`"`,
		`vip = "`+vip+`"`,
		`protocol = "`+protocol+`"`,
		`ports = ["443"]`,
		`backend_service = "`+service+`"`,
	)
}

// Backend services (docs/design.md#backend-services): what a service
// file gives the rules that name it, and every refusal with
// file:line:key.
func TestBackendServices(t *testing.T) {
	www4 := serviceRule("www4", "203.0.113.31", "TCP", "www")
	www6 := serviceRule("www6", "2001:db8::31", "TCP", "www")
	for _, tc := range []struct {
		name  string
		files map[string]string
		errs  []string
		warns []string // those that name a service or backend_service
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "an IPv4 and an IPv6 rule share one service",
			files: map[string]string{
				"services.d/www.toml": wwwService,
				"rules.d/www4.toml":   www4,
				"rules.d/www6.toml":   www6,
				"rules.d/web.toml":    webRule,
			},
			check: func(t *testing.T, cfg *Config) {
				if len(cfg.Services) != 1 {
					t.Fatalf("Services = %+v, want www", cfg.Services)
				}
				s := cfg.Service("www")
				if s == nil || s.File != "services.d/www.toml" || !reflect.DeepEqual(s.Rules, []string{"www4", "www6"}) {
					t.Fatalf("Service(www) = %+v", s)
				}
				for _, name := range []string{"www4", "www6"} {
					r := cfg.Rule(name)
					if r.Service != "www" || r.ServiceName() != "www" {
						t.Errorf("%s: Service %q ServiceName %q, want www", name, r.Service, r.ServiceName())
					}
					if r.SessionAffinity != AffinityClientIP || r.ConnectionDrainingTimeout != 30*time.Second ||
						r.HealthCheck.Type != HealthHTTP || r.HealthCheck.Port != 8080 {
						t.Errorf("%s does not have the service's keys: %+v", name, r)
					}
					// IPv6 backends carry the IPv4 VIP too (IPv4 in IPv6).
					if got := addrs(r); !reflect.DeepEqual(got, []string{"2001:db8:1::10", "2001:db8:1::11"}) {
						t.Errorf("%s backends %v", name, got)
					}
				}
				if web := cfg.Rule("web"); web.Service != "" || web.ServiceName() != "web" || cfg.Service("web") != nil {
					t.Errorf("a rule with its own backends: Service %q ServiceName %q", web.Service, web.ServiceName())
				}
				if got := len(cfg.RulesOf("www")); got != 2 {
					t.Errorf("RulesOf(www) has %d rules, want 2", got)
				}
			},
		},
		{
			name: "a service with backends of both families serves each family from its own",
			files: map[string]string{
				"services.d/www.toml": strings.Replace(wwwService, `["2001:db8:1::10", "2001:db8:1::11"]`, `["2001:db8:1::10", "10.0.1.10"]`, 1),
				"rules.d/www4.toml":   www4,
				"rules.d/www6.toml":   www6,
			},
			check: func(t *testing.T, cfg *Config) {
				if got := addrs(cfg.Rule("www4")); !reflect.DeepEqual(got, []string{"10.0.1.10"}) {
					t.Errorf("www4 backends %v, want the IPv4 one", got)
				}
				if got := addrs(cfg.Rule("www6")); !reflect.DeepEqual(got, []string{"2001:db8:1::10"}) {
					t.Errorf("www6 backends %v, want the IPv6 one", got)
				}
			},
		},
		{
			name: "a rule with both a service and its own keys",
			files: map[string]string{
				"services.d/www.toml": wwwService,
				"rules.d/www4.toml": www4 + lines(
					`session_affinity = "NONE"`, // 6: a key after a table would be the table's
					`[health_check]`,
					`type = "TCP"`,
					`[[group]]`,
					`backends = ["10.0.1.10"]`,
				),
			},
			errs: []string{
				`rules.d/www4.toml:6: session_affinity: the rule names backend service "www" (backend_service = "www"): set session_affinity in the service's file, which every rule naming it shares`,
				`rules.d/www4.toml:7: health_check: the rule names backend service "www" (backend_service = "www"): set health_check in the service's file, which every rule naming it shares`,
				`rules.d/www4.toml:9: group: the rule names backend service "www" (backend_service = "www"): set group in the service's file, which every rule naming it shares`,
			},
		},
		{
			name: "an unknown service, and a bad key in another service, at once",
			files: map[string]string{
				"services.d/www.toml":   wwwService,
				"services.d/other.toml": lines(`vip = "203.0.113.9"`, `session_affinity = "CLIENT"`) + strings.SplitN(wwwService, "\n", 3)[2],
				"rules.d/www4.toml":     serviceRule("www4", "203.0.113.31", "TCP", "ww"),
				"rules.d/www6.toml":     www6,
			},
			errs: []string{
				`rules.d/www4.toml:5: backend_service: no backend service "ww" in services.d (did you mean "www"?)`,
				`services.d/other.toml:1: vip: belongs to a forwarding rule: a backend service has no vip; the rule files of rules_dir that name it (backend_service = "other") carry it`,
				`services.d/other.toml:2: session_affinity: "CLIENT" is not one of NONE, CLIENT_IP_PORT_PROTO, CLIENT_IP_PROTO, CLIENT_IP`,
			},
			warns: []string{
				`services.d/other.toml: name: no rule names backend service "other" (backend_service = "other" in a file of rules.d): it serves nothing`,
			},
		},
		{
			name:  "services_dir absent",
			files: map[string]string{"rules.d/www4.toml": www4},
			errs:  []string{`rules.d/www4.toml:5: backend_service: no backend service "www": services_dir services.d does not exist`},
		},
		{
			name: "an IPv6 rule and only IPv4 backends",
			files: map[string]string{
				"services.d/www.toml": strings.Replace(wwwService, `["2001:db8:1::10", "2001:db8:1::11"]`, `["10.0.1.10"]`, 1),
				"rules.d/www6.toml":   www6,
			},
			errs: []string{`services.d/www.toml:8: group[0].backends[0]: 10.0.1.10 is IPv4 but rule "www6" (rules.d/www6.toml) has the VIP 2001:db8::31, which is IPv6: no encapsulation carries IPv6 inside IPv4`},
		},
		{
			name: "two services of one name, and a service named as a rule with its own backends",
			files: map[string]string{
				"services.d/www.toml":  wwwService,
				"services.d/www2.toml": lines(`name = "www"`) + wwwService,
				"services.d/web.toml":  wwwService,
				"services.d/www6.toml": wwwService,
				"rules.d/www6.toml":    www6,
				"rules.d/web.toml":     webRule,
			},
			errs: []string{
				`services.d/web.toml: name: "web" is also the name of rule "web" (rules.d/web.toml), which carries its own backends and so is a backend service of that name`,
				`services.d/www2.toml:1: name: "www" is also the name of services.d/www.toml`,
				`services.d/www6.toml: name: "www6" is also the name of rule "www6" (rules.d/www6.toml), which names backend service "www": the CLI takes either name (--rule) and would not know which`,
			},
			warns: []string{
				`services.d/web.toml: name: no rule names backend service "web" (backend_service = "web" in a file of rules.d): it serves nothing`,
				`services.d/www6.toml: name: no rule names backend service "www6" (backend_service = "www6" in a file of rules.d): it serves nothing`,
			},
		},
		{
			name: "the service's source ranges need a prefix of each rule's family",
			files: map[string]string{
				"services.d/www.toml": lines(`source_ranges = ["2001:db8::/32"]`) + wwwService,
				"rules.d/www4.toml":   www4,
				"rules.d/www6.toml":   www6,
			},
			errs: []string{`services.d/www.toml:1: source_ranges: no IPv4 prefix: rule "www4" (rules.d/www4.toml), whose VIP 203.0.113.31 is IPv4, takes this list and would admit no client (or write source_ranges in the rule)`},
		},
		{
			name: "a rule's own source ranges win over its service's",
			files: map[string]string{
				"services.d/www.toml": lines(`source_ranges = ["2001:db8::/32"]`) + wwwService,
				"rules.d/www4.toml":   lines(`source_ranges = ["198.51.100.0/24"]`) + www4,
				"rules.d/www6.toml":   www6,
			},
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Rule("www4").SourceRanges; len(got) != 1 || got[0] != netip.MustParsePrefix("198.51.100.0/24") {
					t.Errorf("www4 source ranges %v", got)
				}
				if got := cfg.Rule("www6").SourceRanges; len(got) != 1 || got[0] != netip.MustParsePrefix("2001:db8::/32") {
					t.Errorf("www6 source ranges %v", got)
				}
			},
		},
		{
			name: "fragment warnings go where the key is",
			files: map[string]string{
				"services.d/www.toml": wwwService,
				"rules.d/www4.toml":   serviceRule("www4", "203.0.113.31", "UDP", "www"),
			},
			warns: []string{
				`services.d/www.toml: connection_tracking.tracking_mode: UDP rule "www4" (rules.d/www4.toml) not fragment-safe: use ports = "ALL", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true (PER_CONNECTION tracks unfragmented datagrams by 5-tuple)`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, warns := loadFiles(t, tc.files)
			if !reflect.DeepEqual(errs, tc.errs) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tc.errs, "\n"))
			}
			var ws []string
			for _, w := range warns {
				if strings.HasPrefix(w, "services.d/") || strings.Contains(w, "service") {
					ws = append(ws, w)
				}
			}
			if !reflect.DeepEqual(ws, tc.warns) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(tc.warns, "\n"))
			}
			if cfg != nil && tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func addrs(r *Rule) []string {
	var out []string
	for _, gb := range r.Backends() {
		out = append(out, gb.Addr.String())
	}
	return out
}

// A rule with its own backends reads as it did before backend services:
// the rule a service file would give it is the same.
func TestInlineRuleIsItsOwnService(t *testing.T) {
	inline, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": webRule})
	if errs != nil {
		t.Fatal(errs)
	}
	svc := strings.Join(strings.Split(webRule, "\n")[3:], "\n")
	named, errs, _ := loadFiles(t, map[string]string{
		"services.d/web-svc.toml": svc,
		"rules.d/web.toml":        lines(`name = "web"`, `vip = "203.0.113.10"`, `ports = ["80"]`, `backend_service = "web-svc"`),
	})
	if errs != nil {
		t.Fatal(errs)
	}
	a, b := inline.Rules[0], named.Rules[0]
	if a.Service != "" || len(inline.Services) != 0 || b.Service != "web-svc" {
		t.Fatalf("inline Service %q (services %d), named %q", a.Service, len(inline.Services), b.Service)
	}
	a.File, b.File, b.Service = "", "", ""
	if !reflect.DeepEqual(a, b) {
		t.Errorf("a rule with its own backends differs from one naming the same service:\n%+v\n%+v", a, b)
	}
}

// A Loader reuses an unchanged service file, and a rule that names a
// changed service is not the same source even when its own file is.
func TestLoaderServices(t *testing.T) {
	path := writeConfig(t, map[string]string{
		"services.d/www.toml": wwwService,
		"rules.d/www4.toml":   serviceRule("www4", "203.0.113.31", "TCP", "www"),
		"rules.d/web.toml":    webRule,
	})
	var ld Loader
	first, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range second.Rules {
		if !second.Rules[i].SameSource(first.Rules[i]) {
			t.Errorf("rule %s: not the same source after an unchanged reload", second.Rules[i].Name)
		}
	}
	svc := filepath.Join(filepath.Dir(path), "services.d", "www.toml")
	if err := os.WriteFile(svc, []byte(strings.Replace(wwwService, `"2001:db8:1::11"`, `"2001:db8:1::12"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	third, _, err := ld.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]bool{0: true, 1: false} { // web, www4
		if got := third.Rules[i].SameSource(second.Rules[i]); got != want {
			t.Errorf("rule %s: SameSource %v after its service changed, want %v", third.Rules[i].Name, got, want)
		}
	}
	if got := addrs(third.Rule("www4")); !reflect.DeepEqual(got, []string{"2001:db8:1::10", "2001:db8:1::12"}) {
		t.Errorf("www4 backends after the reload %v", got)
	}
	plain, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := withoutSources(third); !reflect.DeepEqual(got, *plain) {
		t.Errorf("Loader's config differs from Load's:\n got %+v\nwant %+v", got, *plain)
	}
}

// The CLI's overrides are the backend service's: a drain, mark or weight
// given through any rule of a service, or the service's name, applies to
// every rule of the service, and is kept under the service's name.
func TestServiceOverrides(t *testing.T) {
	cfg, errs, _ := loadFiles(t, map[string]string{
		"services.d/www.toml": lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`) + wwwService +
			lines(`[[group]]`, `name = "b"`, `role = "failover"`, `backends = ["2001:db8:2::10"]`),
		"rules.d/www4.toml": serviceRule("www4", "203.0.113.31", "TCP", "www"),
		"rules.d/www6.toml": serviceRule("www6", "2001:db8::31", "UDP", "www"),
		"rules.d/web.toml":  webRule,
	})
	if errs != nil {
		t.Fatal(errs)
	}
	b := netip.MustParseAddr("2001:db8:1::11")
	st := &State{}
	if err := st.Drain(cfg, "www4", b, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetWeight(cfg, "www", b, 7); err != nil {
		t.Fatal(err)
	}
	if err := st.Mark(cfg, "www6", netip.MustParseAddr("2001:db8:2::10"), RolePrimary); err != nil {
		t.Fatal(err)
	}
	if len(st.Overrides) != 2 || st.Overrides[0].Rule != "www" || st.Overrides[1].Rule != "www" {
		t.Fatalf("overrides %+v, want two kept under the service www", st.Overrides)
	}
	v := Apply(cfg, st)
	if len(v.Stale) != 0 {
		t.Fatalf("stale: %v", v.Stale)
	}
	for _, rv := range v.Rules {
		if rv.Rule.Service != "www" {
			continue
		}
		for _, bv := range rv.Backends {
			switch bv.Addr.String() {
			case "2001:db8:1::11":
				if !bv.Drained || bv.DrainedSource != SourceCLI || !bv.HasWeight || bv.Weight != 7 {
					t.Errorf("rule %s: %s not drained with weight 7: %+v", rv.Rule.Name, bv.Addr, bv)
				}
			case "2001:db8:2::10":
				if bv.Role != RolePrimary || bv.RoleSource != SourceCLI {
					t.Errorf("rule %s: %s not marked primary: %+v", rv.Rule.Name, bv.Addr, bv)
				}
			default:
				if bv.Drained || bv.RoleSource != SourceConfig {
					t.Errorf("rule %s: %s changed: %+v", rv.Rule.Name, bv.Addr, bv)
				}
			}
		}
	}
	// Undrain through the other rule ends the service's drain.
	if ok, err := st.Undrain(cfg, "www6", b); !ok || err != nil {
		t.Fatalf("undrain through www6: %v %v", ok, err)
	}
	if o := st.find("www", b); o == nil || o.Drained {
		t.Errorf("after the undrain: %+v", o)
	}
	// Refusals name the service.
	if err := st.Drain(cfg, "www4", b10, time.Now()); err == nil || err.Error() != `drain backend: backend service "www" has no backend 10.0.1.10` {
		t.Errorf("drain of another rule's backend: %v", err)
	}
	if err := st.Drain(cfg, "nope", b, time.Now()); err == nil || err.Error() != `drain backend: no rule or backend service "nope"` {
		t.Errorf("drain of an unknown name: %v", err)
	}
	// An override kept under a rule's name before the rule named a
	// service says where its overrides are now.
	old := &State{Overrides: []Override{{Rule: "www4", Backend: b, Drained: true}}, index: []int{-1}}
	if v := Apply(cfg, old); len(v.Stale) != 1 || !strings.Contains(v.Stale[0].Message, `rule "www4" now uses backend service "www"`) {
		t.Errorf("stale override under the rule's name: %v", v.Stale)
	}
}
