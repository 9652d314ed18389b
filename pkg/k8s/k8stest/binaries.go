package k8stest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Environment variables .ci/run sets.
const (
	// BinEnv names the directory holding kube-apiserver-etcd and kube-proxy.
	BinEnv = "XLB_KUBELAB_BIN"
	// RequiredEnv = "1" makes missing binaries a test failure, not a skip.
	RequiredEnv = "XLB_KUBELAB_REQUIRED"
)

// Bins are the paths of the built binaries.
type Bins struct {
	APIServer string // kube-apiserver with etcd embedded
	Proxy     string // kube-proxy
}

var (
	binsOnce sync.Once
	bins     Bins
	binsErr  error
)

// Binaries returns the binaries, or skips tb saying how to build them (fails
// instead when XLB_KUBELAB_REQUIRED=1).
func Binaries(tb testing.TB) Bins {
	tb.Helper()
	binsOnce.Do(func() { bins, binsErr = findBinaries() })
	if binsErr != nil {
		if os.Getenv(RequiredEnv) == "1" {
			tb.Fatalf("%v (%s=1: the Kubernetes tests must run here)", binsErr, RequiredEnv)
		}
		tb.Skipf("SKIPPED, no real Kubernetes here: %v", binsErr)
	}
	return bins
}

func findBinaries() (Bins, error) {
	dir := os.Getenv(BinEnv)
	how := "$" + BinEnv
	if dir == "" {
		script, err := buildScript()
		if err != nil {
			return Bins{}, err
		}
		// --dir prints the directory and fails when it is not built yet.
		out, err := exec.Command(script, "--dir").Output()
		dir = strings.TrimSpace(string(out))
		if dir == "" {
			return Bins{}, fmt.Errorf("%s --dir: %v", script, err)
		}
		how = "kubelab/build --dir"
	}
	b := Bins{APIServer: filepath.Join(dir, "kube-apiserver-etcd"), Proxy: filepath.Join(dir, "kube-proxy")}
	for _, p := range []string{b.APIServer, b.Proxy} {
		if _, err := os.Stat(p); err != nil {
			return Bins{}, fmt.Errorf("%s not built (directory from %s); build it once with `kubelab/build` in the repository (~20 min on 2 CPUs, 3 GB of Go build cache)", p, how)
		}
	}
	return b, nil
}

// buildScript finds kubelab/build above the working directory (go test runs
// in the package's directory).
func buildScript() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "kubelab", "build")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("kubelab/build not found above " + wd + ": set " + BinEnv)
		}
	}
}
