package failover

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Auto capacity drain thresholds (seeds 001.7).
const (
	AutoDrainBelowPercent  = 25               // drain a group with fewer than 25 % healthy members
	AutoUndrainFromPercent = 35               // undrain once ≥ 35 % healthy …
	AutoDrainHold          = 60 * time.Second // … has held for 60 s
	AutoDrainMaxPercent    = 50               // never more than 50 % of the rule's groups drained
)

// autoCapacityDrain sets GroupState.AutoDrained from the healthy share of
// each group and the previous state. It runs before the backends are
// built, because an auto-drained group takes no new connections.
//
// When the 50 % cap binds, groups already drained keep their place (they
// leave only by the undrain rule, so the cap never makes a group flap);
// new candidates drain in order of the lowest healthy share, then the
// group name.
func (w *work) autoCapacityDrain() {
	groups := w.st.Groups
	maxDrained := len(groups) * AutoDrainMaxPercent / 100

	var stay, candidates []*GroupState
	for i := range groups {
		g := &groups[i]
		pg := w.prevGroup(g.Name)
		wasDrained := pg != nil && pg.AutoDrained
		if !w.p.AutoCapacityDrain || g.Members == 0 {
			if wasDrained {
				w.autoDrainEvent(EventGroupAutoUndrained, g, "auto capacity drain off or group empty")
			}
			continue
		}
		if !wasDrained {
			if g.Healthy*100 < AutoDrainBelowPercent*g.Members {
				candidates = append(candidates, g)
			}
			continue
		}
		if g.Healthy*100 < AutoUndrainFromPercent*g.Members {
			stay = append(stay, g) // RecoverSince stays zero
			continue
		}
		since := pg.RecoverSince
		if since.IsZero() {
			since = w.now
		}
		if w.now.Sub(since) >= AutoDrainHold {
			w.autoDrainEvent(EventGroupAutoUndrained, g, fmt.Sprintf("%d/%d healthy since %s", g.Healthy, g.Members, since.UTC().Format(time.RFC3339)))
			continue
		}
		g.RecoverSince = since
		stay = append(stay, g)
	}

	// Fewer groups than before can push the drained ones over the cap:
	// release the healthiest first.
	byShare := func(a, b *GroupState) int {
		if c := cmp.Compare(a.Healthy*b.Members, b.Healthy*a.Members); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	}
	slices.SortFunc(stay, byShare)
	for len(stay) > maxDrained {
		g := stay[len(stay)-1]
		stay = stay[:len(stay)-1]
		g.RecoverSince = time.Time{}
		w.autoDrainEvent(EventGroupAutoUndrained, g, fmt.Sprintf("more than %d %% of groups drained", AutoDrainMaxPercent))
	}
	for _, g := range stay {
		g.AutoDrained = true
	}

	slices.SortFunc(candidates, byShare)
	for _, g := range candidates {
		if len(stay) >= maxDrained {
			break
		}
		g.AutoDrained = true
		stay = append(stay, g)
		w.autoDrainEvent(EventGroupAutoDrained, g, fmt.Sprintf("%d/%d healthy, below %d %%", g.Healthy, g.Members, AutoDrainBelowPercent))
	}
}

func (w *work) autoDrainEvent(kind EventKind, g *GroupState, reason string) {
	w.st.Events = append(w.st.Events, Event{Kind: kind, At: w.now, Group: g.Name, Reason: reason})
}
