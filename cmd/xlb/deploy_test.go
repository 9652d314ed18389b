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

// The systemd unit runs commands that exist, with flags they accept.
func TestSystemdUnitCommands(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/xlb.service")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(unit), "\n") {
		cmd, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			cmd, ok = strings.CutPrefix(line, "ExecStartPre=")
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
	if n != 2 {
		t.Errorf("found %d xlb command lines in the unit, want 2", n)
	}
}
