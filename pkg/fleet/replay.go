package fleet

// window is the anti-replay window of one peer's current epoch: the
// highest sequence accepted and a bitmap of the windowBits below it (RFC
// 4303's sliding window). A datagram older than the window, or seen
// already, is a replay.
type window struct {
	top  uint64
	bits [windowBits / 64]uint64 // bit i: top-i was accepted
}

const windowBits = 256

// accept records seq and reports whether it is new.
func (w *window) accept(seq uint64) bool {
	switch {
	case seq > w.top:
		w.shift(seq - w.top)
		w.top = seq
		w.bits[0] |= 1
		return true
	case w.top-seq >= windowBits:
		return false
	}
	d := w.top - seq
	word, bit := d/64, uint64(1)<<(d%64)
	if w.bits[word]&bit != 0 {
		return false
	}
	w.bits[word] |= bit
	return true
}

// shift moves the bitmap n positions towards older sequences.
func (w *window) shift(n uint64) {
	if n >= windowBits {
		w.bits = [windowBits / 64]uint64{}
		return
	}
	words, bits := int(n/64), n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.bits[j] << bits
			if bits != 0 && j > 0 {
				v |= w.bits[j-1] >> (64 - bits)
			}
		}
		w.bits[i] = v
	}
}
