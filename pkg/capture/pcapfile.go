package capture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// The two file formats, written by hand: a header, then one record per
// packet, little-endian (the byte-order magic tells readers). Only what
// `xlb capture` writes: Ethernet frames, nanosecond time stamps, and in
// pcapng one interface per point and outcome and the refused packets as
// interface statistics. The tests read both back with gopacket's readers
// and tshark.

const (
	linkTypeEthernet = 1
	pcapMagicNanos   = 0xa1b23c4d // pcap with nanosecond time stamps

	// pcapng block types and option codes (draft-ietf-opsawg-pcapng).
	blockSection    = 0x0a0d0d0a
	blockInterface  = 0x00000001
	blockStats      = 0x00000005
	blockEnhanced   = 0x00000006
	byteOrderMagic  = 0x1a2b3c4d
	optEnd          = 0
	optSHBOS        = 3
	optSHBUserAppl  = 4
	optIfName       = 2
	optIfDescr      = 3
	optIfTsResol    = 9
	optIfOS         = 12
	optISBIfDrop    = 5
	tsResolNanos    = 9 // 10^-9 s
	pcapngNoSection = ^uint64(0)
)

var le = binary.LittleEndian

// pad4 is n rounded up to a multiple of 4 (pcapng aligns every field).
func pad4(n int) int { return (n + 3) &^ 3 }

// pcapngBlock builds one block: type, total length, body, options, total
// length again.
type pcapngBlock struct{ b []byte }

func (k *pcapngBlock) start(typ uint32) {
	k.b = le.AppendUint32(le.AppendUint32(k.b[:0], typ), 0)
}

func (k *pcapngBlock) u16(v uint16) { k.b = le.AppendUint16(k.b, v) }
func (k *pcapngBlock) u32(v uint32) { k.b = le.AppendUint32(k.b, v) }
func (k *pcapngBlock) u64(v uint64) { k.b = le.AppendUint64(k.b, v) }

// time writes a time stamp in nanoseconds as pcapng splits it: the high
// 32 bits, then the low.
func (k *pcapngBlock) time(t time.Time) {
	ns := uint64(0)
	if !t.IsZero() {
		ns = uint64(t.UnixNano())
	}
	k.u32(uint32(ns >> 32))
	k.u32(uint32(ns))
}

// bytes appends data padded to 4 bytes.
func (k *pcapngBlock) bytes(data []byte) {
	k.b = append(k.b, data...)
	k.b = append(k.b, make([]byte, pad4(len(data))-len(data))...)
}

func (k *pcapngBlock) option(code uint16, value []byte) {
	k.u16(code)
	k.u16(uint16(len(value)))
	k.bytes(value)
}

// finish closes the options (when there were any), writes the total
// length at both ends and returns the block.
func (k *pcapngBlock) finish(options bool) []byte {
	if options {
		k.option(optEnd, nil)
	}
	k.u32(0)
	n := uint32(len(k.b))
	le.PutUint32(k.b[4:], n)
	le.PutUint32(k.b[n-4:], n)
	return k.b
}

// ngWriter writes pcapng with one interface per point and outcome: the
// interface of a packet names where it was seen and what xlb did with it
// ("rx:drop:no-rule", "tx:tx"), so every dropped packet carries its reason
// in the file (Wireshark: frame.interface_name) where every reader looks.
type ngWriter struct {
	w      *bufio.Writer
	snap   int
	ifaces map[string]uint32
	blk    pcapngBlock
	last   time.Time // the last packet's time: the statistics' time stamp
	err    error
}

func newNgWriter(out io.Writer, snaplen int) *ngWriter {
	return &ngWriter{w: bufio.NewWriter(out), snap: snaplen, ifaces: map[string]uint32{}}
}

func (w *ngWriter) write(b []byte) error {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
	return w.err
}

