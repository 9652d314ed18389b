package lab_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/lab"
)

// The configuration the lab writes must load with pkg/config, for every
// encapsulation, with the backends the mode needs.
func TestWriteConfigLoads(t *testing.T) {
	l := up(t, lab.Options{Backends: 2, ClientAddrs: 2, NoDecap: true})
	for _, encap := range []string{"ipip", "GUE", "GRE", "DIRECT"} {
		t.Run(encap, func(t *testing.T) {
			dir := t.TempDir()
			path, err := l.WriteConfig(dir, l.DefaultRules(encap))
			if err != nil {
				t.Fatal(err)
			}
			cfg, warnings, err := config.Load(path)
			if err != nil {
				t.Fatalf("config.Load: %v", err)
			}
			t.Logf("warnings: %v", warnings)
			if cfg == nil || len(cfg.Rules) != 4 {
				t.Fatalf("config has %v rules, want 4", cfg)
			}
			web4, err := os.ReadFile(filepath.Join(dir, "rules.d", "web4.toml"))
			if err != nil {
				t.Fatal(err)
			}
			want := l.Backends[1].Tunnel4.String()
			if encap == "DIRECT" {
				want = l.Backends[1].Link4.String()
			}
			if !strings.Contains(string(web4), want) {
				t.Errorf("web4 rule lacks backend %s:\n%s", want, web4)
			}
		})
	}
	t.Run("groups", func(t *testing.T) {
		rules := l.DefaultRules("IPIP")[:1]
		rules[0].Groups = []lab.Group{{Name: "p", Backends: []int{0}}, {Name: "f", Backends: []int{1}, Extra: "role = \"failover\"\nzone = \"z\"\n"}}
		path, err := l.WriteConfig(t.TempDir(), rules)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Load(path)
		if err != nil {
			t.Fatalf("config.Load: %v", err)
		}
		gs := cfg.Rules[0].Groups
		if len(gs) != 2 || gs[1].Role != config.RoleFailover || gs[1].Zone != "z" || len(gs[1].Backends) != 1 || gs[1].Backends[0].Addr != l.Backends[1].Tunnel4 {
			t.Errorf("groups: %+v", gs)
		}
	})
	if _, err := l.WriteConfig(t.TempDir(), l.DefaultRules("vxlan")); err == nil {
		t.Error("WriteConfig accepted vxlan")
	}
	var out bytes.Buffer
	if err := l.Describe(&out); err != nil || !strings.Contains(out.String(), l.Backends[1].Tunnel4.String()) {
		t.Errorf("Describe: %v\n%s", err, out.String())
	}
}
