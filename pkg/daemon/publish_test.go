package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/neigh"
)

// scaleBackend is backend j of rule i of scaleDaemon's configuration.
func scaleBackend(i, j int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(j + 1)})
}

// scaleRuleFile is rule i's file with the given backends (health NONE,
// IPIP, its own VIP).
func scaleRuleFile(i int, backends []netip.Addr) string {
	var q []string
	for _, b := range backends {
		q = append(q, fmt.Sprintf("%q", b))
	}
	return fmt.Sprintf("name = \"r%05d\"\nvip = \"198.18.%d.%d\"\nports = [\"%d\"]\n[health_check]\ntype = \"NONE\"\n[encap]\ntype = \"IPIP\"\n[[group]]\nname = \"g\"\nbackends = [%s]\n",
		i, 16+i/250, 1+i%250, 80+i/(250*16), strings.Join(q, ", "))
}

// scaleDaemon is a daemon without a data plane over n rule files of m
// backends each, loaded through a Loader as newDaemon loads them, with
// every backend's next hop known (nothing is resolved over netlink, no
// packet leaves), published once; its control goroutine serves requests
// until the test ends.
func scaleDaemon(tb testing.TB, n, m int) (*daemon, string) {
	tb.Helper()
	files := map[string]string{}
	var addrs []netip.Addr
	for i := range n {
		var bs []netip.Addr
		for j := range m {
			bs = append(bs, scaleBackend(i, j))
		}
		files[fmt.Sprintf("rules.d/r%05d.toml", i)] = scaleRuleFile(i, bs)
		for j := range m + 2 { // and the backends a test adds
			addrs = append(addrs, scaleBackend(i, j))
		}
	}
	return testDaemon(tb, files, addrs)
}