// iface returns the interface named name, writing its description block
// (and before the first, the section header) the first time.
func (w *ngWriter) iface(name, descr string) (uint32, error) {
	if id, ok := w.ifaces[name]; ok {
		return id, nil
	}
	k := &w.blk
	if len(w.ifaces) == 0 {
		k.start(blockSection)
		k.u32(byteOrderMagic)
		k.u16(1) // version 1.0
		k.u16(0)
		k.u64(pcapngNoSection)
		k.option(optSHBOS, []byte("linux"))
		k.option(optSHBUserAppl, []byte("xlb capture"))
		if err := w.write(k.finish(true)); err != nil {
			return 0, fmt.Errorf("write pcapng header: %w", err)
		}
	}
	k.start(blockInterface)
	k.u16(linkTypeEthernet)
	k.u16(0)
	k.u32(uint32(w.snap))
	k.option(optIfName, []byte(name))
	k.option(optIfDescr, []byte(descr))
	k.option(optIfTsResol, []byte{tsResolNanos})
	k.option(optIfOS, []byte("linux"))
	if err := w.write(k.finish(true)); err != nil {
		return 0, fmt.Errorf("write pcapng interface: %w", err)
	}
	id := uint32(len(w.ifaces))
	w.ifaces[name] = id
	return id, nil
}

func (w *ngWriter) Write(p *Packet) error {
	id, err := w.iface(ifaceName(p), "xlb "+p.Point+": "+p.Outcome())
	if err != nil {
		return err
	}
	k := &w.blk
	k.start(blockEnhanced)
	k.u32(id)
	k.time(p.Time)
	k.u32(uint32(len(p.Data)))
	k.u32(uint32(max(p.Len, len(p.Data))))
	k.bytes(p.Data)
	w.last = p.Time
	if err := w.write(k.finish(false)); err != nil {
		return fmt.Errorf("write pcapng packet: %w", err)
	}
	return nil
}

func (w *ngWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

func (w *ngWriter) Close(dropped uint64) error {
	if len(w.ifaces) == 0 { // no packet: still a valid, empty capture
		if _, err := w.iface("xlb", "xlb capture"); err != nil {
			return err
		}
	}
	if dropped > 0 {
		k := &w.blk
		k.start(blockStats)
		k.u32(0) // the first interface
		k.time(w.last)
		k.option(optISBIfDrop, le.AppendUint64(nil, dropped))
		if err := w.write(k.finish(true)); err != nil {
			return fmt.Errorf("write pcapng statistics: %w", err)
		}
	}
	return w.Flush()
}

// pcapWriter writes classic pcap (nanosecond time stamps), unbuffered:
// one write per packet.
type pcapWriter struct {
	out io.Writer
	buf []byte
}

func newPcapWriter(out io.Writer, snaplen int) (*pcapWriter, error) {
	h := le.AppendUint32(nil, pcapMagicNanos)
	h = le.AppendUint16(h, 2) // version 2.4
	h = le.AppendUint16(h, 4)
	h = le.AppendUint32(h, 0) // time zone: UTC
	h = le.AppendUint32(h, 0) // accuracy
	h = le.AppendUint32(h, uint32(snaplen))
	h = le.AppendUint32(h, linkTypeEthernet)
	if _, err := out.Write(h); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return &pcapWriter{out: out}, nil
}

func (w *pcapWriter) Write(p *Packet) error {
	ns := p.Time.UnixNano()
	b := le.AppendUint32(w.buf[:0], uint32(ns/1e9))
	b = le.AppendUint32(b, uint32(ns%1e9))
	b = le.AppendUint32(b, uint32(len(p.Data)))
	b = le.AppendUint32(b, uint32(max(p.Len, len(p.Data))))
	w.buf = append(b, p.Data...)
	if _, err := w.out.Write(w.buf); err != nil {
		return fmt.Errorf("write pcap packet: %w", err)
	}
	return nil
}

func (w *pcapWriter) Flush() error { return nil } // nothing is buffered

func (w *pcapWriter) Close(uint64) error { return nil }
