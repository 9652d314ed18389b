package main

import (
	"os"
	"os/exec"
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
// configuration, so `systemctl reload` does too (issue 12 item 8: it ran
// kill -HUP and reported success for a rejected configuration).
func TestSystemdUnitCommands(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/xlb.service")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
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
	if n != 3 || !reload {
		t.Errorf("found %d xlb command lines in the unit (reload: %v), want 3 with ExecReload", n, reload)
	}
}
