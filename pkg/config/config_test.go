package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const mainOK = `interface = "eth0"
hash_seed = "0x1"
`

// lines joins its arguments as the lines of a file, so that a test can
// count them: the first argument is line 1.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// webRule is a valid TCP rule; tests add keys before it (top-level keys) or
// after it (tables). Its lines are:
//
//	1 name = "web"
//	2 vip = "203.0.113.10"
//	3 ports = ["80"]
//	4 [health_check]
//	5 type = "TCP"
//	6 [[group]]
//	7 name = "a"
//	8 backends = ["10.0.1.10", "10.0.1.11"]
var webRule = lines(
	`name = "web"`,
	`vip = "203.0.113.10"`,
	`ports = ["80"]`,
	`[health_check]`,
	`type = "TCP"`,
	`[[group]]`,
	`name = "a"`,
	`backends = ["10.0.1.10", "10.0.1.11"]`,
)

// writeConfig writes files (relative names) under a new directory, adding
// xlb.toml (mainOK) and rules.d/ when missing, and returns xlb.toml's path.
func writeConfig(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if _, ok := files["xlb.toml"]; !ok {
		files["xlb.toml"] = mainOK
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "xlb.toml")
}

func issueStrings(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, want *config.Error: %v", err, err)
	}
	out := make([]string, len(ce.Issues))
	for i, is := range ce.Issues {
		out[i] = is.String()
	}
	return out
}

