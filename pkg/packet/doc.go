// Package packet reads and writes the headers of one Ethernet frame in
// place: header views over []byte, and Parse, which turns a received frame
// into a Meta (offsets, 5-tuple, TCP flags, fragment state, the flow quoted
// by an ICMP error) and a Result. ParseInto is the same into a Meta the
// caller owns (the worker parses a batch into its own array).
//
// # Ownership and goroutines
//
// The package holds no state. Parse and the views work on memory the
// caller owns (a UMEM frame owned by one dataplane.Worker goroutine) and
// keep no reference to it; Meta holds only values and offsets, so it may
// be copied and kept after the frame is recycled. Nothing here allocates,
// locks or makes a syscall; each property is a test (AllocsPerRun) or
// follows from the code having no state.
//
// # Views
//
// One file per protocol, in the style of gVisor's tcpip/header: a named
// []byte type (EthernetHeader, VLANTag, IPv4Header, IPv6Header,
// IPv6ExtHeader, IPv6FragmentHeader, TCPHeader, UDPHeader, ICMPv4Header,
// ICMPv6Header, ESPHeader, GREHeader), offsets as named constants under
// the RFC diagram, getters without Get, setters named SetX. The types are
// called ...Header because meta.go already names the Family values IPv4
// and IPv6. Views do not check lengths: the caller (Parse, or encap with
// its own templates) guarantees the minimum size first; a short slice
// panics with an index error rather than reading garbage.
//
// Exported surface: the views, their offset and size
// constants and the protocol numbers stay exported even where only this
// package reads them, as in gVisor's tcpip/header: they are the
// protocols' named facts, one table per header, and a partly unexported
// table would hide which offsets exist. What is not a protocol fact is
// unexported.
//
// format.go names IP protocols for people (ProtoName, ParseProto: the
// CLI's --proto and every printed flow); it is not on the packet path.
//
// checksum.go has the ones' complement sum (RFC 1071), the pseudo-header
// sum, and incremental updates per RFC 1624 eqn. 3 (HC' = ~(~HC + ~m +
// m')), for 16-bit words, 32-bit words and even-length fields such as an
// IPv6 address.
//
// # Results
//
// Result is a dense uint8 enum meant to index per-queue counters; its
// String is the metric label. Class tells ok / pass / drop:
//
//   - OK: an IPv4 or IPv6 packet whose headers make sense.
//   - pass: the frame is not ours to parse and goes to the kernel
//     unchanged: not IP (ARP, LLDP, 802.3 length frames, any other
//     EtherType), or a second VLAN tag (QinQ, TPID 0x88a8 or 0x9100 as
//     outer tag, or any tag inside the 802.1Q tag). The XDP program should
//     not redirect these; if it does, the worker must pass them on.
//   - drop: malformed, one reason per class (result.go lists them).
//
// Meta is meaningful only for OK; after a pass or drop it is partly
// filled and must be ignored.
//
// # Decisions
//
//   - IPv4 header checksum: verified, and a mismatch is
//     ipv4-bad-checksum. It costs five 32-bit adds on a 20-byte header,
//     and a header corrupted on the wire must not choose a backend or be
//     forwarded with a checksum the backend will reject anyway. Transport
//     checksums are not verified (the backend does that; we pass through).
//   - IPv4 options: detected through IHL and skipped; Meta.IPOptions says
//     so. Their content is not interpreted (no source routing, no record
//     route); forwarding them unchanged is the dataplane's decision.
//   - IPv4 total length and IPv6 payload length must fit in the frame;
//     bytes after the IP packet are L2 padding (L3End marks the end) and
//     are not an error. IPv6 jumbograms (payload length 0 with a
//     jumbo option) are not supported: they cannot fit an AF_XDP frame.
//   - Frames longer than 65535 bytes are frame-too-long: Meta's offsets
//     are uint16.
//   - IPv6 extension headers: hop-by-hop, routing, destination options,
//     fragment, AH, mobility, HIP and shim6 are walked (RFC 7045 lists
//     them); any other next header ends the chain and becomes Proto (ESP,
//     No Next Header and unknown protocols included). The walk is bounded:
//     at most MaxIPv6ExtHeaders (8) headers and MaxIPv6ExtBytes (256)
//     bytes of them, so the transport header starts within the first 296
//     bytes of the IPv6 packet; longer is ipv6-ext-chain-too-long. Real
//     traffic uses zero to three. Hop-by-hop must come first and only once
//     (RFC 8200 §4.1), a second fragment header is a drop, and no other
//     repetition is checked. Routing headers are not interpreted: Dst is
//     the IPv6 destination field, which is what the appliance received.
//   - Fragments: no reassembly (docs/design.md#fragments). IPv4: MF or a
//     non-zero offset makes a fragment, FragID is the 16-bit identification.
//     IPv6: a fragment header with offset 0 and M=0 is an atomic fragment
//     (RFC 8021) and counts as FragNone. A non-first fragment has L4Off at
//     its payload, zero ports and no TCP/ICMP fields; its Proto is the IPv4
//     protocol, or the IPv6 fragment header's next header (the same in every
//     fragment of a datagram). A first fragment must hold its whole header
//     chain and transport header: for IPv6 that is RFC 7112
//     (ipv6-fragment-chain-incomplete), for IPv4 a first fragment too short
//     for its transport header is fragment-tiny, as is a TCP fragment at
//     offset 8 bytes (RFC 1858: it could overwrite the flags). A fragment
//     that would end past byte 65535 is fragment-overflow.
//   - Transport minimums (unfragmented and first fragments): TCP 20 bytes
//     and a data offset between 5 and the packet end; UDP 8 bytes and a
//     length between 8 and the packet end (a first fragment's UDP length
//     covers the whole datagram, so only >= 8 is checked; a length shorter
//     than the IP payload is accepted, as by Linux); ICMP and ICMPv6 8
//     bytes (every message we read has 8); ESP 8 (SPI and sequence); GRE
//     4. Other protocols (IPIP, IPv6-in-IPv4, SCTP, ...) are OK with zero
//     ports; the rules decide. ICMP inside IPv6 and ICMPv6 inside IPv4 are
//     unknown protocols.
//   - TCP flags: SYN+FIN, SYN+RST and segments with none of
//     FIN/SYN/RST/PSH/ACK/URG are bad-tcp-flags. They are scans or
//     attacks, never legitimate, and must not create conntrack state.
//   - Ports are read only for TCP and UDP.
//   - ICMP: echo request/reply fill ICMPEchoID. Destination unreachable,
//     time exceeded and parameter problem (and ICMPv6 packet too big) fill
//     Inner from the quoted packet, exactly as quoted (usually VIP →
//     client; reversing is the caller's job). The quote must hold the
//     quoted IP header and 8 more bytes (RFC 792), else
//     icmp-inner-truncated; an IPv4 quote must be IPv4 with IHL >= 5, an
//     IPv6 quote IPv6 with a well-formed chain under the same bounds, else
//     icmp-inner-malformed. The quoted total length and checksum are not
//     checked (quotes are copies, often cut). Inner ports are read for TCP
//     and UDP unless the quoted packet is a non-first fragment.
//     Fragmentation needed (type 3 code 4) and packet too big fill
//     ICMPMTU; the MTU value is not judged here (tiny MTUs are counted by
//     the dataplane). Redirect and source quench are not treated as
//     errors that quote a flow.
//   - VLAN: one 802.1Q tag is parsed (VLANTCI, HasVLAN); its VLAN ID is
//     not filtered here.
package packet
