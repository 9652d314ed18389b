package pktgen

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Proto is the transport header the generator writes.
type Proto uint8

const (
	UDP    Proto = iota // UDP datagram (pktgen's only kind)
	TCPSYN              // TCP segment with SYN set: a new flow at every balancer
	TCPACK              // TCP segment with ACK set: an established flow's data
)

func (p Proto) String() string {
	switch p {
	case UDP:
		return "udp"
	case TCPSYN:
		return "tcp-syn"
	case TCPACK:
		return "tcp-ack"
	}
	return fmt.Sprintf("Proto(%d)", uint8(p))
}

// ParseProto reads "udp", "tcp-syn" or "tcp-ack".
func ParseProto(s string) (Proto, error) {
	for _, p := range []Proto{UDP, TCPSYN, TCPACK} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("protocol %q: want udp, tcp-syn or tcp-ack", s)
}

// AddrRange is an inclusive range of addresses of one family. Only the
// low 64 bits of an IPv6 range may vary.
type AddrRange struct{ First, Last netip.Addr }

// ParseAddrRange reads an address ("198.18.0.42"), a CIDR block
// ("198.18.0.0/15": every address in it, network and broadcast included,
// as the kernel samples' parse_addr does) or "first-last".
func ParseAddrRange(s string) (AddrRange, error) {
	var r AddrRange
	switch {
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return r, fmt.Errorf("address range %q: %w", s, err)
		}
		p = p.Masked()
		r.First = p.Addr()
		last := p.Addr().AsSlice()
		for i := p.Bits(); i < len(last)*8; i++ {
			last[i/8] |= 0x80 >> (i % 8)
		}
		r.Last, _ = netip.AddrFromSlice(last)
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		var err error
		if r.First, err = netip.ParseAddr(a); err != nil {
			return r, fmt.Errorf("address range %q: %w", s, err)
		}
		if r.Last, err = netip.ParseAddr(b); err != nil {
			return r, fmt.Errorf("address range %q: %w", s, err)
		}
	default:
		a, err := netip.ParseAddr(s)
		if err != nil {
			return r, fmt.Errorf("address %q: %w", s, err)
		}
		r.First, r.Last = a, a
	}
	r.First, r.Last = r.First.Unmap(), r.Last.Unmap()
	return r, r.check()
}

func (r AddrRange) check() error {
	switch {
	case !r.First.IsValid() || r.First.Zone() != "" || r.Last.Zone() != "":
		return fmt.Errorf("address range %s: want addresses without zone", r)
	case r.First.Is4() != r.Last.Is4():
		return fmt.Errorf("address range %s: mixes IPv4 and IPv6", r)
	case r.Last.Less(r.First):
		return fmt.Errorf("address range %s: first is above last", r)
	case r.First.Is6() && [8]byte(r.First.AsSlice()[:8]) != [8]byte(r.Last.AsSlice()[:8]):
		return fmt.Errorf("address range %s: an IPv6 range may vary only in its low 64 bits", r)
	}
	return nil
}

func (r AddrRange) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// low64 returns the low 64 bits of a (the whole address for IPv4).
func low64(a netip.Addr) uint64 {
	b := a.As16()
	var v uint64
	for _, x := range b[8:] {
		v = v<<8 | uint64(x)
	}
	return v
}

// span is the number of addresses in r, saturated at 2^64-1.
func (r AddrRange) span() uint64 {
	d := low64(r.Last) - low64(r.First)
	if d == math.MaxUint64 {
		return d
	}
	return d + 1
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Min, Max uint16 }

// ParsePortRange reads "80" or "433-444" (the samples' -p); ports are
// 1–65535 and Min ≤ Max, as validate_ports demands.
func ParsePortRange(s string) (PortRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	if !isRange {
		b = a
	}
	lo, err1 := strconv.ParseUint(a, 10, 16)
	hi, err2 := strconv.ParseUint(b, 10, 16)
	if err1 != nil || err2 != nil || lo == 0 || hi == 0 || lo > hi {
		return PortRange{}, fmt.Errorf("invalid port(s): %s: want N or MIN-MAX within 1-65535, MIN <= MAX", s)
	}
	return PortRange{uint16(lo), uint16(hi)}, nil
}

func (p PortRange) span() uint64 { return uint64(p.Max) - uint64(p.Min) + 1 }

func (p PortRange) String() string {
	if p.Min == p.Max {
		return strconv.Itoa(int(p.Min))
	}
	return fmt.Sprintf("%d-%d", p.Min, p.Max)
}

// Header sizes.
const (
	ethLen  = 14
	ipv4Len = 20
	ipv6Len = 40
	udpLen  = 8
	tcpLen  = 20
)

// MinSize returns the smallest frame (without FCS) for the family and
// protocol: the headers, or 60 bytes, the Ethernet minimum without FCS.
func MinSize(v6 bool, p Proto) int {
	n := ethLen + ipv4Len
	if v6 {
		n = ethLen + ipv6Len
	}
	if p == UDP {
		n += udpLen
	} else {
		n += tcpLen
	}
	return max(n, 60)
}

// Packet describes the frames: everything but how and how fast they are
// sent. The zero values of the optional fields are pktgen's defaults.
type Packet struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       AddrRange // same family
	SrcPorts       PortRange // default 9-9
	DstPorts       PortRange // default 9-9 (discard)
	Proto          Proto
	// Size is the frame length without FCS (pktgen's pkt_size): 60 makes
	// a minimum Ethernet frame on the wire. Default 60; raised to the
	// headers' size when smaller (an IPv6 TCP frame needs 74).
	Size int
	// Flows > 0 sends Flows distinct flows in turn, FlowLen packets each
	// (pktgen's flows/flowlen with FLOW_SEQ); flow i is the i-th tuple of
	// the address and port ranges, source address varying fastest. With
	// Flows = 0 every packet draws each varying field at random (pktgen's
	// *_RND flags).
	Flows   int
	FlowLen int // default 1 when Flows > 0
	// UDPChecksum fills the UDP checksum of IPv4 datagrams (pktgen's
	// UDPCSUM); without it they carry 0, as pktgen's do. IPv6 UDP and TCP
	// always carry a correct checksum.
	UDPChecksum bool
	// Seed starts the random draws (Flows = 0); threads add their index.
	Seed uint64
}

