package dataplane

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
)

// RuleConfig is the static part of a rule that BuildRule needs besides
// the eligible-set engine's output.
type RuleConfig struct {
	Name             string
	Match            RuleMatch
	Affinity         hash.Affinity
	Mode             hash.TrackingMode
	Persistence      failover.PersistencePolicy
	Idle             time.Duration
	FragmentTracking bool
	TableSize        uint32 // Maglev M, prime
	// ZoneClients maps client prefixes to zones (zonal affinity); the
	// tables of the zones come from failover.State.Zones.
	ZoneClients []failover.ClientZone
	// SourceRanges are the client prefixes the rule admits (source_ranges);
	// empty admits every source.
	SourceRanges []netip.Prefix
	// Tables, when set, builds the Maglev tables: a table of the same
	// content as a live one (another rule's, or this rule's before) is
	// shared instead of built again. Nil: every table is built.
	Tables *hash.Tables
}

// build builds one Maglev table, through cfg.Tables when set.
func (cfg *RuleConfig) build(bs []hash.Backend, seed uint64) (*hash.MaglevTable, error) {
	if cfg.Tables != nil {
		return cfg.Tables.Build(bs, cfg.TableSize, seed)
	}
	return hash.Build(bs, cfg.TableSize, seed)
}

// Clock converts the control plane's wall-clock instants to the workers'
// conntrack.Time (both read the same clock).
type Clock interface {
	Ticks(t time.Time) conntrack.Time
}

// BuildRule turns one rule's configuration and failover.State into the
// Rule the workers read: the Maglev table over the eligible members (at
// their weights), every backend's generations and draining deadline, the
// rule's flush generation and the persistence table. Backend slots are the
// failover.Backend IDs; slots with no backend stay absent. It runs on the
// control plane; the Maglev build is its only real cost.
func BuildRule(cfg RuleConfig, st *failover.State, seed uint64, clock Clock) (*Rule, error) {
	if err := failover.CheckPersistence(cfg.Persistence, cfg.Mode); err != nil {
		return nil, fmt.Errorf("rule %s: %w", cfg.Name, err)
	}
	r := &Rule{
		Name:             cfg.Name,
		Present:          true,
		Match:            cfg.Match,
		Affinity:         cfg.Affinity,
		Mode:             cfg.Mode,
		Idle:             conntrack.TicksOf(cfg.Idle),
		FlushGen:         uint32(st.FlushGen),
		FragmentTracking: cfg.FragmentTracking,
	}
	if r.Idle == 0 {
		r.Idle = conntrack.DefaultIdle
	}
	src, err := NewSourceSet(cfg.SourceRanges)
	if err != nil {
		return nil, fmt.Errorf("rule %s: %w", cfg.Name, err)
	}
	r.Sources = src
	for p := range 256 {
		r.Persist.Set(uint8(p), failover.Persists(cfg.Persistence, cfg.Mode, cfg.Affinity, uint8(p)))
	}
	for _, b := range st.Backends {
		if int(b.ID) >= len(r.Backends) {
			r.Backends = append(r.Backends, make([]Backend, int(b.ID)+1-len(r.Backends))...)
		}
		addr, err := netip.ParseAddr(b.Name)
		if err != nil {
			return nil, fmt.Errorf("rule %s: backend %q: %w", cfg.Name, b.Name, err)
		}
		d := &r.Backends[b.ID]
		if d.Present {
			return nil, fmt.Errorf("rule %s: backends %s and %s share slot %d", cfg.Name, d.Name, b.Name, b.ID)
		}
		g := b.Gens()
		*d = Backend{
			Name: b.Name, Addr: addr.As16(), Present: true,
			UnhealthyGen: g.UnhealthyGen, DrainGen: g.DrainGen, DrainFloor: g.DrainFloor,
		}
		if !b.DrainUntil.IsZero() {
			d.DrainUntil = clock.Ticks(b.DrainUntil)
		}
	}
	tbl, err := cfg.build(failover.MaglevBackends(st.Eligible), seed)
	if err != nil {
		return nil, fmt.Errorf("rule %s: %w", cfg.Name, err)
	}
	r.Table = tbl
	if len(st.Zones) > 0 && len(cfg.ZoneClients) > 0 {
		tables := map[string]*hash.MaglevTable{}
		for _, v := range st.Zones {
			if tables[v.Zone], err = cfg.build(failover.MaglevBackends(v.Members), seed); err != nil {
				return nil, fmt.Errorf("rule %s: zone %s: %w", cfg.Name, v.Zone, err)
			}
		}
		prefixes := make([]netip.Prefix, len(cfg.ZoneClients))
		zoneOf := make([]string, len(cfg.ZoneClients))
		for i, c := range cfg.ZoneClients {
			prefixes[i], zoneOf[i] = c.Prefix, c.Zone
		}
		r.setZones(prefixes, zoneOf, tables)
	}
	return r, nil
}
