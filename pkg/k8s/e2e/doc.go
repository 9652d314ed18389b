// Package e2e holds the end-to-end tests of `xlb k8s` against a real
// Kubernetes: the kube-apiserver (etcd embedded) and kube-proxy built by
// the nested module kubelab (pkg/k8s/k8stest starts them), in a lab of
// network namespaces (pkg/lab). It has no code outside its tests; it is a
// package of its own so that `go test ./...` runs it beside cmd/xlb's
// lab tests instead of after them.
//
// # What a test builds
//
// One apiserver per test run of the package (k8stest.Shared), attached to
// each test's lab through its router. The lab's backends are the nodes:
// each has a Node object with its lab addresses and runs a real kube-proxy
// (nftables mode); "pods" are namespaces behind a node, each serving HTTP
// and UDP, and the test writes their EndpointSlices (no kubelet, no
// controller-manager). On each appliance namespace the xlb binary, built
// once by the first test that needs it with xlb-k8s beside it (`go build`
// into a temporary directory), runs as `xlb run` and `xlb k8s` (which
// executes that xlb-k8s), the latter with a token of
// the ServiceAccount that deploy/kubernetes/rbac.yaml defines, so the
// manifest's rights are the ones tested. Real clients in the lab's client
// namespace reach the pods through xlb (DIRECT: the nodes share the
// appliance's bridge) and kube-proxy's rules for the load-balancer IP.
//
// Addresses, all inside 198.18.0.0/15: node i is lab backend i; its pods
// are 198.18.(64+i).11 and up, behind 198.18.(64+i).1 on the node; every
// node routes the other nodes' pod prefixes to them (the pod network).
// VIPs come from 203.0.113.64/27, which the router routes to the appliance
// (statically, or over BGP for a fleet).
//
// # When it runs
//
// As root, with the binaries built (kubelab/build; .ci/run builds them and
// sets XLB_KUBELAB_REQUIRED=1, which turns their absence into a failure).
// Otherwise every test skips and says which of the two is missing. Each
// test deletes what it made in the cluster and tears its lab down.
//
// # Decisions
//
//   - Waits are polls with generous limits (tens of seconds; health checks
//     every second, two failures make a node unhealthy), so a loaded
//     2-CPU machine passes; a test that asserts "nothing changed" first
//     waits for a sign that the controller saw the change (its Event, its
//     leadership) and then for a pass of the controller, never for a bare
//     sleep alone.
//   - Shares are judged with binomial bounds (5σ), as cmd/xlb's tests do.
package e2e
