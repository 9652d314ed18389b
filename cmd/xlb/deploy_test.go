package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The appliance setup script: dry-run prints its commands, bad usage
// exits 2 with an ERROR line.
func TestApplianceSetupScript(t *testing.T) {
	script := "../../deploy/appliance-setup.sh"
	out, err := exec.Command("bash", script, "--dry-run", "--interface", "eth9", "--queues", "4").CombinedOutput()
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"+ ethtool -K eth9 lro off gro off", "+ ethtool -L eth9 combined 4", "net.ipv4.conf.eth9.rp_filter=2"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{}, {"--interface"}, {"--bogus"}, {"--interface", "eth0", "--queues", "x"}} {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "ERROR: ") {
			t.Errorf("%v: exit %d (%v), want 2 with an ERROR line:\n%s", args, cmd.ProcessState.ExitCode(), err, out)
		}
	}
}

// The systemd unit runs commands that exist, with flags they accept; its
// ExecReload is `xlb reload`, which fails when the daemon rejects the
// configuration, so `systemctl reload` does too (it once ran
// kill -HUP and reported success for a rejected configuration).
func TestSystemdUnitCommands(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/xlb.service")
	if err != nil {
		t.Fatal(err)
	}
	n, shell := 0, 0
	reload := false
	for _, line := range strings.Split(string(unit), "\n") {
		cmd, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			cmd, ok = strings.CutPrefix(line, "ExecStartPre=")
		}
		if r, isReload := strings.CutPrefix(line, "ExecReload="); isReload {
			cmd, ok, reload = r, true, true
			f := strings.Fields(r)
			if len(f) < 2 || f[0] != "/usr/local/bin/xlb" || f[1] != "reload" {
				t.Fatalf("ExecReload=%s: want xlb reload, which waits for the answer", r)
			}
			// Against a daemon that rejects the configuration, this line
			// fails, so systemctl reload does.
			_, _, fake := fakeSocket(t)
			args := append([]string{}, f[1:]...)
			for i := range args {
				if args[i] == "/etc/xlb/xlb.toml" {
					args[i] = fake
				}
			}
			_, errOut, err := runXLB(t, args...)
			if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, "error: rules.d/web.toml:14: failover.ratio") {
				t.Errorf("ExecReload against a rejecting daemon: %v %q; want exit 1 with the errors", err, errOut)
			}
		}
		if !ok {
			continue
		}
		if script, isShell := strings.CutPrefix(cmd, "-/bin/sh -c "); isShell {
			shell++
			checkShmemLine(t, strings.Trim(script, "'"))
			continue
		}
		f := strings.Fields(cmd)
		if f[0] != "/usr/local/bin/xlb" {
			t.Errorf("unit runs %s, not xlb", f[0])
			continue
		}
		n++
		// The command with --help must be a known command with these flags.
		out, _, err := runXLB(t, append(f[1:], "--help")...)
		if err != nil || !strings.Contains(out, "USAGE") {
			t.Errorf("%q is not a valid xlb command line: %v", cmd, err)
		}
	}
	if n != 3 || !reload || shell != 1 {
		t.Errorf("found %d xlb command lines in the unit (reload: %v) and %d shell lines, want 3 with ExecReload and the shmem one", n, reload, shell)
	}
}

// checkShmemLine runs the unit's shell line against a copy of
// shmem_enabled: it sets advise from never and leaves any other choice.
func checkShmemLine(t *testing.T, script string) {
	t.Helper()
	const sysfs = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
	if strings.Count(script, sysfs) != 2 {
		t.Fatalf("the unit's shell line %q does not read and write %s", script, sysfs)
	}
	for _, tc := range []struct{ before, after string }{
		{"always within_size advise [never] deny force\n", "advise\n"},
		{"always within_size [advise] never deny force\n", "always within_size [advise] never deny force\n"},
		{"always within_size advise never [deny] force\n", "always within_size advise never [deny] force\n"},
	} {
		file := filepath.Join(t.TempDir(), "shmem_enabled")
		if err := os.WriteFile(file, []byte(tc.before), 0o644); err != nil {
			t.Fatal(err)
		}
		// The line's exit status does not matter (the unit ignores it: '-').
		exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, sysfs, file)).Run()
		if got, _ := os.ReadFile(file); string(got) != tc.after {
			t.Errorf("shell line on %q left %q, want %q", tc.before, got, tc.after)
		}
	}
}
