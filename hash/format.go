package hash

import (
	"fmt"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packet"
)

// String writes a flow key as "TCP 198.51.100.7:40000 → 203.0.113.10:80"
// (5-tuple), "TCP 198.51.100.7 → 203.0.113.10" (3-tuple),
// "198.51.100.7 → 203.0.113.10" (2-tuple) or "(none)". It is for people
// (xlb conntrack, xlb lookup) and allocates: never on the packet path.
func (k Key) String() string {
	src := netip.AddrFrom16(k.Src).Unmap()
	dst := netip.AddrFrom16(k.Dst).Unmap()
	switch k.Kind {
	case Tuple5:
		return fmt.Sprintf("%s %s → %s", packet.ProtoName(k.Proto), netip.AddrPortFrom(src, k.SrcPort), netip.AddrPortFrom(dst, k.DstPort))
	case Tuple3:
		return fmt.Sprintf("%s %s → %s", packet.ProtoName(k.Proto), src, dst)
	case Tuple2:
		return fmt.Sprintf("%s → %s", src, dst)
	}
	return "(none)"
}

var affinityNames = [...]string{"NONE", "CLIENT_IP_PORT_PROTO", "CLIENT_IP_PROTO", "CLIENT_IP"}

// String returns the affinity's name as the configuration writes it
// (NONE, CLIENT_IP_PORT_PROTO, CLIENT_IP_PROTO, CLIENT_IP).
func (a Affinity) String() string {
	if int(a) < len(affinityNames) {
		return affinityNames[a]
	}
	return fmt.Sprintf("Affinity(%d)", uint8(a))
}

var trackingModeNames = [...]string{"PER_CONNECTION", "PER_SESSION"}

// String returns the mode's name as the configuration writes it.
func (m TrackingMode) String() string {
	if int(m) < len(trackingModeNames) {
		return trackingModeNames[m]
	}
	return fmt.Sprintf("TrackingMode(%d)", uint8(m))
}
