// Package k8s is the Kubernetes controller of the appliance (`xlb k8s`):
// it turns the cluster's Services of type LoadBalancer into rule files of
// xlb, as Google's GKE turns them into passthrough Network Load Balancers
// (seed 003), and applies them with one reload of the running daemon.
// deploy/kubernetes.md is the operator's side of it.
//
// # Ownership and goroutines
//
// client-go informers (their own goroutines) keep caches of Services,
// EndpointSlices and Nodes and poke the sync goroutine (Controller.loop),
// which owns everything else: after a burst of changes (Debounce, at most
// 5 × Debounce) it runs one pass (sync) over the whole cluster, so a
// hundred changes are one reload. The leader-election goroutine (elect)
// only flips Controller.leader. Nothing here touches the data plane: the
// daemon reads the files on reload.
//
// # A pass
//
//  1. Leader only: give VIPs (allocate) and write them to
//     status.loadBalancer.ingress (updateStatuses).
//  2. Every appliance: translate each Service, using the VIPs in its
//     status (statusVIPs), into one rule file per VIP and protocol.
//  3. Compare with the files that carry this class's marker line; the
//     changed, new and stale ones are validated together with everything
//     else in rules_dir by the code of `xlb validate` (config.LoadWithRules
//     and, unless Offline, config.CheckHost). If the whole does not pass,
//     each Service's changes are tried alone, in name order, and those
//     that fail are left out: the Service keeps the files it had (its
//     running rules) and gets a Warning Event with the issues.
//  4. Write what passed (atomically: a hidden temporary file, fsync,
//     rename, fsync of the directory), remove stale files, reload once
//     through control_socket. A failed reload is retried (1 s doubling to
//     30 s) and on every change.
//
// # Decisions where the issue is silent
//
//   - Passthrough to the service port: a rule forwards the Service's own
//     ports (spec.ports[].port) to the nodes with the packet unchanged
//     (destination = the VIP), as GKE's NLB delivers to nic0 with
//     destination = the forwarding rule's address. kube-proxy serves the
//     load-balancer IP on every node (its nftables/iptables rules match the
//     status IP and port and DNAT to an endpoint), so nothing listens on
//     the VIP and the node port is not used: nodePort would need the
//     appliance to rewrite the destination, which a passthrough load
//     balancer never does. The status says ipMode VIP, which is what
//     tells kube-proxy to serve the address (ipMode Proxy would make it
//     leave the address alone). allocateLoadBalancerNodePorts: false works.
//   - Encapsulation: DIRECT (MAC rewrite) when the nodes share the
//     appliance's link; IPIP (the default, as xlb's), GUE or GRE otherwise.
//     An encapsulated packet is decapsulated on the node (the kernel's ipip
//     or fou modules, or `xlb decap`) and then meets kube-proxy's rules.
//   - The status is the record of the VIPs: every appliance derives its
//     rules from it, so a fleet writes identical files, and a restarted
//     controller finds the VIPs it gave. Only the leader allocates.
//     Allocation order is creation time, then namespace and name; a held
//     VIP stays while it is in a pool and of a wanted family; requests
//     (spec.loadBalancerIP or the load-balancer-ips annotation) must lie in
//     a pool and never take a VIP another Service holds; free requested
//     addresses are reserved for their requester. Pools hand out their
//     lowest free address. IPv4 prefixes shorter than /31 leave out their
//     network and broadcast addresses.
//   - Families: one VIP per family in spec.ipFamilies (order kept in the
//     status). PreferDualStack takes the families that have pools;
//     SingleStack and RequireDualStack report a missing one;
//     RequireDualStack gets both or none.
//   - A Service whose own settings are wrong (a bad annotation, Local
//     without a health check node port) keeps its files and gets an Event;
//     so does one whose file name is taken by a file without the marker
//     (never overwritten). Its VIPs stay.
//   - No backends (Local with no ready endpoint, or no usable node): no
//     rule file, so the VIP is not forwarded (and not announced over BGP);
//     the VIP stays allocated and a Warning Event says why.
//   - Backends are the nodes' first InternalIP of the VIP's family; a node
//     without one is left out of that family's rules. Nodes labelled
//     node.kubernetes.io/exclude-from-external-load-balancers (any value)
//     are never backends. Cluster: Ready, schedulable, not being deleted.
//     Local: at least one endpoint ready, serving and not terminating (nil
//     ready and serving read as true, nil terminating as false), counted
//     once per address, in the EndpointSlices of the VIP's family.
//   - Above 250 (Cluster) or 3000 (Local) nodes, a subset by rendezvous
//     hashing of the Service's namespace/name with each node's name: the
//     same on every appliance, different per Service, and a node joining
//     or leaving displaces at most one other.
//   - Health checks: HTTP on kube-proxy's :10256/healthz (Cluster) or on
//     spec.healthCheckNodePort / (Local), with GKE's timing (8 s, 1 s,
//     healthy 1, unhealthy 3) unless configured.
//   - Weights: pods-per-node (our annotation or GKE's) with Local makes the
//     rule WEIGHTED_MAGLEV with a static weight per node, its endpoint
//     count (at most 1000). GKE has kube-proxy put the weight in a header
//     of the health check's answer; upstream kube-proxy sends none, and
//     the controller sees the same EndpointSlices anyway. With Cluster the
//     annotation is ignored and a Warning Event says why.
//   - Zonal affinity: the zonal-affinity annotation (spill-cross-zone)
//     makes ZONAL_AFFINITY_SPILL_CROSS_ZONE with spillover ratio 0, as
//     GKE configures; the nodes' topology.kubernetes.io/zone labels become
//     groups (one per zone, always, so `xlb status` shows zones), and the
//     client zones come from the controller's --client-zone prefixes,
//     since nothing in a Service says where clients are.
//   - sessionAffinity ClientIP → CLIENT_IP; its timeoutSeconds has no
//     meaning for a hash and is reported (Normal Event) when set.
//   - spec.loadBalancerSourceRanges (else the older annotation, as
//     kube-proxy reads it) becomes each rule's source_ranges, host bits
//     cleared and each family's prefixes on its own VIP's rule. A VIP
//     whose family has no prefix in a non-empty list gets no rule (the
//     list admits nobody of that family) and a Normal Event says so.
//   - SCTP ports are not forwarded (Warning Event); TCP and UDP ports of
//     one Service are two rule files.
//   - Events: only the leader records them, Warning Events once per
//     problem and message (a new leader reports the current ones once).
//   - Names: rule and file k8s.NAMESPACE.NAME.PROTOCOL.FAMILY (no dots
//     in Kubernetes names, so it reads back unambiguously); longer than 63
//     characters, its first 54 and a hash. The marker line
//     "# xlb-k8s: class=… service=ns/name" makes a file the controller's.
//   - Reloads meet the daemon's guard rails as an operator's do, but one:
//     when the controller has no file left (the cluster's last Service
//     went) it reloads with force, since a configuration without rules is
//     then what the cluster asks for (the daemon refuses it unforced).
//   - No finalizer on Services: every appliance derives the files from the
//     current objects, so a deleted Service's files go at the next pass on
//     each appliance, including one that was down while it was deleted.
package k8s