func warningStrings(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

func loadFiles(t *testing.T, files map[string]string) (*Config, []string, []string) {
	t.Helper()
	cfg, ws, err := Load(writeConfig(t, files))
	errs := issueStrings(t, err)
	if err != nil && cfg != nil {
		t.Fatalf("Load returned a Config together with an error")
	}
	if err == nil && cfg == nil {
		t.Fatalf("Load returned neither a Config nor an error")
	}
	return cfg, errs, warningStrings(ws)
}

func TestIssueFormat(t *testing.T) {
	for _, tc := range []struct {
		in   Issue
		want string
	}{
		{Issue{"rules.d/web.toml", 14, "failover.ratio", "1.5 is outside [0, 1]"}, "rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]"},
		{Issue{"rules.d/web.toml", 0, "vip", "missing"}, "rules.d/web.toml: vip: missing"},
		{Issue{"xlb.toml", 3, "", "bare keys cannot contain '!'"}, "xlb.toml:3: bare keys cannot contain '!'"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestBriefExample reproduces, exactly, the error message the first brief
// gave as its example of file:line: key: message.
func TestBriefExample(t *testing.T) {
	rule := webRule + lines(
		`[[group]]`,                // 9
		`name = "b"`,               // 10
		`role = "failover"`,        // 11
		`backends = ["10.0.2.10"]`, // 12
		`[failover]`,               // 13
		`ratio = 1.5`,              // 14
	)
	_, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": rule})
	want := []string{"rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]"}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
}

// TestValidation has one failing example per rule, with its exact message.
func TestValidation(t *testing.T) {
	failoverRule := webRule + lines(
		`[[group]]`,                // 9
		`name = "b"`,               // 10
		`role = "failover"`,        // 11
		`backends = ["10.0.2.10"]`, // 12
	)
	// groups returns n [[group]] tables of a role, 4 lines each, with
	// backends numbered from base.
	groups := func(role string, n, base int) string {
		var b strings.Builder
		for i := range n {
			k := base + i
			fmt.Fprintf(&b, "[[group]]\nname = \"%s%d\"\nrole = %q\nbackends = [\"10.0.%d.%d\"]\n", role, i, role, k/200, k%200+1)
		}
		return b.String()
	}
	head := lines(`vip = "203.0.113.10"`, `ports = ["80"]`, `[health_check]`, `type = "TCP"`)
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unknown key", map[string]string{"rules.d/web.toml": lines(`colour = "blue"`) + webRule},
			[]string{"rules.d/web.toml:1: colour: unknown key"}},
		{"unknown key with suggestion", map[string]string{"rules.d/web.toml": failoverRule + lines(`[failover]`, `ratoi = 0.5`)},
			[]string{"rules.d/web.toml:14: failover.ratoi: unknown key (did you mean ratio?)"}},
		{"unknown key wrong case", map[string]string{"rules.d/web.toml": lines(`VIP = "203.0.113.11"`) + webRule},
			[]string{"rules.d/web.toml:1: VIP: unknown key (did you mean vip?)"}},
		{"unknown key in group", map[string]string{"rules.d/web.toml": failoverRule + lines(`weight = 3`)},
			[]string{"rules.d/web.toml:13: group[1].weight: unknown key"}},
		{"unknown key in backend", map[string]string{"rules.d/web.toml": lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`) + strings.Replace(webRule, `"10.0.1.11"`, `{address = "10.0.1.11", wieght = 3}`, 1)},
			[]string{
				"rules.d/web.toml:1: locality_lb_policy: WEIGHTED_MAGLEV needs an HTTP, HTTPS or HTTP2 health check (weights come from its X-Load-Balancing-Endpoint-Weight header); health_check.type is TCP",
				"rules.d/web.toml:9: group[0].backends[1].wieght: unknown key (did you mean weight?)",
			}},
		{"unknown key in xlb.toml", map[string]string{"xlb.toml": lines(`interfaces = "eth0"`, `hash_seed = "1"`), "rules.d/web.toml": webRule},
			[]string{"xlb.toml: interface: missing (the one network interface xlb receives and sends on, e.g. \"eth0\")",
				"xlb.toml:1: interfaces: unknown key (did you mean interface?)"}},
		{"bad enum", map[string]string{"rules.d/web.toml": lines(`session_affinity = "CLIENT"`) + webRule},
			[]string{`rules.d/web.toml:1: session_affinity: "CLIENT" is not one of NONE, CLIENT_IP_PORT_PROTO, CLIENT_IP_PROTO, CLIENT_IP`}},
		{"enum case", map[string]string{"rules.d/web.toml": lines(`protocol = "tcp"`) + webRule},
			[]string{`rules.d/web.toml:1: protocol: "tcp" is not allowed (write TCP; names are case-sensitive)`}},
		{"bad enums everywhere", map[string]string{
			"xlb.toml":         mainOK + lines(`xdp_mode = "fast"`),
			"rules.d/web.toml": webRule + lines(`role = "backup"`, `[encap]`, `type = "VXLAN"`, `[connection_tracking]`, `tracking_mode = "PER_FLOW"`, `persistence_on_unhealthy = "SOMETIMES"`)},
			[]string{
				`xlb.toml:3: xdp_mode: "fast" is not one of auto, native, generic`,
				`rules.d/web.toml:9: group[0].role: "backup" is not one of primary, failover`,
				`rules.d/web.toml:11: encap.type: "VXLAN" is not one of IPIP, GUE, GRE, DIRECT`,
				`rules.d/web.toml:13: connection_tracking.tracking_mode: "PER_FLOW" is not one of PER_CONNECTION, PER_SESSION`,
				`rules.d/web.toml:14: connection_tracking.persistence_on_unhealthy: "SOMETIMES" is not one of DEFAULT_FOR_PROTOCOL, NEVER_PERSIST, ALWAYS_PERSIST`,
			}},
		{"wrong type", map[string]string{"rules.d/web.toml": lines(`fragment_tracking = "yes"`) + webRule + lines(`capacity_scaler = "full"`)},
			[]string{
				`rules.d/web.toml:1: fragment_tracking: want a boolean (true or false), got a string`,
				`rules.d/web.toml:10: group[0].capacity_scaler: want a number, got a string`,
			}},
		{"always persist with per session", map[string]string{"rules.d/web.toml": webRule + lines(`[connection_tracking]`, `tracking_mode = "PER_SESSION"`, `persistence_on_unhealthy = "ALWAYS_PERSIST"`)},
			[]string{"rules.d/web.toml:11: connection_tracking.persistence_on_unhealthy: ALWAYS_PERSIST is invalid with tracking_mode = PER_SESSION (use DEFAULT_FOR_PROTOCOL or NEVER_PERSIST, or PER_CONNECTION)"}},
		{"failover without primary", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `name = "a"`, `name = "a"`+"\n"+`role = "failover"`, 1)},
			[]string{"rules.d/web.toml:8: group[0].role: failover groups need at least one group with role primary"}},
		{"failover without failover group", map[string]string{"rules.d/web.toml": webRule + lines(`[failover]`, `drop_traffic_if_unhealthy = true`)},
			[]string{"rules.d/web.toml:9: failover: set, but no group has role failover (add one, or remove [failover])"}},
		{"51 primary groups", map[string]string{"rules.d/web.toml": head + groups("primary", 51, 0)},
			[]string{"rules.d/web.toml:205: group[50]: more than 50 groups have role primary"}},
		{"51 failover groups", map[string]string{"rules.d/web.toml": head + groups("primary", 1, 0) + groups("failover", 51, 1)},
			[]string{"rules.d/web.toml:209: group[51]: more than 50 groups have role failover"}},
		{"weights without http check", map[string]string{"rules.d/web.toml": lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`) + webRule},
			[]string{"rules.d/web.toml:1: locality_lb_policy: WEIGHTED_MAGLEV needs an HTTP, HTTPS or HTTP2 health check (weights come from its X-Load-Balancing-Endpoint-Weight header); health_check.type is TCP"}},
		{"static weight without weighted maglev", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `"10.0.1.11"`, `{address = "10.0.1.11", weight = 3}`, 1)},
			[]string{`rules.d/web.toml:8: group[0].backends[1].weight: a static weight needs locality_lb_policy = "WEIGHTED_MAGLEV"`}},
		{"weight out of range", map[string]string{"rules.d/web.toml": lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`) + strings.Replace(strings.Replace(webRule, `"TCP"`, `"HTTP"`, 1), `"10.0.1.11"`, `{address = "10.0.1.11", weight = 1001}`, 1)},
			[]string{`rules.d/web.toml:9: group[0].backends[1].weight: 1001 is outside [0, 1000]`}},
		{"draining timeout too long", map[string]string{"rules.d/web.toml": lines(`connection_draining_timeout = "3601s"`) + webRule},
			[]string{"rules.d/web.toml:1: connection_draining_timeout: 3601s is outside [0s, 3600s]"}},
		{"draining timeout negative", map[string]string{"rules.d/web.toml": lines(`connection_draining_timeout = "-1s"`) + webRule},
			[]string{"rules.d/web.toml:1: connection_draining_timeout: -1s is outside [0s, 3600s]"}},
		{"bad durations", map[string]string{"rules.d/web.toml": webRule + lines(`[connection_tracking]`, `idle_timeout = "60"`, `[failover]`, `failback_delay = "5 s"`)},
			[]string{
				`rules.d/web.toml:10: connection_tracking.idle_timeout: "60" is not a duration (write a number with a unit, like "60s" or "10m")`,
				`rules.d/web.toml:11: failover: set, but no group has role failover (add one, or remove [failover])`,
				`rules.d/web.toml:12: failover.failback_delay: "5 s" is not a duration (write a number with a unit, like "60s" or "10m")`,
			}},
		{"health check timeouts", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `type = "TCP"`, lines(`type = "TCP"`, `interval = "2s"`, `timeout = "3s"`, `healthy_threshold = 11`), 1)},
			[]string{
				"rules.d/web.toml:7: health_check.timeout: 3s is longer than interval 2s",
				"rules.d/web.toml:8: health_check.healthy_threshold: 11 is outside [1, 10]",
			}},
		{"health check type missing", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `type = "TCP"`, `port = 8080`, 1)},
			[]string{"rules.d/web.toml:4: health_check.type: missing (choose HTTP, HTTPS, HTTP2, TCP, SSL, GRPC, UDP or NONE)"}},
		{"overlapping ports", map[string]string{
			"rules.d/web.toml":  webRule,
			"rules.d/web2.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"web2"`, 1), `["80"]`, `["443", "70-90"]`, 1)},
			[]string{`rules.d/web2.toml:3: ports: 70-90,443 overlaps rule "web" (rules.d/web.toml) on 203.0.113.10 TCP (port 80)`}},
		{"all ports overlap", map[string]string{
			"rules.d/a.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"a"`, 1), `["80"]`, `"ALL"`, 1),
			"rules.d/b.toml": strings.Replace(webRule, `"web"`, `"b"`, 1)},
			[]string{`rules.d/b.toml:3: ports: 80 overlaps rule "a" (rules.d/a.toml) on 203.0.113.10 TCP (port 80)`}},
		{"two l3 default rules on one vip", map[string]string{
			"rules.d/a.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"a"`, 1), `ports = ["80"]`, `protocol = "L3_DEFAULT"`, 1),
			"rules.d/b.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"b"`, 1), `ports = ["80"]`, lines(`protocol = "L3_DEFAULT"`, `fragment_tracking = true`), 1)},
			[]string{`rules.d/b.toml:3: protocol: L3_DEFAULT on 203.0.113.10 overlaps rule "a" (rules.d/a.toml), also L3_DEFAULT: a VIP has at most one`}},
		{"failover_health_threshold", map[string]string{"rules.d/web.toml": webRule + lines(`failover_health_threshold = 70`, `[failover]`, `failover_health_threshold = 70`)},
			[]string{
				`rules.d/web.toml:9: group[0].failover_health_threshold: not supported: ` + whyNoHealthThreshold,
				`rules.d/web.toml:10: failover: set, but no group has role failover (add one, or remove [failover])`,
				`rules.d/web.toml:11: failover.failover_health_threshold: not supported: ` + whyNoHealthThreshold,
			}},
		{"tcp and udp on one port do not overlap", map[string]string{
			"rules.d/a.toml": strings.Replace(webRule, `"web"`, `"a"`, 1),
			"rules.d/b.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"b"`, 1), `ports = ["80"]`, lines(`ports = ["80"]`, `protocol = "UDP"`, `fragment_tracking = true`), 1)},
			nil},
		{"ipv6 vips compare by value", map[string]string{
			"rules.d/a.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"a"`, 1), `vip = "203.0.113.10"`, `vip = "2001:db8::1"`, 1) + lines(`[encap]`, `type = "GRE"`),
			"rules.d/b.toml": strings.Replace(strings.Replace(strings.Replace(webRule, `"web"`, `"b"`, 1), `vip = "203.0.113.10"`, `vip = "2001:0db8:0::1"`, 1), `"10.0.1.10", "10.0.1.11"`, `"2001:db8::10"`, 1)},
			[]string{
				`rules.d/a.toml:8: group[0].backends[0]: 10.0.1.10 is IPv4 but the VIP 2001:db8::1 is IPv6: no encapsulation carries IPv6 inside IPv4`,
				`rules.d/a.toml:8: group[0].backends[1]: 10.0.1.11 is IPv4 but the VIP 2001:db8::1 is IPv6: no encapsulation carries IPv6 inside IPv4`,
				`rules.d/b.toml:3: ports: 80 overlaps rule "a" (rules.d/a.toml) on 2001:db8::1 TCP (port 80)`,
			}},
		{"all overlaps all", map[string]string{
			"rules.d/a.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"a"`, 1), `["80"]`, `"ALL"`, 1),
			"rules.d/b.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"b"`, 1), `["80"]`, `"ALL"`, 1)},
			[]string{`rules.d/b.toml:3: ports: ALL overlaps rule "a" (rules.d/a.toml) on 203.0.113.10 TCP (port 1)`}},
		{"table size not prime", map[string]string{"xlb.toml": mainOK + lines(`maglev_table_size = 65536`), "rules.d/web.toml": webRule},
			[]string{"xlb.toml:3: maglev_table_size: 65536 is not prime (try 65537)"}},
		{"worker_nice out of range", map[string]string{"xlb.toml": mainOK + lines(`worker_nice = -21`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: worker_nice: -21 is outside [-20, 19]`}},
		{"busy_poll too long", map[string]string{"xlb.toml": mainOK + lines(`busy_poll = "2ms"`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: busy_poll: 2ms is outside [0s, 1ms]`}},
		{"busy_poll_budget zero", map[string]string{"xlb.toml": mainOK + lines(`busy_poll_budget = 0`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: busy_poll_budget: 0 is outside [1, 1024]`}},
		{"pin_dir relative", map[string]string{"xlb.toml": mainOK + lines(`pin_dir = "bpf/xlb"`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: pin_dir: "bpf/xlb" is not an absolute path (a directory on a bpf filesystem)`}},
		{"table size too small", map[string]string{"xlb.toml": mainOK + lines(`maglev_table_size = 199`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: maglev_table_size: 199 is smaller than 100 × 2 backends of rule "web" (200); use a prime ≥ 200, e.g. 211`}},
		{"default table size too small", map[string]string{"rules.d/web.toml": head + groups("primary", 50, 0) + groups("failover", 50, 50)},
			nil}, // 100 backends × 100 = 10000 ≤ 65537: fine
		{"duplicate rule names", map[string]string{"rules.d/web.toml": webRule, "rules.d/web2.toml": strings.Replace(webRule, `"203.0.113.10"`, `"203.0.113.11"`, 1)},
			[]string{`rules.d/web2.toml:1: name: "web" is also the name of rules.d/web.toml`}},
		{"three rules of one name and two VIPs", map[string]string{
			"rules.d/a.toml": webRule,
			"rules.d/b.toml": strings.Replace(webRule, `"203.0.113.10"`, `"203.0.113.9"`, 1),
			"rules.d/c.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"c"`, 1), `["80"]`, `"ALL"`, 1),
			"rules.d/d.toml": strings.Replace(strings.Replace(webRule, `"web"`, `"d"`, 1), `["80"]`, `["70-90"]`, 1)},
			[]string{
				`rules.d/b.toml:1: name: "web" is also the name of rules.d/a.toml`,
				`rules.d/c.toml:3: ports: ALL overlaps rule "web" (rules.d/a.toml) on 203.0.113.10 TCP (port 80)`,
				`rules.d/d.toml:3: ports: 70-90 overlaps rule "web" (rules.d/a.toml) on 203.0.113.10 TCP (port 80)`,
				`rules.d/d.toml:3: ports: 70-90 overlaps rule "c" (rules.d/c.toml) on 203.0.113.10 TCP (port 70)`,
			}},
		{"duplicate backends", map[string]string{"rules.d/web.toml": webRule + lines(`[[group]]`, `name = "b"`, `backends = ["10.0.1.12", "10.0.1.10"]`)},
			[]string{`rules.d/web.toml:11: group[1].backends[1]: 10.0.1.10 is already a backend of this rule (group[0].backends[0])`}},
		{"duplicate group names", map[string]string{"rules.d/web.toml": webRule + lines(`[[group]]`, `name = "a"`, `backends = []`)},
			[]string{`rules.d/web.toml:10: group[1].name: "a" is also the name of group[0]`}},
		{"bad addresses", map[string]string{"rules.d/web.toml": strings.Replace(strings.Replace(webRule, `"203.0.113.10"`, `"203.0.113.300"`, 1), `"10.0.1.11"`, `"10.0.1", "224.0.0.1", "fe80::1%eth0", "127.0.0.1"`, 1)},
			[]string{
				`rules.d/web.toml:2: vip: "203.0.113.300" is not an IPv4 or IPv6 address`,
				`rules.d/web.toml:8: group[0].backends[1]: "10.0.1" is not an IPv4 or IPv6 address`,
				`rules.d/web.toml:8: group[0].backends[2]: "224.0.0.1" is a multicast address`,
				`rules.d/web.toml:8: group[0].backends[3]: "fe80::1%eth0" must not carry a zone`,
				`rules.d/web.toml:8: group[0].backends[4]: "127.0.0.1" is a loopback address`,
			}},
		{"ipv4 backend for ipv6 vip", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `"203.0.113.10"`, `"2001:db8::10"`, 1)},
			[]string{
				`rules.d/web.toml:8: group[0].backends[0]: 10.0.1.10 is IPv4 but the VIP 2001:db8::10 is IPv6: no encapsulation carries IPv6 inside IPv4`,
				`rules.d/web.toml:8: group[0].backends[1]: 10.0.1.11 is IPv4 but the VIP 2001:db8::10 is IPv6: no encapsulation carries IPv6 inside IPv4`,
			}},
		{"direct needs same family", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `"10.0.1.11"`, `"2001:db8::11"`, 1) + lines(`[encap]`, `type = "DIRECT"`)},
			[]string{`rules.d/web.toml:8: group[0].backends[1]: 2001:db8::11 is IPv6 but the VIP 203.0.113.10 is IPv4: encap DIRECT needs backends of the VIP's family (IPIP, GUE and GRE carry IPv4 in IPv6)`}},
		{"ipip 4in6 is fine", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `"10.0.1.11"`, `"2001:db8::11"`, 1)}, nil},
		{"bad hash seed", map[string]string{"xlb.toml": lines(`interface = "eth0"`, `hash_seed = "0xnope"`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:2: hash_seed: "0xnope" is not a 64-bit number (write hex like "0x5eed" or decimal)`}},
		{"hash seed too big", map[string]string{"xlb.toml": lines(`interface = "eth0"`, `hash_seed = "0x1_0000_0000_0000_0000"`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:2: hash_seed: "0x1_0000_0000_0000_0000" is not a 64-bit number (write hex like "0x5eed" or decimal)`}},
		{"bad ports", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `["80"]`, `["0", "90-80", "ALL", "http", "8000-8099", "8080", 70000]`, 1)},
			[]string{
				`rules.d/web.toml:3: ports[0]: "0" is outside [1, 65535]`,
				`rules.d/web.toml:3: ports[1]: "90-80": the range is reversed`,
				`rules.d/web.toml:3: ports[2]: "ALL" cannot be part of a list: write ports = "ALL"`,
				`rules.d/web.toml:3: ports[3]: "http" is not a port or a range like "8000-8099"`,
				`rules.d/web.toml:3: ports[5]: 8080 overlaps ports[4] (8000-8099)`,
				`rules.d/web.toml:3: ports[6]: "70000" is outside [1, 65535]`,
			}},
		{"missing ports", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `ports = ["80"]`, ``, 1)},
			[]string{`rules.d/web.toml: ports: missing (a list like ["80", "8000-8099"], or "ALL")`}},
		{"l3 default with a port list", map[string]string{"rules.d/web.toml": lines(`protocol = "L3_DEFAULT"`, `session_affinity = "CLIENT_IP"`, `fragment_tracking = true`) + webRule},
			[]string{`rules.d/web.toml:6: ports: an L3_DEFAULT rule matches every port: write ports = "ALL" or leave ports out`}},
		{"no groups", map[string]string{"rules.d/web.toml": lines(`vip = "203.0.113.10"`, `ports = ["80"]`, `[health_check]`, `type = "NONE"`)},
			[]string{`rules.d/web.toml: group: missing: a rule needs at least one [[group]] with backends`}},
		{"empty group list", map[string]string{"rules.d/web.toml": lines(`vip = "203.0.113.10"`, `ports = ["80"]`, `group = []`, `[health_check]`, `type = "NONE"`)},
			[]string{`rules.d/web.toml:3: group: empty: a rule needs at least one [[group]] with backends`}},
		// One message, one suggestion ("try 101" and "e.g. 211" once
		// contradicted each other).
		{"table size bad twice", map[string]string{"xlb.toml": mainOK + lines(`maglev_table_size = 100`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: maglev_table_size: 100 is not prime and smaller than 100 × 2 backends of rule "web" (200); use a prime ≥ 200, e.g. 211`}},
		{"table size not prime", map[string]string{"xlb.toml": mainOK + lines(`maglev_table_size = 1000`), "rules.d/web.toml": webRule},
			[]string{`xlb.toml:3: maglev_table_size: 1000 is not prime (try 1009)`}},
		// The syntax error alone: no rules_dir error it did not cause, and
		// the rule files are still checked.
		{"syntax error in xlb.toml", map[string]string{"xlb.toml": mainOK + lines(`queues = [0, 1`), "rules.d/web.toml": lines(`colour = "blue"`) + webRule},
			[]string{
				"xlb.toml:3: expected a comma (',') or array terminator (']'), but got end of file",
				"rules.d/web.toml:1: colour: unknown key",
			}},
		{"syntax error in xlb.toml, other rules_dir", map[string]string{"xlb.toml": lines(`rules_dir = "rules"`, `interface = "eth0"`, `bad line`), "rules/web.toml": lines(`colour = "blue"`) + webRule},
			[]string{
				"xlb.toml:3: expected '.' or '=', but got 'l' instead",
				"rules/web.toml:1: colour: unknown key",
			}},
		// VIPs that are no VIP (docs/design.md#rules-and-vips).
		{"vip loopback", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `vip = "203.0.113.10"`, `vip = "127.0.0.1"`, 1)},
			[]string{`rules.d/web.toml:2: vip: "127.0.0.1" is a loopback address: a VIP is reached over the network`}},
		{"vip loopback v6", map[string]string{"rules.d/web.toml": strings.Replace(strings.Replace(webRule, `vip = "203.0.113.10"`, `vip = "::1"`, 1), `["10.0.1.10", "10.0.1.11"]`, `["2001:db8::1"]`, 1)},
			[]string{`rules.d/web.toml:2: vip: "::1" is a loopback address: a VIP is reached over the network`}},
		{"vip broadcast", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `vip = "203.0.113.10"`, `vip = "255.255.255.255"`, 1)},
			[]string{`rules.d/web.toml:2: vip: "255.255.255.255" is the broadcast address`}},
		{"vip multicast mapped", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `vip = "203.0.113.10"`, `vip = "::ffff:224.0.0.5"`, 1)},
			[]string{`rules.d/web.toml:2: vip: "::ffff:224.0.0.5" is a multicast address`}},
		// An integer beyond 64 bits: reported with its key, and the file's
		// other errors still found (item 22).
		{"integers out of range", map[string]string{
			"xlb.toml":         mainOK + lines(`maglev_table_size = 99999999999999999999`, `queues = "bogus"`, `[conntrack]`, `max_entries = -99999999999999999999`),
			"rules.d/web.toml": lines(`idle = 1`) + strings.Replace(webRule, `type = "TCP"`, `type = "TCP"`+"\n"+`port = 123456789012345678901`, 1)},
			[]string{
				"xlb.toml:3: maglev_table_size: 99999999999999999999 does not fit in a 64-bit integer",
				`xlb.toml:4: queues: "bogus" is not "all", a number of queues or a list of queue ids`,
				"xlb.toml:6: conntrack.max_entries: -99999999999999999999 does not fit in a 64-bit integer",
				"rules.d/web.toml:1: idle: unknown key",
				"rules.d/web.toml:7: health_check.port: 123456789012345678901 does not fit in a 64-bit integer",
			}},
		// The key of the backend as written, whatever entries before it
		// were rejected (item 22: the index was off by the skipped ones).
		{"backend is the VIP after a bad one", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `["10.0.1.10", "10.0.1.11"]`, `["bad", "10.0.1.10", "203.0.113.10"]`, 1)},
			[]string{
				`rules.d/web.toml:8: group[0].backends[0]: "bad" is not an IPv4 or IPv6 address`,
				`rules.d/web.toml:8: group[0].backends[2]: 203.0.113.10 is the VIP itself`,
			}},
		{"no backends", map[string]string{"rules.d/web.toml": strings.Replace(webRule, `["10.0.1.10", "10.0.1.11"]`, `[]`, 1)},
			[]string{`rules.d/web.toml:6: group: the rule has no backends`}},
		{"syntax error", map[string]string{"rules.d/web.toml": webRule + lines(`name = "dup"`), "rules.d/zz.toml": lines(`vip = `)},
			[]string{
				`rules.d/web.toml:9: Key 'group.name' has already been defined.`,
				`rules.d/zz.toml:1: expected value but found '\n' instead`,
			}},
		{"state file in rules dir", map[string]string{"xlb.toml": mainOK + lines(`state_file = "rules.d/state.toml"`), "rules.d/web.toml": webRule},
			[]string{"xlb.toml:3: state_file: %DIR%/rules.d/state.toml is inside rules_dir and would be read as a rule file"}},
		{"missing rules dir", map[string]string{"xlb.toml": mainOK + lines(`rules_dir = "nowhere"`)},
			[]string{"xlb.toml:3: rules_dir: cannot read %DIR%/nowhere: no such file or directory"}},
		{"queues", map[string]string{"xlb.toml": mainOK + lines(`queues = [0, 1, 1, -2]`), "rules.d/web.toml": webRule},
			[]string{"xlb.toml:3: queues[2]: queue 1 is listed twice", "xlb.toml:3: queues[3]: -2 is outside [0, 1023]"}},
		{"zonal affinity without zones", map[string]string{"rules.d/web.toml": webRule + lines(`[zonal_affinity]`, `mode = "ZONAL_AFFINITY_STAY_WITHIN_ZONE"`, `[zonal_affinity.clients]`, `z1 = ["198.51.100.0/24", "198.51.100.1/24"]`, `z2 = ["198.51.100.0/24"]`)},
			[]string{
				`rules.d/web.toml:10: zonal_affinity.mode: ZONAL_AFFINITY_STAY_WITHIN_ZONE needs groups with a zone`,
				`rules.d/web.toml:12: zonal_affinity.clients.z1[1]: "198.51.100.1/24" has host bits set (write 198.51.100.0/24)`,
				`rules.d/web.toml:13: zonal_affinity.clients.z2[0]: 198.51.100.0/24 is already mapped to zone "z1"`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.files)
			cfg, _, err := Load(path)
			got := issueStrings(t, err)
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.ReplaceAll(w, "%DIR%", filepath.Dir(path))
			}
			if len(want) == 0 {
				want = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if (err == nil) != (cfg != nil) {
				t.Errorf("Load returned cfg=%v err=%v: want exactly one", cfg != nil, err)
			}
		})
	}
}

// TestManyErrorsTogether checks that one Load reports the problems of
// every file at once, sorted by file and line, and returns no Config.
func TestManyErrorsTogether(t *testing.T) {
	cfg, errs, _ := loadFiles(t, map[string]string{
		"xlb.toml":        lines(`interface = "eth0"`, `hash_seed = "x"`, `maglev_table_size = 100`),
		"rules.d/b.toml":  strings.Replace(strings.Replace(webRule, `"web"`, `"b"`, 1), `"203.0.113.10"`, `"bad"`, 1) + lines(`[failover]`, `ratio = 2`),
		"rules.d/a.toml":  lines(`protocol = "SCTP"`) + webRule,
		"rules.d/c.toml~": "not a rule file: ignored",
		"rules.d/.x.toml": "hidden: ignored",
	})
	if cfg != nil {
		t.Fatal("Load returned a Config for a bad configuration")
	}
	want := []string{
		`xlb.toml:2: hash_seed: "x" is not a 64-bit number (write hex like "0x5eed" or decimal)`,
		`xlb.toml:3: maglev_table_size: 100 is not prime and smaller than 100 × 2 backends of rule "web" (200); use a prime ≥ 200, e.g. 211`,
		`rules.d/a.toml:1: protocol: "SCTP" is not one of TCP, UDP, L3_DEFAULT`,
		`rules.d/b.toml:2: vip: "bad" is not an IPv4 or IPv6 address`,
		`rules.d/b.toml:9: failover: set, but no group has role failover (add one, or remove [failover])`,
		`rules.d/b.toml:10: failover.ratio: 2 is outside [0, 1]`,
	}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
	err := &Error{Issues: []Issue{{"a", 1, "k", "m1"}, {"b", 2, "", "m2"}}}
	if got := err.Error(); got != "2 configuration errors:\na:1: k: m1\nb:2: m2" {
		t.Errorf("Error() = %q", got)
	}
}

func TestFragmentWarnings(t *testing.T) {
	udp := func(top ...string) string {
		return lines(top...) + strings.Replace(webRule, `ports = ["80"]`, `protocol = "UDP"`, 1)
	}
	for _, tc := range []struct {
		name string
		rule string
		want []string
	}{
		{"udp defaults", udp(`ports = ["53"]`), []string{
			`rules.d/web.toml: connection_tracking.tracking_mode: UDP rule not fragment-safe: use ports = "ALL", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true (PER_CONNECTION tracks unfragmented datagrams by 5-tuple)`,
			`rules.d/web.toml: session_affinity: UDP rule not fragment-safe: use ports = "ALL", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true (NONE hashes every fragment by 3-tuple but an unfragmented datagram by 5-tuple: one flow's large and small datagrams may reach different backends)`,
			`rules.d/web.toml:1: ports: UDP rule not fragment-safe: use ports = "ALL", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true (non-first fragments carry no ports and match only an all-ports rule)`,
		}},
		{"udp safe recipe", udp(`ports = "ALL"`, `session_affinity = "CLIENT_IP"`) + lines(`[connection_tracking]`, `tracking_mode = "PER_SESSION"`), nil},
		{"udp with fragment tracking", udp(`ports = ["53"]`, `fragment_tracking = true`), nil},
		{"l3 default per connection", lines(`protocol = "L3_DEFAULT"`, `session_affinity = "CLIENT_IP_PROTO"`) + strings.Replace(webRule, `ports = ["80"]`, ``, 1), []string{
			`rules.d/web.toml: connection_tracking.tracking_mode: L3_DEFAULT rule not fragment-safe: use ports = "ALL", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true (PER_CONNECTION tracks unfragmented datagrams by 5-tuple)`,
		}},
		{"tcp never warns", webRule, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": tc.rule})
			if errs != nil {
				t.Fatalf("unexpected errors: %v", errs)
			}
			if cfg == nil {
				t.Fatal("no Config")
			}
			if !reflect.DeepEqual(ws, tc.want) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// An L3_DEFAULT rule shares its VIP with TCP and UDP rules
// (docs/design.md#rules-and-vips): the
// specific rule takes its packets (pkg/dataplane's matcher), so nothing
// overlaps; a UDP rule with a port list gets a warning, because the
// non-first fragments of its datagrams carry no port and go to the
// L3_DEFAULT rule.
func TestL3DefaultSharesVIP(t *testing.T) {
	l3 := strings.Replace(strings.Replace(webRule, `"web"`, `"gw"`, 1), `ports = ["80"]`, lines(`protocol = "L3_DEFAULT"`, `fragment_tracking = true`), 1)
	udp := func(ports string) string {
		return strings.Replace(strings.Replace(webRule, `"web"`, `"dns"`, 1), `ports = ["80"]`, lines(`ports = `+ports, `protocol = "UDP"`, `fragment_tracking = true`), 1)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"tcp beside l3 default", map[string]string{"rules.d/a.toml": l3, "rules.d/b.toml": webRule}, nil},
		{"udp all ports beside l3 default", map[string]string{"rules.d/a.toml": udp(`"ALL"`), "rules.d/b.toml": l3}, nil},
		{"udp port list beside l3 default", map[string]string{"rules.d/a.toml": l3, "rules.d/b.toml": udp(`["53"]`)}, []string{
			`rules.d/b.toml:4: protocol: UDP rule "dns" (rules.d/b.toml) on 203.0.113.10 lists ports and L3_DEFAULT rule "gw" (rules.d/a.toml) shares the VIP: non-first fragments carry no port and go to the L3_DEFAULT rule (use ports = "ALL" for the UDP rule)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, ws := loadFiles(t, tc.files)
			if errs != nil {
				t.Fatalf("errors: %v", errs)
			}
			if len(cfg.Rules) != 2 {
				t.Fatalf("%d rules", len(cfg.Rules))
			}
			if !reflect.DeepEqual(ws, tc.want) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, errs, ws := loadFiles(t, map[string]string{
		"xlb.toml":         lines(`interface = "eth0"`),
		"rules.d/web.toml": lines(`vip = "203.0.113.10"`, `ports = ["80"]`, `[health_check]`, `type = "HTTP"`, `[[group]]`, `name = "a"`, `backends = ["10.0.1.10"]`),
	})
	if errs != nil {
		t.Fatal(errs)
	}
	wantWarn := []string{`xlb.toml: hash_seed: not set: using the public default 0x5eed lets anyone predict which backend a flow reaches; set the same secret seed on every appliance of the fleet`}
	if !reflect.DeepEqual(ws, wantWarn) {
		t.Errorf("warnings = %q, want %q", ws, wantWarn)
	}
	dir := cfg.Dir
	want := Config{
		Path: cfg.Path, Dir: dir, Interface: "eth0", Queues: Queues{All: true},
		XDPMode: XDPAuto, BindMode: BindAuto, HashSeed: 0x5eed,
		RulesDir: filepath.Join(dir, "rules.d"), ServicesDir: filepath.Join(dir, "services.d"), StateFile: "/var/lib/xlb/state.toml",
		ControlSocket: "/run/xlb/xlb.sock", MetricsListen: "127.0.0.1:9641", PinDir: "/sys/fs/bpf/xlb",
		BusyPollBudget: 64,
		Conntrack:      Conntrack{MaxEntries: 1048576, NewEntriesPerSecond: 125000, NewEntriesBurst: 31250, UnconfirmedIdle: 5 * time.Second},
		Rules: []*Rule{{
			File: "rules.d/web.toml", Name: "web",
			VIP:      netip.MustParseAddr("203.0.113.10"),
			Protocol: ProtocolTCP, Ports: Ports{Ranges: []PortRange{{80, 80}}},
			SessionAffinity: AffinityNone, LocalityLBPolicy: Maglev,
			ConnectionTracking: ConnectionTracking{TrackingMode: PerConnection, PersistenceOnUnhealthy: PersistDefaultForProtocol, IdleTimeout: 60 * time.Second},
			Failover:           Failover{Ratio: 0, DropTrafficIfUnhealthy: false, ConnectionDrainOnFailover: true, FailoverDrainTimeout: 10 * time.Minute, FailbackDelay: 0},
			HealthCheck:        HealthCheck{Type: HealthHTTP, Port: 80, RequestPath: "/", Interval: 5 * time.Second, Timeout: 5 * time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2},
			Encap:              Encap{Type: EncapIPIP, GUEPort: 6080},
			ZonalAffinity:      ZonalAffinity{Mode: ZonalDisabled},
			Groups:             []Group{{Name: "a", Role: RolePrimary, CapacityScaler: 1.0, Backends: []Backend{{Addr: netip.MustParseAddr("10.0.1.10")}}}},
		}},
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *cfg, want)
	}
}

func TestHTTPSDefaultPort(t *testing.T) {
	cfg, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": strings.Replace(webRule, `"TCP"`, `"HTTPS"`, 1)})
	if errs != nil {
		t.Fatal(errs)
	}
	if p := cfg.Rules[0].HealthCheck.Port; p != 443 {
		t.Errorf("HTTPS default port = %d, want 443", p)
	}
}

// TestExamples loads deploy/examples: no errors, and the fragment-safe UDP
// example gets no fragment warning.
func TestExamples(t *testing.T) {
	cfg, ws, err := Load("../../deploy/examples/xlb.toml")
	if err != nil {
		t.Fatalf("deploy/examples does not validate:\n%v", err)
	}
	if len(ws) != 0 {
		t.Errorf("warnings: %v", warningStrings(ws))
	}
	names := map[string]*Rule{}
	for i := range cfg.Rules {
		names[cfg.Rules[i].Name] = cfg.Rules[i]
	}
	for _, n := range []string{"web", "dns", "gateway", "api", "grpc"} {
		if names[n] == nil {
			t.Errorf("example rule %q missing", n)
		}
	}
	if r := names["dns"]; r != nil && (r.Protocol != ProtocolUDP || !r.Ports.All) {
		t.Errorf("dns example is not an all-ports UDP rule")
	}
	if r := names["dns"]; r != nil && (r.HealthCheck.Type != HealthUDP || len(r.HealthCheck.Request) != 29 || r.HealthCheck.Response != "\xbe\xef") {
		t.Errorf("dns example's health check is not a 29-byte DNS query answered with its ID: %+v", r.HealthCheck)
	}
	if r := names["gateway"]; r != nil && r.Protocol != ProtocolL3Default {
		t.Errorf("gateway example is not L3_DEFAULT")
	}
	if r := names["api"]; r != nil {
		roles := map[Role]int{}
		for _, g := range r.Groups {
			roles[g.Role]++
		}
		if r.LocalityLBPolicy != WeightedMaglev || roles[RoleFailover] == 0 {
			t.Errorf("api example is not weighted with failover")
		}
	}
}

// TestExampleDocumentsEveryKey makes sure the commented examples mention
// every key the loader knows, so the documentation cannot fall behind.
func TestExampleDocumentsEveryKey(t *testing.T) {
	var all strings.Builder
	rules, _ := filepath.Glob("../../deploy/examples/rules.d/*.toml")
	for _, p := range append([]string{"../../deploy/examples/xlb.toml"}, rules...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	text := all.String()
	for _, k := range knownKeys(t) {
		if !strings.Contains(text, k+" =") && !strings.Contains(text, "["+k+"]") && !strings.Contains(text, "."+k+"]") && !strings.Contains(text, "[["+k+"]]") && !strings.Contains(text, k+" = N") {
			t.Errorf("key %q is not documented in deploy/examples", k)
		}
	}
}

// knownKeys collects every key name the loader asks for, by reading an
// xlb.toml and a rule with an inline backend table.
func knownKeys(t *testing.T) []string {
	f := &srcFile{name: "x", is: &issues{}, asked: map[string]bool{}}
	cfg := Default()
	readMain(newTable(f, "", map[string]any{}), &cfg)
	readRule(newTable(f, "", map[string]any{
		"group": []map[string]any{{"backends": []any{map[string]any{"address": "10.0.0.1"}}}},
	}), "x")
	var out []string
	for k := range f.asked {
		out = append(out, k)
	}
	slices.Sort(out)
	if len(out) < 40 {
		t.Fatalf("only %d keys found: %v", len(out), out)
	}
	return out
}

// BenchmarkLoadExamples measures a reload of deploy/examples (control
// plane only: the packet path never touches this package).
func BenchmarkLoadExamples(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load("../../deploy/examples/xlb.toml"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDesignExample loads the two examples of docs/design.md#configuration,
// kept in testdata/design (docs/design_test.go holds them equal to the
// document): the document's own example must validate.
func TestDesignExample(t *testing.T) {
	cfg, ws, err := Load("testdata/design/xlb.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 0 {
		t.Errorf("warnings: %v", warningStrings(ws))
	}
	r := cfg.Rule("web")
	if r == nil || len(r.Groups) != 2 || r.Groups[1].Role != RoleFailover || r.HealthCheck.Port != 8080 || !r.Ports.Contains(8050) {
		t.Errorf("web rule read wrongly: %+v", r)
	}
}

// TestCheckHost: what the configuration needs from this machine (a
// missing interface once passed validate): the interface, the listed
// queues among its active ones, the control socket's group.
func TestCheckHost(t *testing.T) {
	for _, tc := range []struct {
		name, main string
		want       []string
	}{
		{"all there", lines(`interface = "lo"`, `hash_seed = "1"`, `control_socket_group = "65534"`), nil},
		{"no interface", lines(`hash_seed = "1"`, `interface = "nosuch0"`), []string{`xlb.toml:2: interface: no interface "nosuch0" on this machine (ip link lists them)`}},
		{"queue beyond the active ones", lines(`interface = "lo"`, `queues = [0, 5]`),
			[]string{"xlb.toml:2: queues: interface lo has 1 active receive queue(s), 0-0 (sysfs): queue 5 cannot be served (ethtool -L lo combined N changes them)"}},
		{"unknown group", lines(`interface = "lo"`, `control_socket_group = "no-such-group-xlb"`),
			[]string{`xlb.toml:2: control_socket_group: no group "no-such-group-xlb" on this machine (groupadd no-such-group-xlb, or a numeric id)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := Load(writeConfig(t, map[string]string{"xlb.toml": tc.main, "rules.d/web.toml": webRule}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range CheckHost(cfg) {
				got = append(got, i.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
