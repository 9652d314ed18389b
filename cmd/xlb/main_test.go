package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func runXLB(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = newApp(&out, &errOut).Run(append([]string{"xlb"}, args...))
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

func TestUnknownCommandAndFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" (see 'xlb --help')`},
		{[]string{"validate", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"backend", "list", "--limit", "3"}, "flag provided but not defined: -limit"},
	} {
		_, _, err := runXLB(t, tc.args...)
		if err == nil || exitCode(err) != 2 || err.Error() != tc.want {
			t.Errorf("%v: err = %v, exit %d; want the usage error %q (exit 2)", tc.args, err, exitCode(err), tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	out, _, err := runXLB(t, "validate", "-c", "../../deploy/examples/xlb.toml")
	if err != nil || !strings.Contains(out, ": ok: 4 rule(s)") {
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
