package packet

import (
	"fmt"
	"strconv"
	"strings"
)

// protoNames are the IP protocols xlb names in its output and accepts by
// name in its input.
var protoNames = []struct {
	proto uint8
	name  string
}{
	{ProtoTCP, "TCP"}, {ProtoUDP, "UDP"}, {ProtoICMP, "ICMP"}, {ProtoICMPv6, "ICMPv6"}, {ProtoESP, "ESP"}, {ProtoGRE, "GRE"},
}

// ProtoName returns the name of an IP protocol number ("TCP", "UDP",
// "ICMP", "ICMPv6", "ESP", "GRE"), or "proto-N" for any other.
func ProtoName(p uint8) string {
	for _, n := range protoNames {
		if n.proto == p {
			return n.name
		}
	}
	return "proto-" + strconv.Itoa(int(p))
}

// ParseProto parses a protocol name (TCP, UDP, ESP, GRE, ICMP, ICMPv6; any
// case) or number.
func ParseProto(s string) (uint8, error) {
	for _, n := range protoNames {
		if strings.EqualFold(s, n.name) {
			return n.proto, nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("protocol %q: want TCP, UDP, ESP, GRE or a number", s)
	}
	return uint8(n), nil
}
