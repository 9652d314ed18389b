package failover_test

import (
	"fmt"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// The control plane keeps the previous State of a rule and recomputes on
// every change; here the primaries fail and the failover group takes over.
func ExampleCompute() {
	groups := []failover.Group{
		{Name: "a", Role: failover.RolePrimary, CapacityScaler: 1},
		{Name: "b", Role: failover.RoleFailover, CapacityScaler: 1},
	}
	backends := func(primary failover.Health) []failover.Backend {
		return []failover.Backend{
			{Name: "10.0.1.10", ID: 1, Group: "a", Health: primary},
			{Name: "10.0.1.11", ID: 2, Group: "a", Health: primary},
			{Name: "10.0.2.10", ID: 3, Group: "b", Health: failover.HealthHealthy},
		}
	}
	policy := failover.DefaultPolicy()
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

	st, err := failover.Compute(policy, groups, backends(failover.HealthHealthy), nil, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err = failover.Compute(policy, groups, backends(failover.HealthUnhealthy), st, now.Add(time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ev := range st.Events {
		fmt.Println(ev.From, "→", ev.To, "switched:", ev.Switched)
	}
	for _, m := range st.Eligible {
		fmt.Println("eligible", m.Name, "weight", m.Weight)
	}
	b, _ := st.Backend("10.0.1.10")
	fmt.Println("10.0.1.10 entries drain until", b.DrainUntil.Format(time.TimeOnly))
	// Output:
	// PRIMARY → FAILOVER switched: true
	// eligible 10.0.2.10 weight 1
	// 10.0.1.10 entries drain until 04:10:01
}