// V6 reports whether the packets are IPv6.
func (p *Packet) V6() bool { return p.Dst.First.Is6() }

func (p *Packet) withDefaults() Packet {
	q := *p
	if q.SrcPorts == (PortRange{}) {
		q.SrcPorts = PortRange{9, 9}
	}
	if q.DstPorts == (PortRange{}) {
		q.DstPorts = PortRange{9, 9}
	}
	if q.Size == 0 {
		q.Size = 60
	}
	q.Size = max(q.Size, MinSize(q.V6(), q.Proto))
	if q.Flows > 0 && q.FlowLen == 0 {
		q.FlowLen = 1
	}
	return q
}

// MaxSize is the largest frame the generator builds: it must fit in one
// 4096-byte UMEM chunk (and the interface's MTU, which the kernel checks).
const MaxSize = 4096

var errConfig = errors.New("invalid pktgen configuration")

// Validate checks p after defaults.
func (p *Packet) Validate() error {
	q := p.withDefaults()
	switch {
	case len(q.SrcMAC) != 6 || len(q.DstMAC) != 6:
		return fmt.Errorf("%w: source and destination MAC must be 6-byte Ethernet addresses", errConfig)
	case !q.Dst.First.IsValid() || !q.Src.First.IsValid():
		return fmt.Errorf("%w: source and destination addresses are required", errConfig)
	case q.Src.First.Is4() != q.Dst.First.Is4():
		return fmt.Errorf("%w: source %s and destination %s are of different families", errConfig, q.Src, q.Dst)
	case q.Size > MaxSize:
		return fmt.Errorf("%w: packet size %d above %d", errConfig, q.Size, MaxSize)
	case q.Flows < 0 || q.FlowLen < 0:
		return fmt.Errorf("%w: flows %d and flowlen %d must not be negative", errConfig, q.Flows, q.FlowLen)
	case q.Proto > TCPACK:
		return fmt.Errorf("%w: protocol %d", errConfig, q.Proto)
	}
	if err := q.Src.check(); err != nil {
		return fmt.Errorf("%w: source: %v", errConfig, err)
	}
	if err := q.Dst.check(); err != nil {
		return fmt.Errorf("%w: destination: %v", errConfig, err)
	}
	if q.SrcPorts.Min == 0 || q.SrcPorts.Min > q.SrcPorts.Max || q.DstPorts.Min == 0 || q.DstPorts.Min > q.DstPorts.Max {
		return fmt.Errorf("%w: port ranges %s and %s: want 1-65535, min <= max", errConfig, q.SrcPorts, q.DstPorts)
	}
	return nil
}

// Config is a whole run: the packets, the interface and the pacing.
type Config struct {
	Packet
	Ifname string
	// Threads is how many sending threads: thread i sends on TX queue
	// FirstThread+i and is pinned to CPU (FirstThread+i) mod NumCPU, as
	// pktgen's QUEUE_MAP_CPU does with kpktgend_<cpu>. Default 1.
	Threads     int
	FirstThread int
	// Count is the number of packets per thread; 0 = until Duration or
	// the context ends.
	Count    uint64
	Duration time.Duration
	// Rate is packets per second per thread; 0 = as fast as possible.
	// pktgen's delay (ns between packets) is Rate = 1e9/delay.
	Rate float64
	// Batch is how many descriptors are submitted to the TX ring at once
	// (pktgen's burst). Default 64.
	Batch int
	// Bind is "auto" (zero-copy, else copy), "copy" or "zerocopy".
	Bind string
	// Netns, when set, is the name of the network namespace (ip netns)
	// whose interface the threads send on; they enter it themselves, so a
	// process can drive generators in several namespaces.
	Netns string
}

func (c *Config) withDefaults() Config {
	d := *c
	d.Packet = c.Packet.withDefaults()
	if d.Threads == 0 {
		d.Threads = 1
	}
	if d.Batch == 0 {
		d.Batch = 64
	}
	if d.Bind == "" {
		d.Bind = "auto"
	}
	return d
}

// Validate checks c after defaults.
func (c *Config) Validate() error {
	d := c.withDefaults()
	if err := d.Packet.Validate(); err != nil {
		return err
	}
	switch {
	case d.Ifname == "":
		return fmt.Errorf("%w: no interface", errConfig)
	case d.Threads < 0 || d.FirstThread < 0:
		return fmt.Errorf("%w: threads %d from %d", errConfig, d.Threads, d.FirstThread)
	case d.Batch < 1 || d.Batch > 1024:
		return fmt.Errorf("%w: batch %d: want 1-1024", errConfig, d.Batch)
	case d.Rate < 0 || math.IsNaN(d.Rate) || math.IsInf(d.Rate, 0):
		return fmt.Errorf("%w: rate %v", errConfig, d.Rate)
	case d.Duration < 0:
		return fmt.Errorf("%w: duration %v", errConfig, d.Duration)
	case d.Bind != "auto" && d.Bind != "copy" && d.Bind != "zerocopy":
		return fmt.Errorf("%w: bind mode %q: want auto, copy or zerocopy", errConfig, d.Bind)
	}
	return nil
}
