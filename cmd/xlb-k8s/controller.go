package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/xlbnet/xlb/pkg/k8s"
	"github.com/xlbnet/xlb/pkg/logflags"
)

func k8sCommand() *cli.Command {
	return &cli.Command{
		Name:      "k8s",
		Usage:     "run the Kubernetes controller: LoadBalancer Services become rule files of this appliance",
		ArgsUsage: " ",
		Description: "Watches the cluster's Services of type LoadBalancer whose spec.loadBalancerClass is --class\n" +
			"(and, with --include-classless, those without a class), their EndpointSlices and the Nodes.\n" +
			"For each Service it writes one rule file per VIP and protocol into the rules_dir of --config\n" +
			"(k8s.NAMESPACE.NAME.PROTOCOL.FAMILY.toml, marked as its own: files it did not write are never\n" +
			"touched), checks the whole configuration as `xlb validate` does, and reloads the daemon once\n" +
			"per burst of changes through control_socket. A Service whose rules do not validate keeps its\n" +
			"running rules and gets a Kubernetes Event. Backends are the nodes: with externalTrafficPolicy\n" +
			"Cluster every Ready, schedulable node (kube-proxy's :10256/healthz decides), with Local the\n" +
			"nodes with a ready endpoint (the Service's healthCheckNodePort decides). VIPs come from --pool.\n" +
			"Every appliance of a fleet runs it and writes the same rules; the one holding the Lease\n" +
			"(--lease-namespace/--lease-name) gives VIPs, writes Service status and Events.\n" +
			"Credentials: --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config.\n" +
			"deploy/kubernetes.md has the RBAC manifest, the annotations and the differences from GKE.",
		Flags: append([]cli.Flag{
			configFlag(),
			&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig `FILE` (default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config)"},
			&cli.StringFlag{Name: "class", Value: k8s.DefaultClass, Usage: "the spec.loadBalancerClass served"},
			&cli.BoolFlag{Name: "include-classless", Usage: "also serve LoadBalancer Services without a loadBalancerClass"},
			&cli.StringSliceFlag{Name: "pool", Usage: "VIPs to give Services: a `PREFIX` or FIRST-LAST range (repeat; IPv4 and IPv6; in order of preference)"},
			&cli.StringFlag{Name: "encap", Value: "IPIP", Usage: "how packets reach the nodes: IPIP, GUE, GRE or DIRECT (nodes on this appliance's link)"},
			&cli.IntFlag{Name: "gue-port", Usage: "UDP port of GUE on the nodes (0: xlb's default, 6080)"},
			&cli.DurationFlag{Name: "health-check-interval", Value: k8s.DefaultHealthCheck.Interval, Usage: "node health check interval"},
			&cli.DurationFlag{Name: "health-check-timeout", Value: k8s.DefaultHealthCheck.Timeout, Usage: "node health check timeout"},
			&cli.IntFlag{Name: "healthy-threshold", Value: k8s.DefaultHealthCheck.HealthyThreshold, Usage: "successes before a node is healthy"},
			&cli.IntFlag{Name: "unhealthy-threshold", Value: k8s.DefaultHealthCheck.Unhealthy, Usage: "failures before a node is unhealthy"},
			&cli.DurationFlag{Name: "connection-draining-timeout", Usage: "how long a node that stops being a backend keeps its connections (0s .. 1h)"},
			&cli.StringSliceFlag{Name: "client-zone", Usage: "zonal affinity: clients of `ZONE=PREFIX[,PREFIX…]` are in ZONE (repeat)"},
			&cli.BoolFlag{Name: "offline", Usage: "validate the files only, not this machine (as xlb validate --offline)"},
			&cli.StringFlag{Name: "identity", Usage: "this appliance in the leader election (default: the host name)"},
			&cli.StringFlag{Name: "lease-namespace", Value: "kube-system", Usage: "namespace of the leader election's Lease"},
			&cli.StringFlag{Name: "lease-name", Usage: "name of the Lease (default: xlb-k8s- and the class)"},
			&cli.DurationFlag{Name: "lease-duration", Value: 15 * time.Second, Usage: "how long a silent leader keeps the Lease"},
			&cli.DurationFlag{Name: "renew-deadline", Value: 10 * time.Second, Usage: "how long the leader tries to renew before it gives up"},
			&cli.DurationFlag{Name: "retry-period", Value: 2 * time.Second, Usage: "how often candidates try to take the Lease"},
			&cli.DurationFlag{Name: "debounce", Value: 200 * time.Millisecond, Usage: "wait this long for more changes before writing and reloading"},
		}, logflags.Flags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Sprintf("k8s takes no arguments, got %q", c.Args().First())}
			}
			log, err := logflags.New(c, c.App.ErrWriter)
			if err != nil {
				return usageError{err.Error()}
			}
			o, err := k8sOptions(c)
			if err != nil {
				return err
			}
			o.Logger = log
			rc, err := kubeConfig(c.String("kubeconfig"))
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			ctl, err := k8s.New(client, o)
			if err != nil {
				return usageError{err.Error()}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log.Info("starting", "api", rc.Host, "config", o.Config, "pools", c.StringSlice("pool"))
			err = ctl.Run(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
}

// k8sOptions reads the flags into controller options (usage errors for
// values out of range).
func k8sOptions(c *cli.Context) (k8s.Options, error) {
	o := k8s.Options{
		Config:           c.String("config"),
		Offline:          c.Bool("offline"),
		Class:            c.String("class"),
		IncludeClassless: c.Bool("include-classless"),
		Encap:            strings.ToUpper(c.String("encap")),
		GUEPort:          c.Int("gue-port"),
		HealthCheck: k8s.HealthCheck{
			Interval: c.Duration("health-check-interval"), Timeout: c.Duration("health-check-timeout"),
			HealthyThreshold: c.Int("healthy-threshold"), Unhealthy: c.Int("unhealthy-threshold"),
		},
		DrainingTimeout: c.Duration("connection-draining-timeout"),
		Identity:        c.String("identity"),
		LeaseNamespace:  c.String("lease-namespace"),
		LeaseName:       c.String("lease-name"),
		LeaseDuration:   c.Duration("lease-duration"),
		RenewDeadline:   c.Duration("renew-deadline"),
		RetryPeriod:     c.Duration("retry-period"),
		Debounce:        c.Duration("debounce"),
	}
	if len(c.StringSlice("pool")) == 0 {
		return o, usageError{"--pool: at least one pool of VIPs is needed (e.g. --pool 203.0.113.64/26)"}
	}
	for _, s := range c.StringSlice("pool") {
		p, err := k8s.ParsePool(s)
		if err != nil {
			return o, usageError{"--pool: " + err.Error()}
		}
		o.Pools = append(o.Pools, p)
	}
	if g := o.GUEPort; g < 0 || g > 65535 {
		return o, usageError{fmt.Sprintf("--gue-port %d: want 1..65535", g)}
	}
	for _, s := range c.StringSlice("client-zone") {
		zone, list, ok := strings.Cut(s, "=")
		if !ok || zone == "" || list == "" {
			return o, usageError{fmt.Sprintf("--client-zone %q: want ZONE=PREFIX[,PREFIX…]", s)}
		}
		if o.ClientZones == nil {
			o.ClientZones = map[string][]netip.Prefix{}
		}
		for _, f := range strings.Split(list, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(f))
			if err != nil {
				return o, usageError{fmt.Sprintf("--client-zone %q: %v", s, err)}
			}
			o.ClientZones[zone] = append(o.ClientZones[zone], p)
		}
	}
	if o.Identity == "" {
		h, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("--identity not set and no host name: %w", err)
		}
		o.Identity = h
	}
	return o, nil
}

// kubeConfig is the client configuration: the file when given, else
// in-cluster credentials, else the default kubeconfig loading rules.
func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return rc, nil
	}
	rc, err := rest.InClusterConfig()
	if err == nil {
		return rc, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("in-cluster credentials: %w", err)
	}
	rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, not in a cluster, and the default kubeconfig: %w", err)
	}
	return rc, nil
}
