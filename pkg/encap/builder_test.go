package encap_test

// The frames of these tests come from packettest's header builders, which
// write headers byte by byte from the RFC layouts and sum checksums with
// their own loop, independently of pkg/packet's views and of the code
// under test, so that a wrong offset or a wrong sum cannot hide in both.

var (
	ourMAC    = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01} // the appliance
	routerMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe} // sent the client's frame
	nextHop   = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x10} // towards the backend
)

const (
	client4 = "198.51.100.7"
	vip4    = "203.0.113.10"
	self4   = "192.0.2.1"
	back4   = "192.0.2.10"
	client6 = "fd00:c::7"
	vip6    = "fd00:f::10"
	self6   = "fd00:b::1"
	back6   = "fd00:b::10"
)

// vlanTags is the tag list of a frame on VLAN vlan (TCI; -1: untagged).
func vlanTags(vlan int) []uint32 {
	if vlan < 0 {
		return nil
	}
	return []uint32{uint32(vlan)}
}

// headroom is the room in front of every test frame, as in a UMEM chunk.
const headroom = 256

// chunk returns a UMEM-like buffer holding frame at offset headroom, with
// spare room after it, and the frame's (off, n).
func chunk(frame []byte) (buf []byte, off, n int) {
	buf = make([]byte, headroom+len(frame)+64)
	copy(buf[headroom:], frame)
	return buf, headroom, len(frame)
}
