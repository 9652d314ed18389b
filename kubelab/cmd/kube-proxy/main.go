// Command kube-proxy is the upstream kube-proxy of k8s.io/kubernetes, built
// from this nested module so that the lab's "nodes" run the real one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
