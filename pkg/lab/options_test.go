package lab

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

func TestHost(t *testing.T) {
	for _, tc := range []struct {
		p    netip.Prefix
		n    int
		want string
	}{
		{ClientNet4, 2, "198.51.100.2"},
		{ClientNet4, 254, "198.51.100.254"},
		{FabricNet4, hostFirstBE4 + 149, "198.18.0.249"},
		{FabricNet6, hostFirstBE6 + 10, "fd00:18::10a"},
		{TunnelNet6, hostFirstBE6, "fd00:18:1::100"},
		{netip.MustParsePrefix("10.0.0.0/16"), 300, "10.0.1.44"},
	} {
		if got := host(tc.p, tc.n).String(); got != tc.want {
			t.Errorf("host(%v, %d) = %s, want %s", tc.p, tc.n, got, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	var o Options
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	want := Options{Prefix: "xlb-", Router: RouterBIRD, Backends: 3, Appliances: 1, Queues: 2, ClientAddrs: 200, FabricMTU: 3500, ClientMTU: 1500,
		VIP4: DefaultVIP4, VIP6: DefaultVIP6, HTTPPort: 80, UDPPort: 7, HealthPort: 8080, GUEPort: 6080}
	if o.Logf == nil {
		t.Error("Logf left nil")
	}
	o.Logf = nil
	if !reflect.DeepEqual(o, want) {
		t.Errorf("defaults = %+v\nwant       %+v", o, want)
	}
}

func TestFleetOptions(t *testing.T) {
	o := Options{Appliances: 3}
	if err := o.setDefaults(); err != nil || !o.BGP {
		t.Errorf("3 appliances: err %v, BGP %v (want implied)", err, o.BGP)
	}
	o = Options{Router: RouterFRR}
	if err := o.setDefaults(); err != nil || !o.BGP || o.Appliances != 1 {
		t.Errorf("router frr: err %v, BGP %v, %d appliances (want BGP implied, 1)", err, o.BGP, o.Appliances)
	}
	if err := (&Options{Router: "quagga"}).setDefaults(); err == nil || err.Error() != `router "quagga": want bird or frr` {
		t.Errorf("router quagga: %v", err)
	}
	for _, n := range []int{-1, MaxAppliances + 1} {
		o := Options{Appliances: n}
		if err := o.setDefaults(); err == nil {
			t.Errorf("%d appliances accepted", n)
		}
	}
}

func TestTCPRTOMaxFloor(t *testing.T) {
	for _, tc := range []struct {
		cap time.Duration
		ok  bool
	}{
		{0, true},
		{time.Second, true},
		{4 * time.Second, true},
		{999 * time.Millisecond, false},
	} {
		o := Options{TCPRTOMax: tc.cap}
		if err := o.setDefaults(); (err == nil) != tc.ok {
			t.Errorf("TCPRTOMax %v: err %v, want ok %v", tc.cap, err, tc.ok)
		}
	}
}
