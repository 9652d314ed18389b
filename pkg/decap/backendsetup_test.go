package decap_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The kernel-native counterpart of this package: deploy/backend-setup.sh.
// This machine has no tunnel modules, so the script is checked in --dry-run
// mode: the commands it would run, and its refusals.
const backendSetup = "../../deploy/backend-setup.sh"

func runSetup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{backendSetup}, args...)...).CombinedOutput()
	return string(out), err
}

func TestBackendSetupHelp(t *testing.T) {
	out, err := runSetup(t, "--help")
	if err != nil || !strings.Contains(out, "Usage: backend-setup.sh") || !strings.Contains(out, "--vip ADDR") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

func TestBackendSetupDryRun(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{
			name: "all encaps, both families",
			args: []string{"--vip", "203.0.113.10", "--vip", "fd00:203:113::10", "--dev", "eth9"},
			want: []string{
				"modprobe ipip", "ip link set tunl0 up", "ip link set sit0 up",
				"ip -6 tunnel change ip6tnl0 mode any", "ip link set ip6tnl0 up",
				"modprobe ip_gre", "ip link set gre0 up", "ip link set ip6gre0 up",
				"ip fou add port 6080 gue", "ip -6 fou add port 6080 gue",
				"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.tunl0.rp_filter=0",
				"net.ipv4.conf.eth9.arp_ignore=1", "net.ipv4.conf.eth9.arp_announce=2",
				"ip addr add 203.0.113.10/32 dev lo", "ip addr add fd00:203:113::10/128 dev lo nodad",
			},
		},
		{
			name:    "gue on another port brings ipip devices, not gre",
			args:    []string{"--vip", "203.0.113.10", "--encap", "gue", "--gue-port", "7777"},
			want:    []string{"ip fou add port 7777 gue", "ip link set tunl0 up", "ip addr add 203.0.113.10/32 dev lo"},
			notWant: []string{"gre0", "arp_ignore"},
		},
		{
			name:    "direct only",
			args:    []string{"--vip", "203.0.113.10", "--encap", "direct", "--dev", "eth1"},
			want:    []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.eth1.arp_announce=2"},
			notWant: []string{"modprobe", "fou"},
		},
		{
			name:    "down",
			args:    []string{"--vip", "203.0.113.10", "--down"},
			want:    []string{"ip addr del 203.0.113.10/32 dev lo", "ip fou del port 6080", "ip link set tunl0 down"},
			notWant: []string{"modprobe", "addr add"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runSetup(t, append(tt.args, "--dry-run")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("unexpected %q in:\n%s", w, out)
				}
			}
		})
	}
}

func TestBackendSetupRefusesBadInput(t *testing.T) {
	for name, args := range map[string][]string{
		"no vip":        {"--dry-run"},
		"prefix as vip": {"--vip", "203.0.113.0/24", "--dry-run"},
		"bad encap":     {"--vip", "203.0.113.10", "--encap", "vxlan", "--dry-run"},
		"bad port":      {"--vip", "203.0.113.10", "--gue-port", "70000", "--dry-run"},
		"unknown flag":  {"--vip", "203.0.113.10", "--bogus"},
	} {
		out, err := runSetup(t, args...)
		if err == nil {
			t.Errorf("%s: accepted:\n%s", name, out)
		} else if !strings.Contains(out, "backend-setup.sh:") {
			t.Errorf("%s: error without a clear message: %q", name, out)
		}
	}
}
