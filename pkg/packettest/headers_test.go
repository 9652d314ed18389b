package packettest

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// reserialize decodes frame with gopacket and serializes its layers again
// with lengths and checksums computed: the bytes come back unchanged only
// when every length and checksum of frame is right.
func reserialize(t *testing.T, frame []byte) (gopacket.Packet, []byte) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	var ls []gopacket.SerializableLayer
	var netLayer gopacket.NetworkLayer
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case gopacket.NetworkLayer:
			netLayer = l
		case *layers.TCP:
			if err := l.SetNetworkLayerForChecksum(netLayer); err != nil {
				t.Fatal(err)
			}
		case *layers.UDP:
			if err := l.SetNetworkLayerForChecksum(netLayer); err != nil {
				t.Fatal(err)
			}
		case *layers.ICMPv6:
			if err := l.SetNetworkLayerForChecksum(netLayer); err != nil {
				t.Fatal(err)
			}
		}
		sl, ok := l.(gopacket.SerializableLayer)
		if !ok {
			t.Fatalf("layer %v cannot be serialized", l.LayerType())
		}
		ls = append(ls, sl)
	}
	if ll := p.Layers(); len(ll) > 0 && len(ll[len(ll)-1].LayerPayload()) > 0 {
		ls = append(ls, gopacket.Payload(ll[len(ll)-1].LayerPayload())) // bytes no layer decodes
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return p, buf.Bytes()
}

// TestHeadersAgreeWithGopacket: frames from the header builders decode
// with gopacket to the fields they were given, and their lengths and
// checksums are the ones gopacket computes.
func TestHeadersAgreeWithGopacket(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		check func(t *testing.T, p gopacket.Packet)
	}{
		{"tcp4 vlan", Cat(Eth(0x0800, 100), IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6, TOS: 0x10, TTL: 57, ID: 0x4242, Frag: 0x4000}.Build(
			L4Checksum("198.51.100.7", "203.0.113.10", 6, TCP(40000, 80, 0x02, Bytes(16)...)))),
			func(t *testing.T, p gopacket.Packet) {
				d, ip, tcp := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q), p.Layer(layers.LayerTypeIPv4).(*layers.IPv4), p.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if d.VLANIdentifier != 100 || ip.SrcIP.String() != "198.51.100.7" || ip.TTL != 57 || ip.Id != 0x4242 || ip.Flags != layers.IPv4DontFragment || ip.TOS != 0x10 {
					t.Errorf("vlan %d, ip %+v", d.VLANIdentifier, ip)
				}
				if tcp.SrcPort != 40000 || tcp.DstPort != 80 || !tcp.SYN || tcp.ACK || tcp.Seq != 1000 || tcp.Ack != 2000 || len(tcp.Payload) != 16 {
					t.Errorf("tcp %+v", tcp)
				}
			}},
		{"udp6 after extension headers", Cat(Eth(0x86dd), IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 0, TC: 0xb9, Flow: 0x12345, Hop: 60}.Build(
			Cat(Ext6(60, 1), Ext6(17, 0), L4Checksum("fd00::7", "fd00::10", 17, UDP(41000, 9000, Pattern(41, 3, 7)...))))),
			func(t *testing.T, p gopacket.Packet) {
				ip, udp := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6), p.Layer(layers.LayerTypeUDP).(*layers.UDP)
				if ip.TrafficClass != 0xb9 || ip.FlowLabel != 0x12345 || ip.HopLimit != 60 || ip.DstIP.String() != "fd00::10" {
					t.Errorf("ip %+v", ip)
				}
				if udp.SrcPort != 41000 || udp.DstPort != 9000 || udp.Length != 49 || !bytes.Equal(udp.Payload, Pattern(41, 3, 7)) {
					t.Errorf("udp %+v", udp)
				}
			}},
		{"icmp4 echo", Cat(EthFrom([6]byte{2, 0, 0, 0, 0, 9}, SrcMAC, 0x0800), IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 1}.Build(
			L4Checksum("", "", 1, ICMP(8, 0, 0x12340001, Bytes(56)...)))),
			func(t *testing.T, p gopacket.Packet) {
				e, ic := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
				if e.DstMAC.String() != "02:00:00:00:00:09" || e.SrcMAC.String() != "02:00:00:00:00:01" {
					t.Errorf("ethernet %+v", e)
				}
				if ic.TypeCode != layers.CreateICMPv4TypeCode(8, 0) || ic.Id != 0x1234 || ic.Seq != 1 {
					t.Errorf("icmp %+v", ic)
				}
			}},
		// A private-use type: gopacket decodes an echo's body into nothing.
		{"icmp6", Cat(Eth(0x86dd), IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 58}.Build(
			L4Checksum("fd00::7", "fd00::10", 58, ICMP(200, 1, 0x00070001, Bytes(8)...)))),
			func(t *testing.T, p gopacket.Packet) {
				if ic := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ic.TypeCode != layers.CreateICMPv6TypeCode(200, 1) {
					t.Errorf("icmp6 %+v", ic)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, again := reserialize(t, tc.frame)
			if !bytes.Equal(again, tc.frame) {
				t.Errorf("lengths or checksums differ from gopacket's:\n built %x\n  gopacket %x", tc.frame, again)
			}
			tc.check(t, p)
		})
	}
}

