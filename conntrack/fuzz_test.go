package conntrack

import (
	"testing"

	"github.com/xlbnet/xlb/hash"
)

type modelKey struct {
	k    hash.Key
	rule uint16
}

type modelVal struct {
	v      Value
	exp    Time
	unconf bool
}

// arenaState reads every occupied slot of tb.
func arenaState(tb *Table) map[modelKey]modelVal {
	m := map[modelKey]modelVal{}
	for bi := range tb.buckets {
		b := &tb.buckets[bi]
		for i := range Ways {
			if b.tags[i] == 0 {
				continue
			}
			e := &b.slots[i]
			m[modelKey{e.key, e.rule}] = modelVal{e.Value(), b.expires[i], b.flags[i]&flagUnconfirmed != 0}
		}
	}
	return m
}

// serveAll runs a Control request to completion on the calling goroutine.
func serveAll(tb *Table, now Time, r *request, budget int) {
	r.done = make(chan struct{})
	tb.mail.Store(r)
	for tb.mail.Load() != nil {
		tb.Serve(now, budget)
	}
}

// FuzzTable runs random operation sequences on a 16-slot table (two
// buckets, so evictions are frequent) against a map model. Invariants:
// Lookup hits exactly the model's live entries and returns their value
// (never another key's backend); the arena holds exactly the model's
// entries with the model's values, deadlines and flags; entries vanish
// only as the operation allows (an insert never evicts a live confirmed
// entry, and every new entry starts unconfirmed on a shorter timeout
// until a non-SYN lookup confirms it; Sweep removes only expired entries and at most its
// budget of buckets, Flush only matching ones); Len equals the occupied slots and
// never exceeds Cap.
func FuzzTable(f *testing.F) {
	f.Add(uint64(1), []byte{2, 1, 0, 10, 0, 1, 0, 10, 4, 0, 0, 20, 0, 1, 0, 10})
	f.Add(uint64(2), []byte{3, 1, 0, 10, 3, 2, 0, 10, 3, 3, 0, 10, 0, 2, 0, 1, 5, 0, 0, 16})
	f.Add(uint64(3), []byte{2, 7, 1, 39, 6, 7, 1, 3, 7, 0, 0, 5, 7, 1, 1, 1})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		tb, err := New(16, seed)
		if err != nil {
			t.Fatal(err)
		}
		const unconfIdle = 8
		tb.SetUnconfirmedIdle(unconfIdle)
		life := func(idle Ticks, unconf bool) Ticks {
			if unconf {
				return min(idle, unconfIdle)
			}
			return idle
		}
		model := map[modelKey]modelVal{}
		var now Time
		for step := 0; len(ops) >= 4; step++ {
			op, a, b, c := ops[0]%8, ops[1], ops[2], ops[3]
			ops = ops[4:]
			k := flowKey(uint32(a % 40))
			mk := modelKey{k, uint16(b % 2)}
			idle := Ticks(1 + c%40)
			syn := op%2 == 1
			v := Value{Backend: uint32(c%4) | uint32(step)<<8, RuleGen: uint32(a), BackendGen: uint32(step)}
			var filter Filter
			budget := 0
			mv, had := model[mk]
			live := had && now.Before(mv.exp)
			inserted := false

			switch op {
			case 0, 1: // lookup, with a non-SYN or a SYN packet
				e := tb.Lookup(&k, mk.rule, now, idle, syn)
				if (e != nil) != live {
					t.Fatalf("step %d: lookup hit %v, model live %v", step, e != nil, live)
				}
				if e != nil {
					if e.Value() != mv.v || e.Key() != k || e.Rule() != mk.rule {
						t.Fatalf("step %d: lookup returned %+v for %v/%d, model %+v", step, e.Value(), e.Key(), e.Rule(), mv.v)
					}
					mv.unconf = mv.unconf && syn
					mv.exp = now.Add(life(idle, mv.unconf))
					model[mk] = mv
				}
			case 2, 3: // insert, non-SYN or SYN
				_, ok := tb.Insert(&k, mk.rule, v, now, idle, syn)
				if had && !ok {
					t.Fatalf("step %d: insert over an existing entry failed", step)
				}
				if ok {
					unconf := !had || syn || mv.unconf
					model[mk] = modelVal{v, now.Add(life(idle, unconf)), unconf}
					inserted = !had
				}
			case 4: // time passes
				now += Time(c % 64)
			case 5: // sweep
				budget = int(c % 20)
				tb.Sweep(now, budget)
			case 6: // lookup and re-select a hit
				if e := tb.Lookup(&k, mk.rule, now, idle, false); e != nil {
					tb.Reselect(e, v)
					model[mk] = modelVal{v, now.Add(idle), false}
				} else if live {
					t.Fatalf("step %d: lookup missed a live entry", step)
				}
			case 7: // flush by rule or by backend
				if c%2 == 0 {
					filter = Filter{ByRule: true, Rule: uint16(b % 2)}
				} else {
					filter = Filter{ByBackend: true, Backend: uint32(b % 4)}
				}
				serveAll(tb, now, &request{op: opFlush, filter: filter}, 1+int(a%7))
			}

			// Reconcile the model with the arena.
			arena := arenaState(tb)
			vanished := 0
			for key, m := range model {
				got, ok := arena[key]
				if ok {
					if got != m {
						t.Fatalf("step %d op %d: slot of %v/%d = %+v, model %+v", step, op, key.k, key.rule, got, m)
					}
					continue
				}
				vanished++
				delete(model, key)
				expired := !now.Before(m.exp)
				switch op {
				case 0, 1, 6:
					if key != mk || !expired {
						t.Fatalf("step %d: lookup removed %v/%d (expired %v)", step, key.k, key.rule, expired)
					}
				case 2, 3:
					if !inserted {
						t.Fatalf("step %d: an entry vanished without an insert taking its slot", step)
					}
					if !expired && !m.unconf {
						t.Fatalf("step %d: an insert evicted a live confirmed entry", step)
					}
				case 5:
					if !expired {
						t.Fatalf("step %d: sweep removed a live entry", step)
					}
				case 7:
					if !filter.match(key.rule, m.v.Backend) {
						t.Fatalf("step %d: flush %+v removed %v/%d backend %d", step, filter, key.k, key.rule, m.v.Backend)
					}
				default:
					t.Fatalf("step %d: op %d removed an entry", step, op)
				}
			}
			if len(arena) != len(model) {
				t.Fatalf("step %d: arena has %d entries, model %d", step, len(arena), len(model))
			}
			if (op == 2 || op == 3) && vanished > 1 {
				t.Fatalf("step %d: one insert removed %d entries", step, vanished)
			}
			if op == 5 && vanished > budget*Ways {
				t.Fatalf("step %d: sweep removed %d > budget %d buckets", step, vanished, budget)
			}
			if tb.Len() != len(arena) || tb.Len() > tb.Cap() {
				t.Fatalf("step %d: Len %d, occupied %d, Cap %d", step, tb.Len(), len(arena), tb.Cap())
			}
		}
	})
}
