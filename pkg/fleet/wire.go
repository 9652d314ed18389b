package fleet

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/xlbnet/xlb/hash"
)

// The wire format, version 1 (doc.go "Messages"). Every integer is
// big-endian. A datagram is a header, a body and a 16-byte tag:
//
//	header (56)  magic "XLBf" | version 1 | type | body length (2)
//	             epoch (8) | sequence (8) | from (16) | to (16)
//	body         HELLO (32) | RECORDS (10 + records) | SYNC_END (12)
//	tag (16)     HMAC-SHA256 of header and body under the fleet key, cut to 16 bytes
const (
	magic       = "XLBf"
	version     = 1
	headerLen   = 56
	tagLen      = 16
	helloLen    = 32
	recordsHead = 10
	syncEndLen  = 12
	// MaxDatagram is the largest datagram a node sends: it fits a 1500-byte
	// path with IPv6 and UDP headers (1452) with room to spare.
	MaxDatagram = 1400
	// maxBody is the body room of a datagram.
	maxBody = MaxDatagram - headerLen - tagLen
)

// Type is a datagram's type.
type Type uint8

const (
	// TypeHello is the heartbeat, sent every second to every peer: the
	// sender's epoch challenge and answer, its join (sync) request, and
	// how many exceptions it owns.
	TypeHello Type = 1
	// TypeRecords carries exceptions (or their withdrawal).
	TypeRecords Type = 2
	// TypeSyncEnd ends the answer to a sync request, with its count.
	TypeSyncEnd Type = 3
)

// Header is a datagram's header.
type Header struct {
	Type     Type
	Epoch    uint64     // the sender process's epoch (never 0)
	Seq      uint64     // per sender and receiver, from 1
	From, To netip.Addr // the sender's and receiver's fleet addresses
}

// Hello is a TypeHello body.
type Hello struct {
	// Challenge asks the receiver to prove its current epoch: it echoes
	// the nonce in its next HELLO. 0: no challenge.
	Challenge uint64
	// Echo answers the receiver's last challenge. 0: none.
	Echo uint64
	// Sync, when not 0, asks the receiver for every exception it owns,
	// answered with RECORDS carrying this id and a SYNC_END.
	Sync uint64
	// Owned is how many exceptions the sender owns.
	Owned uint32
}

// Record flags.
const (
	flagFlow6    = 1 << 0 // the flow's addresses are IPv6 (else IPv4, 4 bytes each)
	flagBackend6 = 1 << 1 // the backend's address is IPv6
	// FlagDraining: the flow's backend is departing on the sender (drained,
	// removed or failed over with draining): the entry ends at that
	// backend's drain deadline.
	FlagDraining = 1 << 2
	// FlagWithdraw: the sender's entry no longer names Backend (a new
	// connection took the tuple, or the entry went): a copy naming it that
	// expires no later than TTL is removed.
	FlagWithdraw = 1 << 3
	knownFlags   = flagFlow6 | flagBackend6 | FlagDraining | FlagWithdraw
)

// Record is one exception: a tracked flow of one rule and the backend it
// is on, named fleet-wide (rule by a digest of its name, backend by its
// address), with the time the sender's entry has left.
type Record struct {
	Rule    uint64 // RuleID of the rule's name
	Key     hash.Key
	Backend netip.Addr
	TTLms   uint32 // milliseconds the sender's entry has left
	Flags   uint8  // FlagDraining, FlagWithdraw
}

// RuleID is the fleet-wide name of a rule in records: XXH64 of its name.
func RuleID(name string) uint64 { return hash.Bytes([]byte(name), 0) }

// recordLen is the encoded size of r.
func recordLen(r *Record) int {
	n := 16 + 4 + 4 + 4 + 4
	if !isV4(r.Key.Src) || !isV4(r.Key.Dst) {
		n += 24
	}
	if !r.Backend.Unmap().Is4() {
		n += 12
	}
	return n
}

var v4prefix = [12]byte{10: 0xff, 11: 0xff}

func isV4(a [16]byte) bool { return [12]byte(a[:12]) == v4prefix }

