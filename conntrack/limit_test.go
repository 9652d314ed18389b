package conntrack

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/benchutil"
)

// TestNewEntryLimit: a full bucket admits a burst, then the rate per tick;
// refusals are counted and the flow gets no entry; overwriting an entry
// is not limited; AllowNew draws from the same bucket; rate 0 is no limit.
func TestNewEntryLimit(t *testing.T) {
	tb := mustNew(t, 1<<12)
	tb.SetNewEntryLimit(160, 20) // 10 per tick, bursts of 20
	if r, b := tb.NewEntryLimit(); r != 160 || b != 20 {
		t.Fatalf("limit = %d/%d", r, b)
	}
	var now Time = 100
	call := uint32(0)
	made := func(n int, at Time) int {
		call++
		ok := 0
		for i := range n {
			k := flowKey(call<<16 | uint32(i))
			if _, inserted := tb.Insert(&k, 0, Value{}, at, minute, i%2 == 0); inserted {
				ok++
			}
		}
		return ok
	}
	if got := made(50, now); got != 20 {
		t.Errorf("burst: %d of 50 admitted, want 20", got)
	}
	if got := made(50, now); got != 0 {
		t.Errorf("same tick, empty bucket: %d admitted, want 0", got)
	}
	if got := made(50, now+1); got != 10 {
		t.Errorf("one tick later: %d admitted, want 10 (160/s)", got)
	}
	if got := made(50, now+100); got != 20 {
		t.Errorf("after a long pause: %d admitted, want the burst, 20", got)
	}
	st := tb.Stats()
	if st.InsertSkipped != 150 || st.Inserts != 50 || st.MissSYN != 100 {
		t.Errorf("stats %+v: want 150 skipped, 50 inserts, 100 SYN misses", st)
	}
	// An existing entry is overwritten whatever the bucket holds.
	k := flowKey(1 << 16) // made by the first call
	if _, ok := tb.Insert(&k, 0, Value{Backend: 9}, now+100, minute, true); !ok {
		t.Error("overwriting an entry was limited")
	}
	if tb.AllowNew(now + 100) {
		t.Error("AllowNew with an empty bucket")
	}
	if !tb.AllowNew(now + 101) {
		t.Error("AllowNew refused after a refill")
	}
	tb.SetNewEntryLimit(0, 0)
	if got := made(100, now+101); got != 100 {
		t.Errorf("no limit: %d of 100 admitted", got)
	}
	if a := testing.AllocsPerRun(1000, func() {
		tb.SetNewEntryLimit(16, 1)
		k := flowKey(7)
		tb.Insert(&k, 0, Value{}, now+200, minute, false)
		tb.AllowNew(now + 200)
	}); a != 0 {
		t.Errorf("the limiter allocates %v times", a)
	}
}

// TestMissKinds: new flows are counted by kind, Katran's split.
func TestMissKinds(t *testing.T) {
	tb := mustNew(t, 64)
	syn, ack, udp := flowKey(1), flowKey(2), flowKey(3)
	udp.Proto = 17
	tb.Insert(&syn, 0, Value{}, 0, minute, true) // a SYN is inserted without a lookup
	tb.Lookup(&ack, 0, 0, minute, false)         // a mid-flow TCP segment without state
	tb.Lookup(&udp, 0, 0, minute, false)
	tb.Lookup(&udp, 0, 0, minute, true) // an ICMP error's lookup: no kind
	st := tb.Stats()
	if st.MissSYN != 1 || st.MissNonSYN != 1 || st.MissOther != 1 || st.Misses != 3 {
		t.Errorf("stats %+v: want one miss of each kind, 3 misses", st)
	}
	tb.Lookup(&syn, 0, 1, minute, false)
	if st := tb.Stats(); st.Confirmed != 1 {
		t.Errorf("confirmed = %d, want 1", st.Confirmed)
	}
}

// BenchmarkFlood: the cost per new flow of a random-tuple flood against a
// table full of established flows, with the default limit (most new flows
// refused by the bucket) and without one (every insert looks for a victim
// among live confirmed entries and fails).
func BenchmarkFlood(b *testing.B) {
	for _, c := range []struct {
		name string
		rate int
	}{{"limited", 125000}, {"unlimited", 0}} {
		b.Run(c.name, func(b *testing.B) {
			tb := mustNew(b, 1<<16)
			for i := uint32(0); tb.Len() < tb.Cap() && i < 1<<20; i++ {
				k := flowKey(i)
				if _, ok := tb.Insert(&k, 0, Value{}, 0, DefaultIdle, false); ok {
					tb.Lookup(&k, 0, 0, DefaultIdle, false)
				}
			}
			tb.SetNewEntryLimit(c.rate, 0)
			keys := benchKeys(1 << 16)
			for i := range keys {
				keys[i].SrcPort ^= 0x5555 // not in the table
			}
			b.ReportAllocs()
			cpu := benchutil.Process()
			defer cpu.Report(b, "cpu-ns/op")
			i := 0
			now := Time(1)
			for b.Loop() {
				tb.Insert(&keys[i], 0, Value{}, now, DefaultIdle, i%3 == 0)
				if i++; i == len(keys) {
					i, now = 0, now+1
				}
			}
		})
	}
}
