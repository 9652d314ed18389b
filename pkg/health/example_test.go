package health_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/health"
)

// The daemon builds one Target per rule and backend from the config, and
// feeds every change into the rule's failover.Backend before recomputing.
func ExampleChecker() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(health.WeightHeader, "37")
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())

	changes := make(chan health.Status, 10)
	c := health.New(health.Options{OnChange: func(s health.Status) { changes <- s }})
	defer c.Stop()

	hc := health.Check{
		Kind: health.HTTP, Port: ap.Port(), RequestPath: "/",
		Interval: 10 * time.Millisecond, Timeout: 5 * time.Second,
		HealthyThreshold: 2, UnhealthyThreshold: 2,
	}
	if err := c.Set([]health.Target{{Key: health.Key{Rule: "web", Backend: ap.Addr()}, Check: hc}}); err != nil {
		fmt.Println(err)
		return
	}
	b := failover.Backend{Name: ap.Addr().String()}
	for b.Health != failover.HealthHealthy {
		s := <-changes
		b.Health, b.Weight, b.WeightState = s.Health, s.Weight, s.WeightState
		fmt.Println(s.Rule, s.Backend, s.Health, s.WeightState, s.Weight)
	}
	// Output:
	// web 127.0.0.1 UNKNOWN OK 37
	// web 127.0.0.1 HEALTHY OK 37
}
