package lab_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestFleetLab builds a two-appliance lab: BIRD runs in the router with a
// session per appliance and family, the router hashes on the 5-tuple, the
// appliances reach the router, the configuration written for them loads
// with its [bgp] table, and Close stops BIRD. (The speakers' side is
// pkg/bgp's TestBIRD and the cmd/xlb fleet tests.)
func TestFleetLab(t *testing.T) {
	l := up(t, lab.Options{Appliances: 2, Backends: 1, ClientAddrs: 2, NoDecap: true})
	if len(l.Appliances) != 2 || l.Appliances[0].NS != l.XLB || l.Appliances[1].Addr4.String() != "198.18.0.3" {
		t.Fatalf("appliances %+v", l.Appliances)
	}
	protos, err := l.Birdc("show protocols")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a0v4", "a0v6", "a1v4", "a1v6", "kvip4", "kvip6"} {
		if !strings.Contains(protos, p) {
			t.Errorf("bird has no protocol %s:\n%s", p, protos)
		}
	}
	for k, want := range map[string]string{"net/ipv4/fib_multipath_hash_policy": "3", "net/ipv4/fib_multipath_hash_fields": "55", "net/ipv6/fib_multipath_hash_policy": "3"} {
		out, err := l.Router.Output("cat", filepath.Join("/proc/sys", k))
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("router %s = %q (%v), want %s", k, strings.TrimSpace(out), err, want)
		}
	}
	for _, a := range l.Appliances {
		if err := lab.Ping(a.NS, l.Gateway4, 2*time.Second); err != nil {
			t.Errorf("appliance %d: %v", a.Index, err)
		}
	}
	// No appliance announces yet: no route to the VIP.
	if hops, err := l.RouteNexthops(l.Opts.VIP4); err != nil || len(hops) != 0 {
		t.Errorf("route to the VIP before any announcement: %v %v", hops, err)
	}
	if err := l.CountSYNs(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.SYNs(); err != nil || len(n) != 2 || n[0] != 0 || n[1] != 0 {
		t.Errorf("fresh SYN counters %v %v", n, err)
	}
	path, err := l.WriteConfig(t.TempDir(), l.DefaultRules("IPIP"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BGP == nil || cfg.BGP.LocalAS != lab.ApplianceAS || len(cfg.BGP.Peers) != 2 || cfg.BGP.Peers[1].Address != l.Gateway6 {
		t.Errorf("[bgp] read as %+v", cfg.BGP)
	}
	var out bytes.Buffer
	if err := l.Describe(&out); err != nil || !strings.Contains(out.String(), "BIRD 2") || !strings.Contains(out.String(), l.Appliances[1].NS.Name) {
		t.Errorf("Describe: %v\n%s", err, out.String())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Birdc("show status"); err == nil {
		t.Error("bird still answers after Close")
	}
}

// TestFleetLabWithoutBIRD: a BGP lab on a machine without bird (or
// without FRR's vtysh, for Router FRR) fails with a message that says what
// to install, and leaves nothing behind.
func TestFleetLabWithoutBIRD(t *testing.T) {
	testutil.RequireRoot(t)
	bin := t.TempDir()
	for _, tool := range []string{"ip", "nft"} {
		p, err := lookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	for _, tc := range []struct {
		router  string
		want    error
		install string
	}{
		{lab.RouterBIRD, lab.ErrNoBIRD, "apt-get install bird2"},
		{lab.RouterFRR, lab.ErrNoFRR, "apt-get install frr"},
	} {
		prefix := testutil.Unique("lb") + "-"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		l, err := lab.Up(ctx, lab.Options{Prefix: prefix, BGP: true, Router: tc.router, Backends: 1, ClientAddrs: 2, NoDecap: true})
		cancel()
		if err == nil {
			l.Close()
			t.Fatalf("Up without %s succeeded", tc.router)
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.install) {
			t.Errorf("error %q does not say %q", err, tc.install)
		}
		if left := lab.Namespaces(prefix); len(left) != 0 {
			lab.Down(prefix)
			t.Errorf("left %v", left)
		}
	}
}

func lookPath(tool string) (string, error) {
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(d, tool)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New(tool + " not found")
}