// TestHeaderOverrides: the knobs for malformed headers change only what
// they name.
func TestHeaderOverrides(t *testing.T) {
	plain := IPv4{Src: "192.0.2.1", Dst: "192.0.2.2", Proto: 17}
	good := plain.Build(UDP(1, 2))
	if Sum(good[:20]) != 0xffff {
		t.Fatalf("plain IPv4 header sums to %#x", Sum(good[:20]))
	}
	bad := plain
	bad.BadSum = true
	if b := bad.Build(UDP(1, 2)); Sum(b[:20]) == 0xffff || !bytes.Equal(b[:10], good[:10]) || !bytes.Equal(b[12:], good[12:]) {
		t.Errorf("BadSum: %x against %x", b, good)
	}
	odd := plain
	odd.IHL, odd.TotalLen, odd.Version = 4, 9, 6
	if b := odd.Build(nil); b[0] != 0x64 || b[2] != 0 || b[3] != 9 {
		t.Errorf("IHL, TotalLen, Version: %x", b[:4])
	}
	if b := (IPv6{Src: "fd00::1", Dst: "fd00::2", PayloadLen: 7, Version: 4}).Build(nil); b[0]>>4 != 4 || b[4] != 0 || b[5] != 7 {
		t.Errorf("PayloadLen, Version: %x", b[:8])
	}
	if b := UDPLen(1, 2, 3); b[4] != 0 || b[5] != 3 {
		t.Errorf("UDPLen: %x", b)
	}
	if b := Eth(0x86dd, 0x88a8<<16|5, 7); !bytes.Equal(b[12:], []byte{0x88, 0xa8, 0, 5, 0x81, 0, 0, 7, 0x86, 0xdd}) {
		t.Errorf("tags: %x", b[12:])
	}
	if b := Frag6(6, 1448, true, 0xabcd); !bytes.Equal(b, []byte{6, 0, 0x05, 0xa9, 0, 0, 0xab, 0xcd}) {
		t.Errorf("Frag6: %x", b)
	}
	if b := Routing6(6, "fd00:2::1"); len(b) != 24 || b[1] != 2 || b[23] != 1 {
		t.Errorf("Routing6: %x", b)
	}
}

// TestUDPZeroChecksumIsSentAsAllOnes: a UDP sum that comes out 0 is sent
// as 0xffff (RFC 768), which still verifies.
func TestUDPZeroChecksumIsSentAsAllOnes(t *testing.T) {
	seg := UDP(1, 2, 0, 0)
	// Choose the payload so that the pseudo-header and segment sum to 0xffff.
	s := Sum(Pseudo("192.0.2.1", "192.0.2.2", 17, len(seg)), seg)
	seg[8], seg[9] = byte(^s>>8), byte(^s)
	L4Checksum("192.0.2.1", "192.0.2.2", 17, seg)
	if seg[6] != 0xff || seg[7] != 0xff {
		t.Errorf("checksum %x, want ffff", seg[6:8])
	}
	if got := Sum(Pseudo("192.0.2.1", "192.0.2.2", 17, len(seg)), seg); got != 0xffff {
		t.Errorf("segment sums to %#x", got)
	}
}
