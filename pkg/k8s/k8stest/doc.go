// Package k8stest runs a real Kubernetes control plane for xlb's tests: the
// kube-apiserver of k8s.io/kubernetes with etcd embedded, and kube-proxy in
// nftables mode, both built by the nested module kubelab (kubelab/build,
// once, into a cache directory).
//
// # Binaries
//
// Binaries finds them: in $XLB_KUBELAB_BIN when set (.ci/run exports it
// after filling the cache), else where `kubelab/build --dir` says. When they
// are absent a test skips with the command that builds them, or fails when
// XLB_KUBELAB_REQUIRED=1 (CI, where a skip would hide the tests).
//
// # The API server
//
// Start runs one apiserver in a network namespace of its own (root only):
// fresh data directory, a self-signed CA and serving certificate, a token
// in group system:masters, RBAC authorization, a dual-stack service range
// inside 198.18.0.0/15 and fd00::/8. It listens on APIAddr (198.18.250.9,
// on the namespace's loopback) and its etcd on that namespace's own
// 127.0.0.1, so several packages' servers never collide. Shared starts one
// per test package on first use; Main (called from TestMain) stops it.
//
// Clients in the test process reach it through Config, whose dialer opens
// each connection inside the server's namespace. Processes in a lab reach
// it once Attach links the server's namespace to the lab's router with a
// veth pair (198.18.250.0/30) and routes 198.18.250.9 through it: every
// namespace whose default route leads to that router (nodes, appliances)
// then reaches the server. Kubeconfig writes a kubeconfig file for them.
//
// # kube-proxy
//
// StartProxy runs kube-proxy for one node in a namespace the caller made
// (a lab backend), with --hostname-override, its health server on
// 0.0.0.0:10256, nftables mode, conntrack left alone, and waits until
// /healthz answers.
//
// # Lifetime
//
// Children get SIGKILL when the test process dies (Pdeathsig); Stop ends
// them with SIGTERM, then deletes the namespace and the data directory.
// Everything runs as children of the test process, never as services.
package k8stest
