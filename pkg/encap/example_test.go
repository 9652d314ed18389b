package encap_test

import (
	"fmt"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

// The worker's use of a template: encapsulate, or transmit the ICMP reply,
// or fragment into spare frames.
func Example() {
	tmpl, err := encap.NewTemplate(encap.Spec{
		Kind:   encap.GUE,
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x01},
		DstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x10},
		Src:    netip.MustParseAddr("192.0.2.1"),
		Dst:    netip.MustParseAddr("192.0.2.10"),
	})
	if err != nil {
		panic(err)
	}
	var ipID uint16 // per worker
	for _, inner := range [][]byte{tcp4, big4DF, big4} {
		umem, off, n := chunk(frame(-1, 0x0800, inner)) // a frame in its UMEM chunk
		m, r := packet.Parse(umem[off : off+n])
		if r != packet.OK {
			continue
		}
		ipID++
		newOff, newLen, res := tmpl.Encap(umem, off, n, &m, 0x9e3779b97f4a7c15, ipID)
		switch res {
		case encap.OK, encap.TooBig:
			fmt.Printf("%d-byte packet: %v, transmit %d bytes from offset %d\n", len(inner), res, newLen, newOff)
		case encap.NeedFragments:
			spare := make([][]byte, tmpl.FragmentCount(&m)-1) // from the frame allocator in the worker
			for i := range spare {
				spare[i] = make([]byte, 2048)
			}
			sizes := make([]int, len(spare))
			_, firstLen, k, res := tmpl.Fragment(umem, off, n, &m, 0x9e3779b97f4a7c15, ipID, spare, sizes)
			fmt.Printf("%d-byte packet: %v, %d fragments of %d and %v bytes\n", len(inner), res, 1+k, firstLen, sizes[:k])
		default:
			fmt.Printf("drop: %v\n", res)
		}
	}
	// Output:
	// 56-byte packet: ok, transmit 98 bytes from offset 228
	// 1500-byte packet: packet-too-big, transmit 590 bytes from offset 228
	// 1500-byte packet: ok, 2 fragments of 1514 and [62] bytes
}
