package conntrack

import "testing"

func sharedArena(s *Shared) map[modelKey]modelVal {
	m := map[modelKey]modelVal{}
	for bi := range s.buckets {
		b := &s.buckets[bi]
		for i := range SharedWays {
			if b.tag(i) == 0 {
				continue
			}
			k, rule := unpackKey(&b.slots[i])
			m[modelKey{k, rule}] = modelVal{v: b.value(i), exp: Time(b.expires[i].Load())}
		}
	}
	return m
}

// FuzzShared runs random Set/Get/Flush sequences on a 16-slot Shared
// table from one goroutine against a map model: Get hits exactly the
// model's live entries with their values; the arena holds exactly the
// model's entries; an uncontended Set never fails; entries vanish only
// when a Set of a new key takes their slot (one at most) or a Flush
// selects them. (Concurrency is covered by TestSharedConcurrent.)
func FuzzShared(f *testing.F) {
	f.Add(uint64(1), []byte{1, 1, 0, 10, 0, 1, 0, 10, 2, 0, 0, 20, 0, 1, 0, 10})
	f.Add(uint64(2), []byte{1, 1, 0, 10, 1, 2, 1, 10, 1, 3, 0, 10, 3, 0, 1, 0, 0, 2, 1, 1})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		s, err := NewShared(16, seed)
		if err != nil {
			t.Fatal(err)
		}
		model := map[modelKey]modelVal{}
		var now Time
		for step := 0; len(ops) >= 4; step++ {
			op, a, b, c := ops[0]%4, ops[1], ops[2], ops[3]
			ops = ops[4:]
			k := flowKey(uint32(a % 40))
			mk := modelKey{k, uint16(b % 2)}
			mv, had := model[mk]
			live := had && now.Before(mv.exp)
			var filter Filter
			newKey := false
			switch op {
			case 0: // get, refreshing by c%3 seconds
				refresh := Ticks(c%3) * TicksPerSecond
				v, ok := s.Get(&k, mk.rule, now, refresh)
				if ok != live || (ok && v != mv.v) {
					t.Fatalf("step %d: Get = %+v, %v; model %+v live %v", step, v, ok, mv.v, live)
				}
				if ok && refresh > 0 && now.Add(refresh).Sub(mv.exp) >= refreshStep {
					mv.exp = now.Add(refresh)
					model[mk] = mv
				}
			case 1: // set
				v := Value{Backend: uint32(c % 4), RuleGen: uint32(step), BackendGen: uint32(a)}
				if !s.Set(&k, mk.rule, v, now, Ticks(1+c%40)) {
					t.Fatalf("step %d: uncontended Set failed", step)
				}
				model[mk] = modelVal{v: v, exp: now.Add(Ticks(1 + c%40))}
				newKey = !had
			case 2: // time passes
				now += Time(c % 64)
			case 3: // flush
				if c%2 == 0 {
					filter = Filter{ByRule: true, Rule: uint16(b % 2)}
				} else {
					filter = Filter{ByBackend: true, Backend: uint32(b % 4)}
				}
				s.Flush(filter)
			}
			arena := sharedArena(s)
			vanished := 0
			for key, m := range model {
				got, ok := arena[key]
				if ok {
					if got != m {
						t.Fatalf("step %d: slot of %v/%d = %+v, model %+v", step, key.k, key.rule, got, m)
					}
					continue
				}
				vanished++
				delete(model, key)
				switch {
				case op == 1 && newKey:
				case op == 3 && filter.match(key.rule, m.v.Backend):
				default:
					t.Fatalf("step %d op %d: %v/%d vanished", step, op, key.k, key.rule)
				}
			}
			if len(arena) != len(model) || (op == 1 && vanished > 1) {
				t.Fatalf("step %d: arena %d entries, model %d, vanished %d", step, len(arena), len(model), vanished)
			}
		}
	})
}
