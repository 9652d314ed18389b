// Command kube-apiserver-etcd is the upstream kube-apiserver of
// k8s.io/kubernetes with an etcd server embedded in the same process, so a
// test starts one binary, with a fresh data directory, and has a real API
// server. It exists only for xlb's tests (pkg/k8s/k8stest starts it).
//
// Its own flags, taken out of the command line before the rest goes to
// kube-apiserver unchanged:
//
//	--embedded-etcd-dir=DIR          etcd's data directory (required)
//	--embedded-etcd-client-url=URL   default http://127.0.0.1:2379
//	--embedded-etcd-peer-url=URL     default http://127.0.0.1:2380
//
// Unless the command line sets --etcd-servers, the apiserver is pointed at
// the embedded etcd's client URL. etcd runs without fsync: the data lives
// as long as the test.
package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	args, dir, clientURL, peerURL := splitArgs(os.Args[1:])
	if dir == "" {
		fmt.Fprintln(os.Stderr, "kube-apiserver-etcd: --embedded-etcd-dir is required")
		os.Exit(2)
	}
	etcd, err := startEtcd(dir, clientURL, peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver-etcd: %v\n", err)
		os.Exit(1)
	}
	go func() {
		// etcd failing under a running apiserver leaves nothing to test.
		if err, ok := <-etcd.Err(); ok && err != nil {
			fmt.Fprintf(os.Stderr, "kube-apiserver-etcd: embedded etcd: %v\n", err)
			os.Exit(1)
		}
	}()
	if !hasFlag(args, "--etcd-servers") {
		args = append(args, "--etcd-servers="+clientURL)
	}
	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(args)
	code := cli.Run(cmd)
	etcd.Close()
	os.Exit(code)
}

// splitArgs takes this wrapper's own flags out of args.
func splitArgs(in []string) (rest []string, dir, clientURL, peerURL string) {
	clientURL, peerURL = "http://127.0.0.1:2379", "http://127.0.0.1:2380"
	for _, a := range in {
		switch {
		case strings.HasPrefix(a, "--embedded-etcd-dir="):
			dir = strings.TrimPrefix(a, "--embedded-etcd-dir=")
		case strings.HasPrefix(a, "--embedded-etcd-client-url="):
			clientURL = strings.TrimPrefix(a, "--embedded-etcd-client-url=")
		case strings.HasPrefix(a, "--embedded-etcd-peer-url="):
			peerURL = strings.TrimPrefix(a, "--embedded-etcd-peer-url=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, dir, clientURL, peerURL
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func startEtcd(dir, clientURL, peerURL string) (*embed.Etcd, error) {
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd client url: %w", err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd peer url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "xlb-lab"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 60s")
	}
}
