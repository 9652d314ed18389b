package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func runXLB(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runApp(newApp(&out, &errOut), append([]string{"xlb"}, args...))
	return out.String(), errOut.String(), err
}

// every command path in the tree, e.g. ["lab", "up"].
func commandPaths(prefix []string, cmds []*cli.Command) [][]string {
	var out [][]string
	for _, c := range cmds {
		p := append(append([]string(nil), prefix...), c.Name)
		out = append(out, p)
		out = append(out, commandPaths(p, c.Subcommands)...)
	}
	return out
}

func TestEveryCommandHasHelp(t *testing.T) {
	paths := commandPaths(nil, newApp(nil, nil).Commands)
	if len(paths) == 0 {
		t.Fatal("no commands")
	}
	for _, p := range paths {
		if p[0] == "k8s" {
			continue // its help is xlb-k8s's: TestK8sRunsController, cmd/xlb-k8s's TestHelp
		}
		t.Run(strings.Join(p, " "), func(t *testing.T) {
			out, _, err := runXLB(t, append(p, "--help")...)
			if err != nil {
				t.Fatalf("--help: %v", err)
			}
			if !strings.Contains(out, "USAGE") || !strings.Contains(out, p[len(p)-1]) {
				t.Errorf("--help printed no usage:\n%s", out)
			}
		})
	}
}

// TestUnknownCommandAndFlag: one exit-status rule
// (docs/design.md#command-line): unknown commands at any depth exit 3, usage
// errors 2, and xlb --help says so.
func TestUnknownCommandAndFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bogus"}, 3, `unknown command "bogus" for "xlb" (see 'xlb --help')`},
		{[]string{"backend", "bogus"}, 3, `unknown command "bogus" for "xlb backend" (see 'xlb backend --help')`},
		{[]string{"conntrack", "bogus", "--json"}, 3, `unknown command "bogus" for "xlb conntrack" (see 'xlb conntrack --help')`},
		{[]string{"lab", "bogus"}, 3, `unknown command "bogus" for "xlb lab" (see 'xlb lab --help')`},
		{[]string{"appliance", "bogus"}, 3, `unknown command "bogus" for "xlb appliance" (see 'xlb appliance --help')`},
		{[]string{"validate", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"backend", "list", "--bogus", "3"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"status", "extra"}, 2, `status takes no arguments, got "extra"`},
	} {
		_, _, err := runXLB(t, tc.args...)
		if err == nil || exitCode(err) != tc.code || err.Error() != tc.want {
			t.Errorf("%v: err = %v, exit %d; want %q (exit %d)", tc.args, err, exitCode(err), tc.want, tc.code)
		}
	}
	for _, args := range [][]string{{"--help"}, {"backend"}, {"backend", "--help"}} {
		out, _, err := runXLB(t, args...)
		if err != nil || exitCode(err) != 1 && err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if args[0] == "--help" && !strings.Contains(out, "EXIT STATUS:") {
			t.Errorf("xlb --help does not document the exit status:\n%s", out)
		}
	}
}