// appendRecord encodes r:
//
//	flags (1) | tuple kind (1) | proto (1) | 0 (1) | rule id (8) | ttl ms (4)
//	source, destination (4 or 16 each) | source port, destination port (2 each)
//	backend (4 or 16)
func appendRecord(b []byte, r *Record) []byte {
	flags := r.Flags &^ (flagFlow6 | flagBackend6)
	v6 := !isV4(r.Key.Src) || !isV4(r.Key.Dst)
	if v6 {
		flags |= flagFlow6
	}
	back := r.Backend.Unmap()
	if !back.Is4() {
		flags |= flagBackend6
	}
	b = append(b, flags, byte(r.Key.Kind), r.Key.Proto, 0)
	b = binary.BigEndian.AppendUint64(b, r.Rule)
	b = binary.BigEndian.AppendUint32(b, r.TTLms)
	if v6 {
		b = append(b, r.Key.Src[:]...)
		b = append(b, r.Key.Dst[:]...)
	} else {
		b = append(b, r.Key.Src[12:]...)
		b = append(b, r.Key.Dst[12:]...)
	}
	b = binary.BigEndian.AppendUint16(b, r.Key.SrcPort)
	b = binary.BigEndian.AppendUint16(b, r.Key.DstPort)
	if back.Is4() {
		a := back.As4()
		return append(b, a[:]...)
	}
	a := back.As16()
	return append(b, a[:]...)
}

// Decoding errors: each is a drop reason.
var (
	errTruncated = errors.New("truncated")
	errMalformed = errors.New("malformed")
	errVersion   = errors.New("unknown version")
)

// decodeRecord reads one record from b and returns it and its length.
func decodeRecord(b []byte) (Record, int, error) {
	var r Record
	if len(b) < 16 {
		return r, 0, errTruncated
	}
	flags := b[0]
	if flags&^knownFlags != 0 || b[3] != 0 {
		return r, 0, errMalformed
	}
	kind := hash.TupleKind(b[1])
	if kind != hash.Tuple2 && kind != hash.Tuple3 && kind != hash.Tuple5 {
		return r, 0, errMalformed
	}
	r.Flags = flags & (FlagDraining | FlagWithdraw)
	r.Key.Kind, r.Key.Proto = kind, b[2]
	r.Rule = binary.BigEndian.Uint64(b[4:12])
	r.TTLms = binary.BigEndian.Uint32(b[12:16])
	alen, blen := 4, 4
	if flags&flagFlow6 != 0 {
		alen = 16
	}
	if flags&flagBackend6 != 0 {
		blen = 16
	}
	n := 16 + 2*alen + 4 + blen
	if len(b) < n {
		return r, 0, errTruncated
	}
	p := b[16:]
	if alen == 16 {
		r.Key.Src, r.Key.Dst = [16]byte(p[0:16]), [16]byte(p[16:32])
	} else {
		r.Key.Src = netip.AddrFrom4([4]byte(p[0:4])).As16()
		r.Key.Dst = netip.AddrFrom4([4]byte(p[4:8])).As16()
	}
	p = p[2*alen:]
	r.Key.SrcPort, r.Key.DstPort = binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4])
	p = p[4:]
	if blen == 16 {
		r.Backend = netip.AddrFrom16([16]byte(p[:16]))
	} else {
		r.Backend = netip.AddrFrom4([4]byte(p[:4]))
	}
	// The key must be what the tracking code builds: fields outside the
	// tuple kind are zero.
	if (kind != hash.Tuple5 && (r.Key.SrcPort != 0 || r.Key.DstPort != 0)) || (kind == hash.Tuple2 && r.Key.Proto != 0) {
		return r, 0, errMalformed
	}
	if alen == 16 && isV4(r.Key.Src) && isV4(r.Key.Dst) {
		return r, 0, errMalformed // IPv4 flows are sent in their short form
	}
	if blen == 16 && r.Backend.Is4In6() {
		return r, 0, errMalformed
	}
	return r, n, nil
}

// appendHeader encodes h for a body of bodyLen bytes.
func appendHeader(b []byte, h *Header, bodyLen int) []byte {
	b = append(b, magic...)
	b = append(b, version, byte(h.Type))
	b = binary.BigEndian.AppendUint16(b, uint16(bodyLen))
	b = binary.BigEndian.AppendUint64(b, h.Epoch)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	from, to := h.From.As16(), h.To.As16()
	b = append(b, from[:]...)
	return append(b, to[:]...)
}