// testDaemon is scaleDaemon's daemon over the given files (relative to
// the directory of xlb.toml) with the next hops of addrs known.
func testDaemon(tb testing.TB, files map[string]string, addrs []netip.Addr) (*daemon, string) {
	tb.Helper()
	dir := tb.TempDir()
	files["xlb.toml"] = fmt.Sprintf("interface = \"lo\"\nhash_seed = \"0x5eed1ab\"\nmetrics_listen = \"\"\nstate_file = %q\ncontrol_socket = %q\n",
		filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	d, err := newDaemon(Options{ConfigPath: filepath.Join(dir, "xlb.toml"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	d.checker = health.New(health.Options{OnChange: d.onHealth})
	tb.Cleanup(d.checker.Stop)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, a := range addrs {
		d.setNextHop(nhKey{a, false}, nexthop{nh: neigh.NextHop{Backend: a, Gateway: netip.MustParseAddr("192.0.2.1"), Ifindex: 1,
			Src: netip.MustParseAddr("192.0.2.2"), SrcMAC: mac, DstMAC: mac, MTU: 1500}}, true)
	}
	if err := d.publish(); err != nil {
		tb.Fatal(err)
	}
	serveRequests(tb, d)
	return d, dir
}

// published returns the rules of the last snapshot by name.
func published(d *daemon) map[string]*dataplane.Rule {
	out := map[string]*dataplane.Rule{}
	for _, r := range d.pub.snap.Rules {
		if r.Present {
			out[r.Name] = r
		}
	}
	return out
}

// TestChangesCostWhatTheyChange: a CLI change, a health verdict and a
// reload that changes one rule file each compute that rule again and
// publish a snapshot that shares every other rule (the same pointers, so
// the same tables) with the one before; the changed rule's table shows
// the change. A reload that changes nothing computes nothing.
func TestChangesCostWhatTheyChange(t *testing.T) {
	d, dir := scaleDaemon(t, 4, 3)
	o := &ops{d: d}
	steps := []struct {
		name   string
		rule   string // the one rule that must change ("": none)
		change func() error
		check  func(r *dataplane.Rule) error
	}{
		{"cli drain", "r00001", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r00001", Backend: scaleBackend(1, 0).String()})
			return err
		}, func(r *dataplane.Rule) error {
			if _, in := r.Table.Slots(scaleBackend(1, 0).String()); in {
				return fmt.Errorf("the drained backend is still in the table")
			}
			return nil
		}},
		{"reload adding a backend", "r00002", func() error {
			bs := []netip.Addr{scaleBackend(2, 0), scaleBackend(2, 1), scaleBackend(2, 2), scaleBackend(2, 3)}
			if err := os.WriteFile(filepath.Join(dir, "rules.d", "r00002.toml"), []byte(scaleRuleFile(2, bs)), 0o644); err != nil {
				return err
			}
			return do(d, func() error { _, err := d.Reload(false); return err })
		}, func(r *dataplane.Rule) error {
			if n, in := r.Table.Slots(scaleBackend(2, 3).String()); !in || n == 0 {
				return fmt.Errorf("the added backend has no slot")
			}
			return nil
		}},
		{"reload without a change", "", func() error {
			return do(d, func() error { _, err := d.Reload(false); return err })
		}, nil},
		{"health verdict", "r00003", func() error {
			return do(d, func() error {
				d.probes[probeKey{"r00003", scaleBackend(3, 1)}] = probe{}
				d.touch("r00003")
				return d.publish()
			})
		}, nil},
	}
	for _, s := range steps {
		before := published(d)
		snapBefore := d.pub.snap
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d.pub.snap == snapBefore && s.rule != "" {
			t.Fatalf("%s: nothing published", s.name)
		}
		after := published(d)
		for name, r := range after {
			switch {
			case name == s.rule && r == before[name]:
				t.Errorf("%s: rule %s was not computed again", s.name, name)
			case name != s.rule && r != before[name]:
				t.Errorf("%s: rule %s was computed again", s.name, name)
			}
		}
		if s.check != nil {
			if err := s.check(after[s.rule]); err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
		}
		if d.pub.snap.Matcher() != snapBefore.Matcher() {
			t.Errorf("%s: the matcher was built again", s.name)
		}
	}
}

// TestParallelBuildIsSerialBuild: the rules a publication builds on
// several goroutines are the rules one goroutine builds: the same tables
// slot for slot (Placement) and digests, in the same order; and the rules
// that send to one backend the same way share its template.
func TestParallelBuildIsSerialBuild(t *testing.T) {
	// 40 rules of 20 backends each from a pool of 60: neighbours share.
	daemon := func() *daemon {
		files := map[string]string{}
		var pool []netip.Addr
		for k := range 60 {
			pool = append(pool, netip.AddrFrom4([4]byte{10, 9, 0, byte(1 + k)}))
		}
		for i := range 40 {
			var bs []netip.Addr
			for j := range 20 {
				bs = append(bs, pool[(3*i+j)%len(pool)])
			}
			files[fmt.Sprintf("rules.d/r%05d.toml", i)] = scaleRuleFile(i, bs)
		}
		d, _ := testDaemon(t, files, pool)
		return d
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	serial := daemon()
	runtime.GOMAXPROCS(4)
	parallel := daemon()
	sst, pst := serial.Status().Rules, parallel.Status().Rules
	if len(sst) != 40 || len(pst) != 40 {
		t.Fatalf("%d and %d rules published, want 40", len(sst), len(pst))
	}
	shared := 0
	templates := map[string]*encap.Template{}
	for i := range sst {
		a, b := sst[i], pst[i]
		if a.Name != b.Name || a.Digest() != b.Digest() || a.Built.Table.Placement() != b.Built.Table.Placement() || a.Built.Table.Len() != 20 {
			t.Errorf("rule %d: serial %s %s, parallel %s %s", i, a.Name, a.Digest(), b.Name, b.Digest())
		}
		for _, be := range b.Built.Backends {
			if !be.Present {
				continue
			}
			if be.Template == nil {
				t.Fatalf("rule %s: backend %s without a template", b.Name, be.Name)
			}
			if tm, ok := templates[be.Name]; ok {
				if tm != be.Template {
					t.Errorf("rule %s: backend %s has a template of its own", b.Name, be.Name)
				}
				shared++
			}
			templates[be.Name] = be.Template
		}
	}
	if shared == 0 {
		t.Error("no backend is in two rules: the test shows no sharing")
	}
}

// TestServiceChangeTouchesItsRules: a reload after a backend service's
// file changed computes again every rule that names the service and no
// other rule.
func TestServiceChangeTouchesItsRules(t *testing.T) {
	service := func(backends ...string) string {
		return "name = \"s\"\n[health_check]\ntype = \"NONE\"\n[encap]\ntype = \"IPIP\"\n[[group]]\nname = \"g\"\nbackends = [\"" + strings.Join(backends, "\", \"") + "\"]\n"
	}
	named := func(name, vip string) string {
		return fmt.Sprintf("name = %q\nvip = %q\nports = [\"80\"]\nbackend_service = \"s\"\n", name, vip)
	}
	b := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}) }
	d, dir := testDaemon(t, map[string]string{
		"services.d/s.toml": service(b(1).String(), b(2).String()),
		"rules.d/a.toml":    named("a", "198.18.16.1"),
		"rules.d/b.toml":    named("b", "198.18.16.2"),
		"rules.d/c.toml":    scaleRuleFile(3, []netip.Addr{b(1)}),
	}, []netip.Addr{b(1), b(2), b(3)})
	before := published(d)
	if err := os.WriteFile(filepath.Join(dir, "services.d", "s.toml"), []byte(service(b(1).String(), b(2).String(), b(3).String())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := do(d, func() error { _, err := d.Reload(false); return err }); err != nil {
		t.Fatal(err)
	}
	after := published(d)
	for name, r := range after {
		if changed := r != before[name]; changed != (name != "r00003") {
			t.Errorf("rule %s: computed again %v", name, changed)
		}
		if _, in := r.Table.Slots(b(3).String()); in != (name != "r00003") {
			t.Errorf("rule %s: the service's new backend in its table: %v", name, in)
		}
	}
	if len(after) != 3 {
		t.Errorf("published rules %v", after)
	}

	// A drain through one rule of the service, a drain by the service's
	// name and a verdict of the probe one rule runs for the service: each
	// moves both rules of the service, and only them.
	o := &ops{d: d}
	for _, step := range []struct {
		name   string
		change func() error
	}{
		{"drain through rule a", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "a", Backend: b(1).String()})
			return err
		}},
		{"undrain by the service's name", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionUndrain, Rule: "s", Backend: b(1).String()})
			return err
		}},
		{"a verdict of rule a's probe", func() error {
			return do(d, func() error {
				d.pendingProbes[probeKey{"a", b(2)}] = probe{weight: 7}
				if !d.applyProbes() {
					return fmt.Errorf("no verdict changed")
				}
				return d.publish()
			})
		}},
	} {
		before := published(d)
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		for name, r := range published(d) {
			if changed := r != before[name]; changed != (name != "r00003") {
				t.Errorf("%s: rule %s computed again %v", step.name, name, changed)
			}
		}
	}
}