// TestFlagsAfterArguments: flags may follow positional arguments
// (docs/design.md#command-line); "--" still ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	app := newApp(nil, nil)
	for _, tc := range []struct{ in, want string }{
		{"xlb backend drain -r web 10.0.0.1 --json", "xlb backend drain -r web --json 10.0.0.1"},
		{"xlb backend weight 10.0.0.1 5 --rule web", "xlb backend weight --rule web 10.0.0.1 5"},
		{"xlb backend weight --rule=web 10.0.0.1 5 -c x.toml", "xlb backend weight --rule=web -c x.toml 10.0.0.1 5"},
		{"xlb backend drain 10.0.0.1 -- -r", "xlb backend drain -- 10.0.0.1 -r"},
		{"xlb status --json", "xlb status --json"},
		{"xlb backend -r web drain 10.0.0.1", "xlb backend -r web drain 10.0.0.1"}, // not a leaf: urfave/cli decides
		{"xlb", "xlb"},
	} {
		if got := strings.Join(interspersed(app, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	// The command runs as written.
	f, _, cfg := fakeSocket(t)
	out, errOut, err := runXLB(t, "backend", "drain", "-c", cfg, "-r", "web", "192.0.2.1", "--json")
	if err != nil || !strings.HasPrefix(out, "{") || !strings.Contains(out, `"address": "192.0.2.1"`) {
		t.Fatalf("backend drain … ADDR --json: %v %s\n%s", err, errOut, out)
	}
	if o := f.override("192.0.2.1"); o == nil || !o.drained {
		t.Errorf("192.0.2.1 not drained: %+v", o)
	}
}

func TestValidate(t *testing.T) {
	out, _, err := runXLB(t, "validate", "--offline", "-c", "../../deploy/examples/xlb.toml")
	if err != nil || !strings.Contains(out, ": ok: 9 rule(s), 1 backend service(s), 21 backend(s)") {
		t.Fatalf("examples: err %v, out %q", err, out)
	}

	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "xlb.toml"), []byte("interface = \"eth0\"\nhash_seed = \"0x1\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "rules.d", "web.toml"), []byte(`name = "web"
vip = "203.0.113.10"
ports = ["80"]
[failover]
ratio = 1.5
[health_check]
type = "TCP"
port = 80
[[group]]
name = "a"
backends = ["192.0.2.1"]
`), 0o644)
	_, errOut, err := runXLB(t, "validate", "-c", filepath.Join(dir, "xlb.toml"))
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("broken config accepted: %v", err)
	}
	if want := "rules.d/web.toml:5: failover.ratio: 1.5 is outside [0, 1]"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not contain %q", errOut, want)
	}
}

// TestValidateWhatRunNeeds: validate fails where xlb run would
// (docs/design.md#validation-and-reload): a missing interface, with its line;
// a corrupt state file, naming it and what removing it would drop (before,
// validate passed it, so systemd's ExecStartPre passed and the unit
// restart-looped). run refuses both with the same words before it attaches
// anything.
func TestValidateWhatRunNeeds(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rules.d"), 0o755)
	state := filepath.Join(dir, "state.toml")
	write := func(iface string) string {
		p := filepath.Join(dir, "xlb.toml")
		os.WriteFile(p, []byte(fmt.Sprintf("hash_seed = \"0x1\"\ninterface = %q\nstate_file = %q\ncontrol_socket = %q\n", iface, state, filepath.Join(dir, "xlb.sock"))), 0o644)
		os.WriteFile(filepath.Join(dir, "rules.d", "web.toml"), []byte("vip = \"203.0.113.10\"\nports = [\"80\"]\n[health_check]\ntype = \"NONE\"\n[[group]]\nname = \"a\"\nbackends = [\"192.0.2.1\", \"192.0.2.2\"]\n"), 0o644)
		return p
	}
	cfg := write("nosuch0")
	_, errOut, err := runXLB(t, "validate", "-c", cfg)
	if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, `error: xlb.toml:2: interface: no interface "nosuch0" on this machine`) {
		t.Errorf("validate with a missing interface: %v, %q", err, errOut)
	}
	if out, _, err := runXLB(t, "validate", "--offline", "-c", cfg); err != nil || !strings.Contains(out, "ok: 1 rule(s)") {
		t.Errorf("validate --offline: %v %s", err, out)
	}
	if _, _, err := runXLB(t, "run", "-c", cfg); err == nil || !strings.Contains(err.Error(), `interface: no interface "nosuch0"`) {
		t.Errorf("run with a missing interface: %v", err)
	}

	cfg = write("lo")
	if _, errOut, err := runXLB(t, "validate", "-c", cfg); err != nil {
		t.Fatalf("validate: %v %s", err, errOut)
	}
	// A state file cut short in its third override.
	os.WriteFile(state, []byte("version = 1\n[[override]]\nrule = \"web\"\nbackend = \"192.0.2.1\"\ndrained = true\n[[override]]\nrule = \"web\"\nbackend = \"192.0.2.2\"\nrole = \"failover\"\n[appliance]\ndrained = true\n[[override]\nrule = \"web\"\n"), 0o644)
	_, errOut, err = runXLB(t, "validate", "-c", cfg)
	wantLoss := "fix it, or remove it and lose 3 CLI override(s) (web 192.0.2.1: drained; web 192.0.2.2: role failover; web ?: no change that reads) and the appliance drain"
	if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, "error: "+state+":13: ") || !strings.Contains(err.Error(), "state file "+state+": 1 error(s): "+wantLoss) {
		t.Errorf("validate with a corrupt state file: %v\n%s", err, errOut)
	}
	if _, _, err := runXLB(t, "run", "-c", cfg); err == nil || !strings.Contains(err.Error(), "state file "+state+" rejected: "+wantLoss) {
		t.Errorf("run with a corrupt state file: %v", err)
	}
}
