package config

import "time"

// ApplianceState is the appliance-wide part of the state overlay: `xlb
// appliance drain` withdraws every VIP from the routers (BGP) while the
// appliance keeps forwarding what still reaches it; `undrain` announces
// them again. It survives restarts like backend drains do.
type ApplianceState struct {
	Drained   bool
	DrainedAt time.Time
}

// DrainAppliance marks the appliance drained and reports whether it was
// not already (a second drain keeps the first start time).
func (st *State) DrainAppliance(now time.Time) bool {
	if st.Appliance.Drained {
		return false
	}
	st.Appliance = ApplianceState{Drained: true, DrainedAt: now.UTC().Truncate(time.Second)}
	return true
}

// UndrainAppliance ends an appliance drain and reports whether there was
// one.
func (st *State) UndrainAppliance() bool {
	if !st.Appliance.Drained {
		return false
	}
	st.Appliance = ApplianceState{}
	return true
}

// applianceFile is the [appliance] table of state_file.
type applianceFile struct {
	Drained   bool       `toml:"drained,omitempty"`
	DrainedAt *time.Time `toml:"drained_at,omitempty"`
}

func (a ApplianceState) file() *applianceFile {
	if !a.Drained {
		return nil
	}
	f := &applianceFile{Drained: true}
	if !a.DrainedAt.IsZero() {
		t := a.DrainedAt.UTC()
		f.DrainedAt = &t
	}
	return f
}

// readApplianceState reads the optional [appliance] table of state_file.
func readApplianceState(root *table, st *State) {
	t := root.sub("appliance")
	t.boolean("drained", &st.Appliance.Drained)
	if v, ok := t.get("drained_at"); ok {
		if ts, isTime := v.(time.Time); isTime {
			st.Appliance.DrainedAt = ts
		} else {
			t.wrongType("drained_at", "a date-time", v)
		}
	}
	t.done()
}
