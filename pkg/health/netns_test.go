package health

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestDialInNamespace probes a server that exists only inside a network
// namespace, with the dialer the daemon uses for namespaces: the same
// address from the test's own namespace answers nothing.
func TestDialInNamespace(t *testing.T) {
	ns := testutil.NewNetNS(t, "hc")
	if err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Run("ip", "addr", "add", "192.0.2.10/32", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", "192.0.2.10:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: weightHandler(200, "7"), ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	rec := newRecorder()
	c := New(Options{Seed: 7, Dial: DialIn(ns.Do, nil), OnChange: rec.on})
	defer c.Stop()
	tg := serverTarget(t, HTTP, ln.Addr().String())
	tg.Check.Interval = 10 * time.Millisecond
	if err := c.Add(tg); err != nil {
		t.Fatal(err)
	}
	s := rec.waitFor(t, tg.Key, healthIs(failover.HealthHealthy))
	if state(s) != "H7" {
		t.Errorf("probe inside the namespace: %v, want HEALTHY weight 7", s)
	}
	c.Stop()

	// From the test's namespace the address leads nowhere.
	outside := newProber(tg, DirectDial, nil)
	outside.timeout = 200 * time.Millisecond
	if r := outside.probe(t.Context()); r.OK {
		t.Error("the namespace's server answered from outside it")
	}
	noProbers(t)
}
