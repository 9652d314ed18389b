package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestOwnVIP: a VIP that is an address of the interface, or the broadcast
// address of one of its prefixes, is refused by CheckHost with the rule
// file's line (an L3_DEFAULT rule on the appliance's own address once
// locked out ssh; docs/design.md#rules-and-vips).
func TestOwnVIP(t *testing.T) {
	ns := testutil.NewNetNS(t, "vip")
	for _, tc := range []struct {
		vip  string
		want []string
	}{
		{"192.0.2.5", []string{"rules.d/web.toml:2: vip: 192.0.2.5 is an address of d0, the appliance's own: xlb would take its traffic (ssh, BGP, health checks)"}},
		{"192.0.2.255", []string{"rules.d/web.toml:2: vip: 192.0.2.255 is the broadcast address of d0's 192.0.2.0/24"}},
		{"2001:db8::5", []string{"rules.d/web.toml:2: vip: 2001:db8::5 is an address of d0, the appliance's own: xlb would take its traffic (ssh, BGP, health checks)"}},
		{"203.0.113.10", nil},
	} {
		rule := strings.Replace(webRule, `vip = "203.0.113.10"`, `vip = "`+tc.vip+`"`, 1)
		if netip.MustParseAddr(tc.vip).Is6() {
			rule = strings.Replace(rule, `["10.0.1.10", "10.0.1.11"]`, `["2001:db8:1::10"]`, 1)
		}
		cfg, _, err := Load(writeConfig(t, map[string]string{"xlb.toml": lines(`interface = "d0"`, `hash_seed = "1"`), "rules.d/web.toml": rule}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		err = ns.Do(func() error {
			if _, err := netlink.LinkByName("d0"); err != nil {
				if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "d0"}, PeerName: "d1"}); err != nil {
					return err
				}
				d, err := netlink.LinkByName("d0")
				if err != nil {
					return err
				}
				for _, a := range []string{"192.0.2.5/24", "2001:db8::5/64"} {
					addr, _ := netlink.ParseAddr(a)
					if err := netlink.AddrAdd(d, addr); err != nil {
						return err
					}
				}
			}
			for _, i := range CheckHost(cfg) {
				got = append(got, i.String())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("vip %s: got %q, want %q", tc.vip, got, tc.want)
		}
	}
}