// do runs f on d's control goroutine.
func do(d *daemon, f func() error) error {
	var err error
	if derr := d.do(context.Background(), func() { err = f() }); derr != nil {
		return derr
	}
	return err
}

// TestTableSizeFollowsBackends: without maglev_table_size, a rule's table
// size is hash.TableSizeFor of the backends its file lists, the same on
// every appliance, whatever their health; a drain does not change it.
func TestTableSizeFollowsBackends(t *testing.T) {
	d, _ := scaleDaemon(t, 2, 120)
	want, _ := hash.TableSizeFor(120)
	for name, r := range published(d) {
		if r.Table.Size() != want {
			t.Errorf("rule %s: size %d, want %d", name, r.Table.Size(), want)
		}
	}
	if d.cfg.MaglevTableSize != 0 {
		t.Fatalf("maglev_table_size %d without the key", d.cfg.MaglevTableSize)
	}
}

// BenchmarkOneBackendChange is the cost of one backend's change at N rules
// of 100 backends: a CLI drain or undrain through the control API (the
// state file written, the rule computed, a snapshot published, the
// backend's row answered), a reload after one rule file gained or lost a
// backend (the Loader's watch names that file, the only one read and
// parsed; the other rules keep their *config.Rule and view, and what
// grows with N is pointer tables and the checks across files' sorts), and
// a health verdict applied and published. The per-operation bytes of cli
// and health are the rule computed plus the snapshot's pointer table (8
// bytes a rule), the status's (8 bytes a rule) and, for cli, the view's
// (32 bytes a rule). every-rule is the reference: a publication that
// computes every rule and builds every table, as each did before.
func BenchmarkOneBackendChange(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 5000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			if testing.Short() && n > 1000 {
				b.Skip("skipped with -short: 5000 rules take a minute to set up")
			}
			d, dir := scaleDaemon(b, n, 100)
			o := &ops{d: d}
			rule, backend := fmt.Sprintf("r%05d", n/2), scaleBackend(n/2, 7).String()
			b.Run("cli", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					action := control.ActionDrain
					if i%2 == 1 {
						action = control.ActionUndrain
					}
					if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: action, Rule: rule, Backend: backend}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("reload", func(b *testing.B) {
				file := filepath.Join(dir, "rules.d", rule+".toml")
				var bs []netip.Addr
				for j := range 100 {
					bs = append(bs, scaleBackend(n/2, j))
				}
				texts := []string{scaleRuleFile(n/2, append(bs, scaleBackend(n/2, 100))), scaleRuleFile(n/2, bs)}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					if err := os.WriteFile(file, []byte(texts[i%2]), 0o644); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := do(d, func() error { _, err := d.Reload(false); return err }); err != nil {
						b.Fatal(err)
					}
				}
			})
			// The reference: every rule computed and every table built, as
			// each publication did before publications shared rules.
			b.Run("every-rule", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					err := do(d, func() error {
						d.pub.tables = hash.Tables{}
						d.touchAll()
						return d.publish()
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("health", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					err := do(d, func() error {
						d.probes[probeKey{rule, scaleBackend(n/2, 7)}] = probe{weight: uint32(i)}
						d.touch(rule)
						return d.publish()
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestStatusSelects: status selects rules by name, VIP and backend, pages
// them, and summarizes every rule from the published status, listing the
// rules that need attention.
func TestStatusSelects(t *testing.T) {
	d, _ := scaleDaemon(t, 30, 3)
	o := &ops{d: d}
	ctx := context.Background()
	names := func(st *control.Status) []string {
		var out []string
		for _, r := range st.Rules {
			out = append(out, fmt.Sprintf("%s/%d", r.Name, len(r.Backends)))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		q        control.StatusQuery
		want     []string
		selected int
	}{
		{"every rule", control.StatusQuery{}, nil, 30},
		{"by name", control.StatusQuery{Rule: "r00004"}, []string{"r00004/3"}, 1},
		{"by VIP", control.StatusQuery{VIP: "198.18.16.8"}, []string{"r00007/3"}, 1},
		{"by backend, its row only", control.StatusQuery{Backend: scaleBackend(12, 1).String()}, []string{"r00012/1"}, 1},
		{"a page", control.StatusQuery{Offset: 27, Limit: 10}, []string{"r00027/3", "r00028/3", "r00029/3"}, 30},
		{"past the end", control.StatusQuery{Offset: 40, Limit: 10}, nil, 30},
	} {
		st, err := o.Status(ctx, tc.q)
		if err == nil {
			err = st.Collect()
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := names(st); st.RulesSelected != tc.selected || (tc.want != nil || tc.q.Offset > 0) && !slices.Equal(got, tc.want) || tc.want == nil && tc.q.Offset == 0 && len(got) != 30 {
			t.Errorf("%s: %d selected, rules %v; want %d, %v", tc.name, st.RulesSelected, got, tc.selected, tc.want)
		}
	}
	if _, err := o.Status(ctx, control.StatusQuery{Rule: "nope"}); err == nil {
		t.Error("an unknown rule was not refused")
	}
	if _, err := o.Status(ctx, control.StatusQuery{VIP: "not an address"}); err == nil {
		t.Error("a bad VIP was not refused")
	}

	// Rule 7 loses its backends' next hops: it needs attention.
	if err := do(d, func() error {
		for j := range 3 {
			delete(d.nexthops, nhKey{scaleBackend(7, j), false})
		}
		d.touch("r00007")
		return d.publish()
	}); err != nil {
		t.Fatal(err)
	}
	st, err := o.Status(ctx, control.StatusQuery{Summary: true, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	sum := st.Summary
	if sum == nil || len(st.Rules) != 0 || sum.Rules != 30 || sum.Backends != 90 || sum.Health["HEALTHY"] != 87 || sum.Health["UNKNOWN"] != 3 ||
		sum.Tiers["PRIMARY"] != 29 || sum.AttentionTotal != 1 || len(sum.Attention) != 1 || sum.Attention[0].Name != "r00007" || sum.Attention[0].Unhealthy != 3 {
		t.Errorf("summary %+v, %d rule tables", sum, len(st.Rules))
	}
}

// BenchmarkStatus is xlb status's answer at 1000 rules of 100 backends:
// the summary, one rule's table (--rule) and a page of 20, against every
// rule's tables (what status answered before summaries) as the reference.
func BenchmarkStatus(b *testing.B) {
	d, _ := scaleDaemon(b, 1000, 100)
	o := &ops{d: d}
	for _, tc := range []struct {
		name string
		q    control.StatusQuery
	}{
		{"summary", control.StatusQuery{Summary: true, Limit: 20}},
		{"rule", control.StatusQuery{Rule: "r00500"}},
		{"page", control.StatusQuery{Offset: 500, Limit: 20}},
		{"every-rule", control.StatusQuery{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st, err := o.Status(context.Background(), tc.q)
				if err == nil && st.Stream != nil {
					err = st.Stream(func(*control.Rule) error { return nil }) // as the handler streams it
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
