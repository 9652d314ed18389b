package ring

// UMEM is the packet memory shared with the kernel: NumFrames chunks of
// FrameSize bytes, addressed by offset from its start. Aligned mode: every
// chunk starts at a multiple of FrameSize and a packet never crosses a
// chunk.
type UMEM struct {
	mem       []byte
	frameSize uint64
	chunkMask uint64
	headroom  int
}

// Frame returns the packet d describes, as a slice into the UMEM (no
// copy). It is valid while the caller owns the frame: from RX Release
// until the frame is submitted to TX or fill or freed.
func (u *UMEM) Frame(d Desc) []byte {
	return u.mem[d.Addr : d.Addr+uint64(d.Len) : (d.Addr&u.chunkMask)+u.frameSize]
}

// Chunk returns the whole chunk that contains addr, so a caller can write
// in front of a packet (headroom) or behind it.
func (u *UMEM) Chunk(addr uint64) []byte {
	start := addr & u.chunkMask
	return u.mem[start : start+u.frameSize : start+u.frameSize]
}

// ChunkStart returns the address of the chunk that contains addr.
func (u *UMEM) ChunkStart(addr uint64) uint64 { return addr & u.chunkMask }

// Headroom is the number of bytes every received packet has in front of it
// inside its chunk: the kernel's XDP_PACKET_HEADROOM plus the headroom
// registered with the UMEM ([Options.ExtraHeadroom]). A packet may be moved
// to start up to Headroom bytes earlier (Desc.Addr -= k, Desc.Len += k)
// and transmitted from there.
func (u *UMEM) Headroom() int { return u.headroom }

// FrameSize is the size of one chunk.
func (u *UMEM) FrameSize() int { return int(u.frameSize) }

// Len is the size of the UMEM in bytes.
func (u *UMEM) Len() int { return len(u.mem) }

// Contains reports whether d is non-empty and lies inside one chunk of
// this UMEM, the check the kernel applies to TX descriptors
// (xsk_buff_pool.h xp_aligned_validate_desc).
func (u *UMEM) Contains(d Desc) bool {
	end := d.Addr + uint64(d.Len)
	return d.Len > 0 && end <= uint64(len(u.mem)) && end >= d.Addr &&
		(d.Addr&u.chunkMask)+u.frameSize >= end
}
