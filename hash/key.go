package hash

// TupleKind says which fields of a Key are significant.
type TupleKind uint8

const (
	TupleNone TupleKind = 0 // the zero Key: nothing to hash or track
	Tuple2    TupleKind = 2 // Src, Dst
	Tuple3    TupleKind = 3 // Src, Dst, Proto
	Tuple5    TupleKind = 5 // Src, Dst, Proto, SrcPort, DstPort
)

// Key is the fixed-size flow key used for backend selection and for
// connection tracking. IPv4 addresses are mapped into IPv6 (::ffff:a.b.c.d).
// Fields that the Kind does not cover are zero, so two keys of one kind are
// equal exactly when their significant fields are. The layout is 40 bytes
// with no implicit padding; the hash is defined over these bytes (see Sum64).
type Key struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
	Kind             TupleKind
	_                [2]byte // always zero
}

// Affinity is a forwarding rule's session affinity
// (docs/design.md#session-affinity); the names follow the seeds.
type Affinity uint8

const (
	AffinityNone              Affinity = iota // NONE (default)
	AffinityClientIPPortProto                 // CLIENT_IP_PORT_PROTO
	AffinityClientIPProto                     // CLIENT_IP_PROTO
	AffinityClientIP                          // CLIENT_IP
)

// TrackingMode is a rule's connection tracking mode.
type TrackingMode uint8

const (
	PerConnection TrackingMode = iota // PER_CONNECTION (default)
	PerSession                        // PER_SESSION
)
