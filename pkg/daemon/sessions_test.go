package daemon

import (
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// TestSplitSessions: a shared-table session is active while its last
// packet (a Get that refreshed it) is younger than its rule's window —
// 10 s, or half an idle timeout shorter than 20 s — and inactive after
// that until it expires; sessions that no longer decide are not counted;
// a deadline beyond now+idle (the idle timeout shortened by a reload)
// counts as recent. Fails when sessions are counted without the split
// (everything active, or everything inactive).
func TestSplitSessions(t *testing.T) {
	sh, err := conntrack.NewShared(1024, 7)
	if err != nil {
		t.Fatal(err)
	}
	long, short := conntrack.TicksOf(60*time.Second), conntrack.TicksOf(8*time.Second) // windows 10 s and 4 s
	rules := []*dataplane.Rule{{Idle: long, Mode: hash.PerSession, Affinity: hash.AffinityClientIP}, {Idle: short, Mode: hash.PerSession, Affinity: hash.AffinityClientIPProto}}
	var clk conntrack.FakeClock
	key := func(i byte) *hash.Key {
		return &hash.Key{Src: [16]byte{15: i}, Dst: [16]byte{15: 200}, Kind: hash.Tuple2}
	}
	set := func(i byte, rule uint16, backend uint32, idle conntrack.Ticks) {
		if !sh.Set(key(i), rule, conntrack.Value{Backend: backend}, conntrack.Now(&clk), idle) {
			t.Fatalf("set %d", i)
		}
	}
	set(1, 0, 0, long)  // a packet at 12 s (a refreshing Get): active
	set(2, 0, 0, long)  // last packet at 0: inactive at 12.5 s
	set(4, 1, 1, short) // expired at 8 s: gone
	set(5, 0, 1, long)  // backend 1 of rule 0 no longer decides: not counted
	clk.Set(7 * time.Second)
	set(6, 1, 1, short) // 5.5 s ago at 12.5 s, window 4 s: inactive
	clk.Set(12 * time.Second)
	set(3, 1, 1, short) // 0.5 s ago: active
	set(7, 1, 1, long)  // rule 1's idle was 60 s before a reload: recent
	if _, ok := sh.Get(key(1), 0, conntrack.Now(&clk), long); !ok {
		t.Fatal("get 1")
	}
	clk.Set(12500 * time.Millisecond)
	now := conntrack.Now(&clk)
	c := connCounts{shared: map[[2]uint32]int{}, sessionsActive: map[[2]uint32]int{}}
	valid := func(rule uint16, v conntrack.Value, _ uint8) bool { return !(rule == 0 && v.Backend == 1) }
	splitSessions(&c, sh.List(conntrack.Filter{}, now, sh.Cap()), rules, valid)
	for k, want := range map[[2]uint32][2]int{{0, 0}: {1, 1}, {1, 1}: {2, 1}, {0, 1}: {0, 0}} {
		active, inactive := c.of(k)
		if active != want[0] || inactive != want[1] || c.shared[k] != want[0]+want[1] {
			t.Errorf("rule %d backend %d: %d active, %d inactive of %d sessions; want %d and %d", k[0], k[1], active, inactive, c.shared[k], want[0], want[1])
		}
	}
	if !sharedSessions(rules[0]) || !sharedSessions(rules[1]) || sharedSessions(&dataplane.Rule{Mode: hash.PerSession, Affinity: hash.AffinityClientIPPortProto}) ||
		sharedSessions(&dataplane.Rule{Mode: hash.PerConnection, Affinity: hash.AffinityClientIP}) {
		t.Error("sharedSessions disagrees with the dataplane's choice of table")
	}
	if w := sessionActiveWindow(long); w != conntrack.TicksOf(10*time.Second) {
		t.Errorf("window of a 60 s idle timeout: %v", w.Duration())
	}
	if w := sessionActiveWindow(short); w != conntrack.TicksOf(4*time.Second) {
		t.Errorf("window of an 8 s idle timeout: %v", w.Duration())
	}
}
