package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/xlbnet/xlb/pkg/decap"
	"github.com/xlbnet/xlb/pkg/netns"
)

// WeightHeader is the health-check response header that reports a
// backend's weight (WEIGHTED_MAGLEV).
const WeightHeader = "X-Load-Balancing-Endpoint-Weight"

// WhoPrefix starts a UDP datagram that asks the backend who it is instead
// of an echo: the reply is a JSON [Reply] with the datagram's size.
var WhoPrefix = []byte("WHO?")

// Reply is what a backend's HTTP server answers, and what its UDP server
// answers to a WHO? datagram: which backend served, the client address and
// port the server saw, and the local address (the VIP).
type Reply struct {
	Backend string         `json:"backend"`
	Index   int            `json:"index"`
	Remote  netip.AddrPort `json:"remote"`
	Local   netip.AddrPort `json:"local"`
	Size    int            `json:"size,omitempty"` // UDP: datagram bytes; HTTP: request body bytes
}

// Backend is one backend namespace with its servers.
type Backend struct {
	Index int
	Name  string // "be0", "be1", …
	NS    *netns.NS
	// Link4/6 are the addresses on the bridge: the DIRECT next hop (with
	// MAC) and where health checks can go.
	Link4, Link6 netip.Addr
	MAC          net.HardwareAddr
	// Tunnel4/6 are on lo, routed by the router: the outer destination of
	// IPIP, GUE and GRE.
	Tunnel4, Tunnel6 netip.Addr

	lab     *Lab
	decap   atomic.Pointer[decap.Decap]
	healthy atomic.Bool
	weight  atomic.Int64 // < 0: no weight header
	// weightText, when set, is sent as the weight header instead of weight
	// (SetWeightText: a malformed header).
	weightText atomic.Pointer[string]
	http       atomic.Uint64
	udp        atomic.Uint64
	probes     atomic.Uint64 // health requests
	probesVIP  atomic.Uint64 // of them, to a VIP
}

// Stats counts what a backend's servers handled.
type Stats struct {
	HTTPRequests   uint64
	UDPDatagrams   uint64
	HealthRequests uint64         // health checks answered, whatever the answer
	HealthToVIP    uint64         // of them, addressed to a VIP: data-path probes
	DecapCounters  decap.Counters // zero without decap
}

func newBackend(l *Lab, i int, ns *netns.NS) *Backend {
	b := &Backend{
		Index:   i,
		Name:    "be" + strconv.Itoa(i),
		NS:      ns,
		Link4:   host(FabricNet4, hostFirstBE4+i),
		Link6:   host(FabricNet6, hostFirstBE6+i),
		Tunnel4: host(TunnelNet4, hostFirstBE4+i),
		Tunnel6: host(TunnelNet6, hostFirstBE6+i),
		lab:     l,
	}
	b.healthy.Store(true)
	b.weight.Store(-1)
	return b
}

// SetHealthy makes the health endpoint answer 200 (true) or 503 (false).
func (b *Backend) SetHealthy(ok bool) { b.healthy.Store(ok) }

// SetWeight makes the health endpoint send the weight header with w; a
// negative w removes the header.
func (b *Backend) SetWeight(w int) { b.weightText.Store(nil); b.weight.Store(int64(w)) }

// SetWeightText makes the health endpoint send the weight header with the
// text v as it is ("abc", "1001": an INVALID_WEIGHT); SetWeight undoes it.
func (b *Backend) SetWeightText(v string) { b.weightText.Store(&v) }

// Stats returns the backend's counters. Safe from any goroutine.
func (b *Backend) Stats() Stats {
	s := Stats{HTTPRequests: b.http.Load(), UDPDatagrams: b.udp.Load(), HealthRequests: b.probes.Load(), HealthToVIP: b.probesVIP.Load()}
	if d := b.decap.Load(); d != nil {
		s.DecapCounters = d.Counters()
	}
	return s
}