// parseHeader reads a datagram's header and returns it with the body; the
// tag is the datagram's last tagLen bytes. It checks only the framing:
// authentication comes next (Keyring.verify), then the meaning.
func parseHeader(d []byte) (Header, []byte, error) {
	var h Header
	if len(d) < headerLen+tagLen {
		return h, nil, errTruncated
	}
	if len(d) > MaxDatagram {
		return h, nil, errMalformed
	}
	if string(d[0:4]) != magic {
		return h, nil, errMalformed
	}
	if d[4] != version {
		return h, nil, errVersion
	}
	bodyLen := int(binary.BigEndian.Uint16(d[6:8]))
	switch {
	case len(d) < headerLen+bodyLen+tagLen:
		return h, nil, errTruncated
	case len(d) > headerLen+bodyLen+tagLen:
		return h, nil, errMalformed
	}
	h.Type = Type(d[5])
	h.Epoch = binary.BigEndian.Uint64(d[8:16])
	h.Seq = binary.BigEndian.Uint64(d[16:24])
	h.From = netip.AddrFrom16([16]byte(d[24:40])).Unmap()
	h.To = netip.AddrFrom16([16]byte(d[40:56])).Unmap()
	return h, d[headerLen : headerLen+bodyLen], nil
}

// checkHeader validates what authentication cannot: the meaning of the
// header's fields.
func checkHeader(h *Header) error {
	if h.Epoch == 0 || h.Seq == 0 || h.Type < TypeHello || h.Type > TypeSyncEnd {
		return errMalformed
	}
	return nil
}

func appendHello(b []byte, m *Hello) []byte {
	b = binary.BigEndian.AppendUint64(b, m.Challenge)
	b = binary.BigEndian.AppendUint64(b, m.Echo)
	b = binary.BigEndian.AppendUint64(b, m.Sync)
	b = binary.BigEndian.AppendUint32(b, m.Owned)
	return binary.BigEndian.AppendUint32(b, 0)
}

func parseHello(body []byte) (Hello, error) {
	if len(body) != helloLen || binary.BigEndian.Uint32(body[28:32]) != 0 {
		return Hello{}, errMalformed
	}
	return Hello{
		Challenge: binary.BigEndian.Uint64(body[0:8]),
		Echo:      binary.BigEndian.Uint64(body[8:16]),
		Sync:      binary.BigEndian.Uint64(body[16:24]),
		Owned:     binary.BigEndian.Uint32(body[24:28]),
	}, nil
}

// recordsBody is a RECORDS body under construction: the sync id, a count
// and the records.
type recordsBody struct {
	b []byte
	n int
}

func (rb *recordsBody) reset(sync uint64) {
	rb.b = binary.BigEndian.AppendUint64(rb.b[:0], sync)
	rb.b = append(rb.b, 0, 0)
	rb.n = 0
}

// add appends r if it fits the datagram and reports whether it did.
func (rb *recordsBody) add(r *Record) bool {
	if len(rb.b)+recordLen(r) > maxBody {
		return false
	}
	rb.b = appendRecord(rb.b, r)
	rb.n++
	binary.BigEndian.PutUint16(rb.b[8:10], uint16(rb.n))
	return true
}

// parseRecords decodes a RECORDS body into out (reused) and returns the
// sync id. A body whose count disagrees with its bytes is malformed as a
// whole: nothing of it is applied.
func parseRecords(body []byte, out []Record) (uint64, []Record, error) {
	out = out[:0]
	if len(body) < recordsHead {
		return 0, out, errTruncated
	}
	sync := binary.BigEndian.Uint64(body[0:8])
	n := int(binary.BigEndian.Uint16(body[8:10]))
	p := body[recordsHead:]
	for range n {
		r, l, err := decodeRecord(p)
		if err != nil {
			return 0, out[:0], err
		}
		out = append(out, r)
		p = p[l:]
	}
	if len(p) != 0 {
		return 0, out[:0], errMalformed
	}
	return sync, out, nil
}

func appendSyncEnd(b []byte, sync uint64, count uint32) []byte {
	b = binary.BigEndian.AppendUint64(b, sync)
	return binary.BigEndian.AppendUint32(b, count)
}

func parseSyncEnd(body []byte) (sync uint64, count uint32, err error) {
	if len(body) != syncEndLen {
		return 0, 0, errMalformed
	}
	return binary.BigEndian.Uint64(body[0:8]), binary.BigEndian.Uint32(body[8:12]), nil
}

// TestDatagram returns a datagram of type t (a HELLO, or RECORDS with no
// record) from `from` to `to` in epoch, with sequence seq, sealed with
// keys: for tests outside the package that play a peer (or an impostor).
func TestDatagram(keys *Keyring, t Type, from, to netip.Addr, epoch, seq uint64) []byte {
	h := Header{Type: t, Epoch: epoch, Seq: seq, From: from, To: to}
	body := appendHello(nil, &Hello{})
	if t == TypeRecords {
		var rb recordsBody
		rb.reset(0)
		body = rb.b
	}
	return keys.seal(append(appendHeader(nil, &h, len(body)), body...))
}
