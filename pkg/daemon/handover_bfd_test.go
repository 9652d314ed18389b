package daemon

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	"github.com/xlbnet/xlb/pkg/bfd"
)

// TestStateDocBFD: the BFD sessions round-trip through the state
// document, and a document without them (an older predecessor, a stop)
// carries none: the successor's sessions start over.
func TestStateDocBFD(t *testing.T) {
	cs := []bfd.Carried{{Peer: netip.MustParseAddr("198.18.0.1"), SourcePort: 50000, State: bfd.Up, LocalDisc: 7, RemoteDisc: 9,
		RemoteMult: 3, RemoteTxUS: 100000, RemoteRxUS: 100000, DesiredTxUS: 100000}}
	b, err := json.Marshal(stateDoc{Version: stateVersion, BFD: cs})
	if err != nil {
		t.Fatal(err)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil || !reflect.DeepEqual(doc.BFD, cs) {
		t.Fatalf("round trip: %v, %+v, want %+v", err, doc.BFD, cs)
	}
	old, err := json.Marshal(stateDoc{Version: stateVersion})
	if err != nil {
		t.Fatal(err)
	}
	var od stateDoc
	if err := json.Unmarshal(old, &od); err != nil || od.BFD != nil {
		t.Fatalf("a document without bfd: %v, %+v", err, od.BFD)
	}
	d := &daemon{}
	if err := d.restoreState(&stateDoc{BFD: cs}); err != nil || !reflect.DeepEqual(d.bfdCarried, cs) {
		t.Fatalf("restoreState: %v, carried %+v", err, d.bfdCarried)
	}
}

// TestCutoverBodyBFD: the BFD sessions as they are at the cut-over travel
// in the CUTOVER body beside the free frames, and a body without them (an
// older predecessor) leaves the successor with the state document's.
func TestCutoverBodyBFD(t *testing.T) {
	cs := []bfd.Carried{{Peer: netip.MustParseAddr("fd00:18::1"), SourcePort: 50001, State: bfd.Up, LocalDisc: 3, RemoteDisc: 4,
		RemoteMult: 3, RemoteTxUS: 100000, RemoteRxUS: 100000, DesiredTxUS: 100000}}
	b, err := json.Marshal(cutoverBody{Free: map[int][]uint64{0: {1, 2}}, BFD: cs})
	if err != nil {
		t.Fatal(err)
	}
	var got cutoverBody
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got.BFD, cs) || len(got.Free[0]) != 2 {
		t.Fatalf("round trip: %v, %+v", err, got)
	}
	var old cutoverBody
	if err := json.Unmarshal([]byte(`{"free":{"0":[1]}}`), &old); err != nil || old.BFD != nil {
		t.Fatalf("a body without sessions: %v, %+v", err, old.BFD)
	}
}
