package main

import (
	"bytes"
	"strings"
	"testing"
)

func run(args ...string) (stdout string, err error) {
	var out, errOut bytes.Buffer
	err = newApp(&out, &errOut).Run(commandLine(append([]string{"xlb-k8s"}, args...)))
	return out.String(), err
}

// TestHelp: xlb-k8s --help (what xlb k8s --help shows) is the command's
// help as it was under xlb: its usage line, its description, every flag.
func TestHelp(t *testing.T) {
	out, err := run("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"xlb k8s - run the Kubernetes controller: LoadBalancer Services become rule files of this appliance",
		"xlb k8s [command options]",
		"deploy/kubernetes.md has the RBAC manifest",
		"--pool", "--kubeconfig", "--config FILE, -c FILE", "--log-format", "--lease-name",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not say %q:\n%s", want, out)
		}
	}
}

// TestUsageErrors: the command's usage errors exit 2 with xlb's messages;
// a failure to reach the cluster exits 1.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
		{nil, 2, "--pool: at least one pool of VIPs is needed (e.g. --pool 203.0.113.64/26)"},
		{[]string{"extra", "--pool", "203.0.113.64/26"}, 2, `k8s takes no arguments, got "extra"`},
		{[]string{"--pool", "nonsense"}, 2, "--pool: "},
		{[]string{"--pool", "203.0.113.64/26", "--log-level", "loud"}, 2, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--pool", "203.0.113.64/26", "--kubeconfig", "/nonexistent"}, 1, "kubeconfig /nonexistent: "},
	} {
		_, err := run(tc.args...)
		if err == nil || exitCode(err) != tc.code || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, exit %d; want %q… (exit %d)", tc.args, err, exitCode(err), tc.want, tc.code)
		}
	}
}
