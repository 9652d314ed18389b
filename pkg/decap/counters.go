package decap

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// DropReason says why a received datagram was not written to the TUN.
// Each value indexes a counter.
type DropReason uint8

const (
	DropNone           DropReason = iota // delivered
	DropOuterTruncated                   // shorter than an IPv4 header
	DropOuterMalformed                   // outer IPv4 header inconsistent
	DropOuterProtocol                    // outer protocol is neither IPIP, IPv6 nor GRE
	DropGRETruncated                     // shorter than the GRE header its flags announce
	DropGREVersion                       // GRE version ≠ 0 (e.g. PPTP's enhanced GRE)
	DropGREFlags                         // GRE routing present (RFC 1701, obsolete)
	DropGREChecksum                      // GRE checksum present and wrong
	DropGREProtocol                      // GRE protocol type is neither IPv4 nor IPv6
	DropGUETruncated                     // shorter than the GUE header it announces
	DropGUEVersion                       // GUE variant 1 with a version nibble ≠ 4/6, or variant ≥ 2
	DropGUEControl                       // GUE variant 0 control message
	DropGUEProtocol                      // GUE variant 0 protocol is neither 4 nor 41
	DropInnerTruncated                   // inner packet shorter than its header says
	DropInnerVersion                     // inner version does not match the encapsulation
	DropInnerMalformed                   // inner header inconsistent
	DropUnknownKind                      // internal: reader of an unknown kind
	DropTUNWrite                         // the TUN refused the write
	DropReadError                        // the socket returned an error other than closed
	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{
	DropNone:           "none",
	DropOuterTruncated: "outer_truncated",
	DropOuterMalformed: "outer_malformed",
	DropOuterProtocol:  "outer_protocol",
	DropGRETruncated:   "gre_truncated",
	DropGREVersion:     "gre_version",
	DropGREFlags:       "gre_flags",
	DropGREChecksum:    "gre_checksum",
	DropGREProtocol:    "gre_protocol",
	DropGUETruncated:   "gue_truncated",
	DropGUEVersion:     "gue_version",
	DropGUEControl:     "gue_control",
	DropGUEProtocol:    "gue_protocol",
	DropInnerTruncated: "inner_truncated",
	DropInnerVersion:   "inner_version",
	DropInnerMalformed: "inner_malformed",
	DropUnknownKind:    "unknown_kind",
	DropTUNWrite:       "tun_write",
	DropReadError:      "read_error",
}

func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropReasonNames[r]
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// Counters is a snapshot of what the readers did.
type Counters struct {
	Received  uint64                 // datagrams read from the sockets
	Delivered uint64                 // inner packets written to the TUN
	Drops     [NumDropReasons]uint64 // indexed by DropReason; Drops[DropNone] is unused
}

// Dropped returns the sum of all drop counters.
func (c Counters) Dropped() uint64 {
	var n uint64
	for _, d := range c.Drops[1:] {
		n += d
	}
	return n
}

// String lists the non-zero counters, for logs and the CLI.
func (c Counters) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "received=%d delivered=%d", c.Received, c.Delivered)
	for r, d := range c.Drops {
		if d != 0 && DropReason(r) != DropNone {
			fmt.Fprintf(&b, " %s=%d", DropReason(r), d)
		}
	}
	return b.String()
}

// stats are one reader's counters: written only by that reader's
// goroutine, read atomically by Counters from any goroutine.
type stats struct {
	received  atomic.Uint64
	delivered atomic.Uint64
	drops     [NumDropReasons]atomic.Uint64
}

func (s *stats) addTo(c *Counters) {
	c.Received += s.received.Load()
	c.Delivered += s.delivered.Load()
	for i := range s.drops {
		c.Drops[i] += s.drops[i].Load()
	}
}
