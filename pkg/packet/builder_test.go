package packet_test

import (
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packettest"
)

// The frames of these tests come from packettest's header builders, which
// write headers byte by byte from the RFC layouts without this package, so
// that a mistake in a view's offset constant cannot hide in the fixtures.

var (
	macDst = packettest.DstMAC
	macSrc = packettest.SrcMAC
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// mapped returns the Meta form of an address: IPv4 as ::ffff:a.b.c.d.
func mapped(s string) [16]byte { return addr(s).As16() }
