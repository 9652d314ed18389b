package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/health"
)

// writeConfig writes an appliance configuration with one rule file per
// entry of rules (name → TOML body) and loads it.
func writeConfig(t *testing.T, rules map[string]string) (*config.Config, *config.State) {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte(fmt.Sprintf("interface = \"eth0\"\nhash_seed = \"0x5eed1ab\"\nstate_file = %q\ncontrol_socket = %q\n",
		filepath.Join(dir, "state.toml"), filepath.Join(dir, "xlb.sock"))), 0o644)
	for name, body := range rules {
		os.WriteFile(filepath.Join(dir, "rules.d", name+".toml"), []byte(fmt.Sprintf("name = %q\n%s", name, body)), 0o644)
	}
	cfg, _, err := config.Load(filepath.Join(dir, "xlb.toml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, st
}

func backendList(prefix string, from, n int) string {
	var q []string
	for i := from; i < from+n; i++ {
		q = append(q, fmt.Sprintf("%q", fmt.Sprintf("%s%d", prefix, i)))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func webRule(extra string, groups string) string { return vipRule("203.0.113.10", extra, groups) }

func vipRule(vip, extra, groups string) string {
	return `vip = "` + vip + `"
ports = ["80"]
` + extra + `
[health_check]
type = "TCP"
port = 80
` + groups
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// healthTargets groups every rule's probes again (services.go) and lists
// a prober for every backend of every rule that checks health, as a
// start does (prepareHealth, then startProbes).
func (d *daemon) healthTargets() []health.Target {
	d.regroupProbes(nil)
	return d.healthTargetsOf(nil)
}
