package failover

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// TestPersistsTable checks every cell of the table of
// docs/design.md#persistence-on-unhealthy-backends: policy × mode × protocol,
// one bool per affinity in the order NONE, CLIENT_IP_PORT_PROTO,
// CLIENT_IP_PROTO, CLIENT_IP.
func TestPersistsTable(t *testing.T) {
	const (
		tcp  = packet.ProtoTCP
		udp  = packet.ProtoUDP
		esp  = packet.ProtoESP
		gre  = packet.ProtoGRE
		icmp = packet.ProtoICMP
		icv6 = packet.ProtoICMPv6
	)
	all, none := [4]bool{true, true, true, true}, [4]bool{}
	notNone := [4]bool{false, true, true, true}
	fiveTuple := [4]bool{true, true, false, false}
	cases := []struct {
		policy PersistencePolicy
		mode   hash.TrackingMode
		proto  uint8
		want   [4]bool
	}{
		// DEFAULT_FOR_PROTOCOL, PER_CONNECTION: TCP persists; other protocols do not.
		{PersistDefaultForProtocol, hash.PerConnection, tcp, all},
		{PersistDefaultForProtocol, hash.PerConnection, udp, none},
		{PersistDefaultForProtocol, hash.PerConnection, esp, none},
		{PersistDefaultForProtocol, hash.PerConnection, gre, none},
		{PersistDefaultForProtocol, hash.PerConnection, icmp, none},
		{PersistDefaultForProtocol, hash.PerConnection, icv6, none},
		// DEFAULT_FOR_PROTOCOL, PER_SESSION: TCP only with NONE / CLIENT_IP_PORT_PROTO.
		{PersistDefaultForProtocol, hash.PerSession, tcp, fiveTuple},
		{PersistDefaultForProtocol, hash.PerSession, udp, none},
		{PersistDefaultForProtocol, hash.PerSession, esp, none},
		{PersistDefaultForProtocol, hash.PerSession, gre, none},
		{PersistDefaultForProtocol, hash.PerSession, icmp, none},
		{PersistDefaultForProtocol, hash.PerSession, icv6, none},
		// NEVER_PERSIST: nothing persists.
		{PersistNever, hash.PerConnection, tcp, none},
		{PersistNever, hash.PerConnection, udp, none},
		{PersistNever, hash.PerConnection, esp, none},
		{PersistNever, hash.PerConnection, gre, none},
		{PersistNever, hash.PerConnection, icmp, none},
		{PersistNever, hash.PerConnection, icv6, none},
		{PersistNever, hash.PerSession, tcp, none},
		{PersistNever, hash.PerSession, udp, none},
		{PersistNever, hash.PerSession, esp, none},
		{PersistNever, hash.PerSession, gre, none},
		{PersistNever, hash.PerSession, icmp, none},
		{PersistNever, hash.PerSession, icv6, none},
		// ALWAYS_PERSIST, PER_CONNECTION: whatever is tracked (UDP/ESP/GRE are
		// tracked unless the affinity is NONE; ICMP never).
		{PersistAlways, hash.PerConnection, tcp, all},
		{PersistAlways, hash.PerConnection, udp, notNone},
		{PersistAlways, hash.PerConnection, esp, notNone},
		{PersistAlways, hash.PerConnection, gre, notNone},
		{PersistAlways, hash.PerConnection, icmp, none},
		{PersistAlways, hash.PerConnection, icv6, none},
		// ALWAYS_PERSIST, PER_SESSION: a config error; nothing persists if it slips through.
		{PersistAlways, hash.PerSession, tcp, none},
		{PersistAlways, hash.PerSession, udp, none},
		{PersistAlways, hash.PerSession, esp, none},
		{PersistAlways, hash.PerSession, gre, none},
		{PersistAlways, hash.PerSession, icmp, none},
		{PersistAlways, hash.PerSession, icv6, none},
	}
	affinities := [4]hash.Affinity{hash.AffinityNone, hash.AffinityClientIPPortProto, hash.AffinityClientIPProto, hash.AffinityClientIP}
	for _, tc := range cases {
		for i, aff := range affinities {
			name := fmt.Sprintf("%v/mode%d/aff%d/proto%d", tc.policy, tc.mode, aff, tc.proto)
			if got := Persists(tc.policy, tc.mode, aff, tc.proto); got != tc.want[i] {
				t.Errorf("%s: Persists = %v, want %v", name, got, tc.want[i])
			}
		}
	}
	// Protocols the dataplane does not track never persist.
	if Persists(PersistAlways, hash.PerConnection, hash.AffinityClientIP, 132) {
		t.Error("SCTP persists under ALWAYS_PERSIST; it is not tracked")
	}
}

func TestCheckPersistence(t *testing.T) {
	cases := []struct {
		policy PersistencePolicy
		mode   hash.TrackingMode
		want   error
	}{
		{PersistDefaultForProtocol, hash.PerConnection, nil},
		{PersistDefaultForProtocol, hash.PerSession, nil},
		{PersistNever, hash.PerConnection, nil},
		{PersistNever, hash.PerSession, nil},
		{PersistAlways, hash.PerConnection, nil},
		{PersistAlways, hash.PerSession, ErrAlwaysPersistPerSession},
		{PersistAlways + 1, hash.PerConnection, ErrUnknownPersistence},
		{PersistNever, hash.PerSession + 1, ErrUnknownPersistence},
	}
	for _, tc := range cases {
		if err := CheckPersistence(tc.policy, tc.mode); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("CheckPersistence(%v, %d) = %v, want %v", tc.policy, tc.mode, err, tc.want)
		}
	}
}

func TestPersistsAllocs(t *testing.T) {
	var sink bool
	if n := testing.AllocsPerRun(100, func() {
		sink = Persists(PersistDefaultForProtocol, hash.PerSession, hash.AffinityClientIP, packet.ProtoTCP)
	}); n != 0 {
		t.Errorf("Persists allocates %v times per call", n)
	}
	_ = sink
}

func BenchmarkPersists(b *testing.B) {
	b.ReportAllocs()
	var n int
	protos := [...]uint8{packet.ProtoTCP, packet.ProtoUDP, packet.ProtoESP, packet.ProtoICMP}
	i := 0
	for b.Loop() {
		if Persists(PersistAlways, hash.PerConnection, hash.Affinity(i&3), protos[i&3]) {
			n++
		}
		i++
	}
	_ = n
}
