//go:build !xlbctl

package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// pprofEnv names the environment variable that makes `xlb run` serve Go's
// profiles: for measuring the daemon (bench/scale takes its heap profile
// there), never needed to operate it. An environment variable, not a
// configuration key, so no appliance serves it by accident of a config.
const pprofEnv = "XLB_PPROF_LISTEN"

// servePprof serves /debug/pprof/ on addr for the life of the process, on
// a mux of its own (the metrics endpoint's mux stays as it is). A failure
// is logged, not fatal: a successor (xlb restart) inherits the variable
// while its predecessor still holds the address.
func servePprof(addr string, log *slog.Logger) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("not serving Go profiles", "env", pprofEnv, "err", err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Warn("serving Go profiles: for measurements only", "listen", ln.Addr().String(), "env", pprofEnv)
	go func() { _ = http.Serve(ln, mux) }()
}