// start opens every listening socket inside the backend namespace, then
// serves from goroutines (which run in whatever namespace; the sockets
// carry theirs).
func (b *Backend) start() error {
	o := b.lab.Opts
	var (
		httpLns []net.Listener
		udps    []*net.UDPConn
		health  net.Listener
	)
	err := b.NS.Do(func() error {
		for _, vip := range []netip.Addr{o.VIP4, o.VIP6} {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(vip, o.HTTPPort).String())
			if err != nil {
				return fmt.Errorf("listen http: %w", err)
			}
			httpLns = append(httpLns, ln)
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(vip, o.UDPPort)))
			if err != nil {
				return fmt.Errorf("listen udp: %w", err)
			}
			// Room for a stream of tens of kpps while the echo goroutine
			// waits for a core (capped by net.core.rmem_max).
			c.SetReadBuffer(4 << 20)
			udps = append(udps, c)
		}
		var err error
		health, err = net.Listen("tcp", fmt.Sprintf(":%d", o.HealthPort))
		if err != nil {
			return fmt.Errorf("listen health: %w", err)
		}
		return nil
	})
	// Register closers for whatever was opened, even on error.
	serve := func(ln net.Listener, h http.HandlerFunc) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		b.lab.onClose(func() { srv.Close() })
		if err == nil {
			go srv.Serve(ln)
		} else {
			ln.Close()
		}
	}
	for _, ln := range httpLns {
		serve(ln, b.serveHTTP)
	}
	for _, c := range udps {
		b.lab.onClose(func() { c.Close() })
		if err == nil {
			go b.serveUDP(c)
		}
	}
	if health != nil {
		serve(health, b.serveHealth)
	}
	if err != nil {
		return err
	}
	if o.NoDecap {
		return nil
	}
	b.lab.onClose(func() { b.StopDecap() })
	return b.StartDecap()
}

// StartDecap starts the backend's decapsulator (pkg/decap), unless it runs.
func (b *Backend) StartDecap() error {
	if b.decap.Load() != nil {
		return nil
	}
	o := b.lab.Opts
	d, err := decap.Start(decap.Options{
		Namespace: b.NS,
		GUEPort:   o.GUEPort,
		VIPs:      []netip.Addr{o.VIP4, o.VIP6},
		Logf:      o.Logf,
	})
	if err != nil {
		return err
	}
	b.decap.Store(d)
	return nil
}

// StopDecap stops the backend's decapsulator, as if the backend had lost
// its tunnel device: IPIP, GUE and GRE packets reach its kernel and die
// there; DIRECT traffic is untouched. StartDecap undoes it.
func (b *Backend) StopDecap() error {
	if d := b.decap.Swap(nil); d != nil {
		return d.Close()
	}
	return nil
}

func (b *Backend) serveHTTP(w http.ResponseWriter, r *http.Request) {
	b.http.Add(1)
	n, _ := io.Copy(io.Discard, r.Body)
	rep := Reply{Backend: b.Name, Index: b.Index, Size: int(n)}
	rep.Remote, _ = netip.ParseAddrPort(r.RemoteAddr)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		rep.Local, _ = netip.ParseAddrPort(a.String())
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}

func (b *Backend) serveHealth(w http.ResponseWriter, r *http.Request) {
	b.probes.Add(1)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			if vip := ap.Addr().Unmap(); vip == b.lab.Opts.VIP4 || vip == b.lab.Opts.VIP6 {
				b.probesVIP.Add(1)
			}
		}
	}
	if txt := b.weightText.Load(); txt != nil {
		w.Header().Set(WeightHeader, *txt)
	} else if wt := b.weight.Load(); wt >= 0 {
		w.Header().Set(WeightHeader, strconv.FormatInt(wt, 10))
	}
	if !b.healthy.Load() {
		http.Error(w, "unhealthy", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ok %s\n", b.Name)
}

// serveUDP echoes every datagram, except WHO? datagrams, which get a JSON
// Reply naming the backend and the size received.
func (b *Backend) serveUDP(c *net.UDPConn) {
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		b.udp.Add(1)
		if bytes.HasPrefix(buf[:n], WhoPrefix) {
			out, _ := json.Marshal(Reply{Backend: b.Name, Index: b.Index, Remote: from, Local: local, Size: n})
			c.WriteToUDPAddrPort(out, from)
			continue
		}
		c.WriteToUDPAddrPort(buf[:n], from)
	}
}
