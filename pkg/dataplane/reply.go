package dataplane

import (
	"encoding/binary"

	"github.com/xlbnet/xlb/pkg/packet"
)

// replyTTL is the TTL / hop limit of the replies the appliance originates.
const replyTTL = 64

// EchoReply rewrites, in place, the ICMP or ICMPv6 echo request frame
// described by m into the echo reply from the VIP: MAC and IP addresses
// swapped, type 0 / 129, TTL 64, checksums updated incrementally (swapping
// addresses leaves every sum unchanged). L2 padding is cut: it returns the
// reply's length. The caller checked that m is an unfragmented echo request.
func EchoReply(frame []byte, m *packet.Meta) int {
	end := int(m.L3End)
	var mac [6]byte
	copy(mac[:], frame[0:6])
	copy(frame[0:6], frame[6:12])
	copy(frame[6:12], mac[:])
	ip := frame[m.L3Off:end]
	icmp := frame[m.L4Off:end]
	if m.Family == packet.IPv4 {
		swap(ip[packet.IPv4SrcAddrOffset:packet.IPv4SrcAddrOffset+4], ip[packet.IPv4DstAddrOffset:packet.IPv4DstAddrOffset+4])
		oldTTLProto := binary.BigEndian.Uint16(ip[packet.IPv4TTLOffset:])
		newTTLProto := uint16(replyTTL)<<8 | oldTTLProto&0xff
		ip[packet.IPv4TTLOffset] = replyTTL
		binary.BigEndian.PutUint16(ip[packet.IPv4ChecksumOffset:], packet.ChecksumUpdate16(binary.BigEndian.Uint16(ip[packet.IPv4ChecksumOffset:]), oldTTLProto, newTTLProto))
		oldType := binary.BigEndian.Uint16(icmp[0:2])
		icmp[0] = 0 // echo reply
		binary.BigEndian.PutUint16(icmp[2:4], packet.ChecksumUpdate16(binary.BigEndian.Uint16(icmp[2:4]), oldType, binary.BigEndian.Uint16(icmp[0:2])))
		return end
	}
	swap(ip[packet.IPv6SrcAddrOffset:packet.IPv6SrcAddrOffset+16], ip[packet.IPv6DstAddrOffset:packet.IPv6DstAddrOffset+16])
	ip[packet.IPv6HopLimitOffset] = replyTTL
	oldType := binary.BigEndian.Uint16(icmp[0:2])
	icmp[0] = 129 // echo reply
	binary.BigEndian.PutUint16(icmp[2:4], packet.ChecksumUpdate16(binary.BigEndian.Uint16(icmp[2:4]), oldType, binary.BigEndian.Uint16(icmp[0:2])))
	return end
}

func swap(a, b []byte) {
	for i := range a {
		a[i], b[i] = b[i], a[i]
	}
}
