package k8s

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Limits on a Service's node backends (seed 003, external passthrough NLB):
// with Cluster GKE puts at most 250 nodes in the backend, a stable subset
// when there are more; with Local at most 3000 nodes with serving Pods.
const (
	MaxClusterNodes = 250
	MaxLocalNodes   = 3000
)

// HealthCheck is the timing of the rules' node health checks. The defaults
// are the ones GKE gives the checks it creates for LoadBalancer Services
// (8 s interval, 1 s timeout, healthy after 1 success, unhealthy after 3
// failures).
type HealthCheck struct {
	Interval, Timeout           time.Duration
	HealthyThreshold, Unhealthy int
}

// DefaultHealthCheck is GKE's timing.
var DefaultHealthCheck = HealthCheck{Interval: 8 * time.Second, Timeout: time.Second, HealthyThreshold: 1, Unhealthy: 3}

// Options configure the controller.
type Options struct {
	// Config is the appliance's xlb.toml: its rules_dir is where rule files
	// are written, its control_socket where the reload goes, and the whole
	// is validated as `xlb validate` does before anything is written.
	Config string
	// Offline skips the checks of this machine (config.CheckHost), as
	// `xlb validate --offline`.
	Offline bool
	// Class is the spec.loadBalancerClass served (DefaultClass when "").
	Class string
	// IncludeClassless also serves Services of type LoadBalancer without a
	// class (the cluster then must have no other load balancer for them).
	IncludeClassless bool
	// Pools are the VIPs given to Services, in order of preference.
	Pools Pools
	// Encap is how the appliance reaches the nodes: IPIP, GUE, GRE or
	// DIRECT (the rules' [encap] type); GUEPort its GUE port (0: default).
	Encap   string
	GUEPort int
	// HealthCheck is the timing of the node checks (DefaultHealthCheck
	// when zero).
	HealthCheck HealthCheck
	// DrainingTimeout is the rules' connection_draining_timeout: how long
	// a node that stops being a backend keeps its connections.
	DrainingTimeout time.Duration
	// ClientZones maps client prefixes to zones for zonal affinity (the
	// rules' [zonal_affinity.clients]).
	ClientZones map[string][]netip.Prefix
	// Debounce is how long the controller waits for more changes before it
	// writes and reloads (bursts become one reload). Default 200 ms.
	Debounce time.Duration
	// Resync re-reads everything this often (informer resync). Default 10 m.
	Resync time.Duration

	// Leader election: one appliance of the fleet writes Service status
	// and Events, the one holding the Lease LeaseNamespace/LeaseName.
	Identity       string // this appliance (default: host name)
	LeaseNamespace string // default "kube-system"
	LeaseName      string // default "xlb-k8s-" + a name derived from the class
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration

	Logger *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.Class == "" {
		o.Class = DefaultClass
	}
	if o.Encap == "" {
		o.Encap = "IPIP"
	}
	switch o.Encap {
	case "IPIP", "GUE", "GRE", "DIRECT":
	default:
		return fmt.Errorf("encapsulation %q: want IPIP, GUE, GRE or DIRECT", o.Encap)
	}
	if o.HealthCheck == (HealthCheck{}) {
		o.HealthCheck = DefaultHealthCheck
	}
	if o.Debounce == 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.Resync == 0 {
		o.Resync = 10 * time.Minute
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = "kube-system"
	}
	if o.LeaseName == "" {
		o.LeaseName = "xlb-k8s-" + leaseSuffix(o.Class)
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.Identity == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no identity and no host name: %w", err)
		}
		o.Identity = h
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// leaseSuffix turns a class ("xlbnet.github.io/xlb") into a name part
// ("xlbnet.github.io.xlb"): every class has its own leader.
func leaseSuffix(class string) string {
	b := []byte(strings.ToLower(class))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '.'
		}
	}
	return string(b)
}
