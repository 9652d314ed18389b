package main

// The fleet with BFD: the router (BIRD, bfd on, 100 ms × 3) and each
// appliance's xlb run a BFD session per BGP session, so a silent appliance
// leaves ECMP well under a second instead of after the hold time.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// TestFleetBFD: both appliances' BFD sessions come Up (status, metrics,
// `xlb status`); three times, appliance 1 is SIGSTOPped under 200
// long-lived connections: its next hop must be gone within 1 s, come back
// after SIGCONT, and no connection may break. The lab keeps 100 ms × 3
// on a loaded machine: docs/design.md#bfd says why.
func TestFleetBFD(t *testing.T) {
	f := startFleetWith(t, lab.Options{Appliances: 2, Backends: 3, ClientAddrs: 250, BFD: true})
	l := f.l
	f.waitRoute("IPv4 VIP announced by both appliances", time.Minute, l.Opts.VIP4, f.addrs(false, 0, 1)...)
	f.waitRoute("IPv6 VIP announced by both appliances (MP-BGP)", time.Minute, l.Opts.VIP6, f.addrs(true, 0, 1)...)

	t.Run("visibility", func(t *testing.T) {
		bfdUp := func(i int) bool {
			b := f.status(i).Appliance.BGP
			if b == nil || len(b.Peers) != 2 {
				return false
			}
			for _, p := range b.Peers {
				if p.BFD != "up" {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(30 * time.Second)
		for !bfdUp(0) || !bfdUp(1) {
			if time.Now().After(deadline) {
				sessions, _ := l.Birdc("show bfd sessions")
				t.Fatalf("BFD not up on both appliances within 30 s: %+v / %+v\nrouter: %s", f.status(0).Appliance.BGP, f.status(1).Appliance.BGP, sessions)
			}
			time.Sleep(100 * time.Millisecond)
		}
		m := scrape(t, l)
		for _, gw := range []string{l.Gateway4.String(), l.Gateway6.String()} {
			if want := fmt.Sprintf(`xlb_bfd_session_up{peer="%s"} 1`, gw); !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		out, _, err := runXLB(t, "status", "--socket", f.xs[0].Socket())
		if err != nil || !strings.Contains(out, "bfd up") {
			t.Errorf("xlb status shows no BFD state: %v\n%s", err, out)
		}
		sessions, err := l.Birdc("show bfd sessions")
		if err != nil || strings.Count(sessions, " Up ") != 4 {
			t.Errorf("the router's BFD sessions (want 4 Up): %v\n%s", err, sessions)
		}
	})

	var gone []time.Duration
	for run := range 3 {
		t.Run(fmt.Sprintf("SIGSTOP and SIGCONT %d", run+1), func(t *testing.T) {
			ll := startLongLived(t, f, 200, 200*time.Millisecond)
			time.Sleep(time.Second)
			d, back := f.stopWithin(t, time.Second, "1 s with BFD 100 ms × 3")
			gone = append(gone, d)
			t.Logf("SIGSTOP → next hop gone in %v; SIGCONT → back in %v", d.Round(time.Millisecond), back.Round(time.Millisecond))
			time.Sleep(2 * time.Second)
			ll.finish(t, "SIGSTOP and SIGCONT of appliance 1")
		})
	}
	t.Logf("SIGSTOP → next hop gone, %d runs: %v", len(gone), gone)
}
