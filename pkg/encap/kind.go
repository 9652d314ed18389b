package encap

import (
	"fmt"
	"strings"
)

// Kind is how a packet travels from the appliance to its backend.
type Kind uint8

const (
	// KindNone is the zero Kind; NewTemplate rejects it.
	KindNone Kind = iota
	// IPIP: outer IP header only (4in4, 4in6, 6in6; RFC 2003, RFC 2473).
	IPIP
	// GUE: outer IP + UDP to the GUE port, inner IP right after the UDP
	// header (GUE variant 1, draft-ietf-intarea-gue §4).
	GUE
	// GRE: outer IP + 4-byte GRE header without key, sequence or checksum
	// (RFC 2784).
	GRE
	// Direct: the backend is on our L2 segment; only the MAC addresses
	// change (direct routing, as LVS-DR).
	Direct
)

var kindNames = [...]string{KindNone: "NONE", IPIP: "IPIP", GUE: "GUE", GRE: "GRE", Direct: "DIRECT"}

// String returns the configuration spelling of k: "IPIP", "GUE", "GRE",
// "DIRECT".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind parses the configuration spelling of a Kind (any case).
func ParseKind(s string) (Kind, error) {
	for k := IPIP; k <= Direct; k++ {
		if strings.EqualFold(s, kindNames[k]) {
			return k, nil
		}
	}
	return KindNone, fmt.Errorf("unknown encapsulation %q (want IPIP, GUE, GRE or DIRECT)", s)
}

// Header sizes that make up the overheads.
const (
	ipv4HeaderSize = 20
	ipv6HeaderSize = 40
	udpHeaderSize  = 8
	greHeaderSize  = 4
	fragHeaderSize = 8 // IPv6 fragment header
	ethHeaderSize  = 14
	vlanTagSize    = 4
)

// Overhead returns the bytes k adds in front of an IP packet when the
// outer header is IPv4 (outerV6 false) or IPv6: IPIP 20/40, GUE 28/48,
// GRE 24/44, Direct 0.
func Overhead(k Kind, outerV6 bool) int {
	ip := ipv4HeaderSize
	if outerV6 {
		ip = ipv6HeaderSize
	}
	switch k {
	case IPIP:
		return ip
	case GUE:
		return ip + udpHeaderSize
	case GRE:
		return ip + greHeaderSize
	}
	return 0
}
