package daemon

import (
	"net/netip"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/packet"
)

// unmatchedVIPs is what unmatched_vip_traffic adds to the XDP program's
// VIP set (docs/design.md#rules-and-vips): with "drop", one all-protocols
// entry per VIP address, so the program redirects every packet to a VIP
// address and the workers drop what no rule claims as no-rule (counted,
// and seen by xlb capture); with "pass", nothing, and such packets reach
// the appliance's own stack. The program is unchanged: an all-protocols
// entry is what an L3_DEFAULT rule has, and the workers' matcher, not the
// program's set, decides which rule a packet belongs to.
func unmatchedVIPs(mode config.UnmatchedVIPTraffic, vips []engine.VIP) []engine.VIP {
	if mode != config.UnmatchedDrop {
		return nil
	}
	seen := map[netip.Addr]bool{}
	var out []engine.VIP
	for _, v := range vips {
		if !seen[v.Addr] {
			seen[v.Addr] = true
			out = append(out, engine.VIP{Addr: v.Addr})
		}
	}
	return out
}

// unmatchedLookup corrects a lookup that matched no rule for a packet to a
// VIP address: with unmatched_vip_traffic = "drop" the XDP program sends
// it to the workers, which drop it, instead of passing it.
func unmatchedLookup(res *control.LookupResult, mode config.UnmatchedVIPTraffic, snap *dataplane.Snapshot, m *packet.Meta, x *dataplane.Explanation) {
	if x.Matched || mode != config.UnmatchedDrop || !snap.Matcher().IsVIP(&m.Dst) {
		return
	}
	res.Verdict = "DROP"
	res.Why = "no forwarding rule of this VIP claims the protocol and port: dropped and counted as " + dataplane.ReasonNoRule.String() + " (unmatched_vip_traffic = \"drop\")"
}
