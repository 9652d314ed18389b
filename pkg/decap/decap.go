package decap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/netns"
)

// Encap is an encapsulation decap can receive.
type Encap uint8

const (
	IPIP Encap = iota + 1 // IPv4/IPv6 in IPv4/IPv6: raw sockets, protocols 4 and 41
	GRE                   // GRE over IPv4/IPv6: raw sockets, protocol 47
	GUE                   // GUE over UDP (variant 1, and variant 0 data messages)
)

func (e Encap) String() string {
	switch e {
	case IPIP:
		return "IPIP"
	case GRE:
		return "GRE"
	case GUE:
		return "GUE"
	}
	return fmt.Sprintf("Encap(%d)", uint8(e))
}

// ParseEncap parses "ipip", "gre" or "gue" (any case).
func ParseEncap(s string) (Encap, error) {
	switch strings.ToUpper(s) {
	case "IPIP":
		return IPIP, nil
	case "GRE":
		return GRE, nil
	case "GUE":
		return GUE, nil
	}
	return 0, fmt.Errorf("unknown encapsulation %q (want IPIP, GRE or GUE)", s)
}

// Defaults.
const (
	DefaultTUN     = "xlbdecap0"
	DefaultGUEPort = 6080
	DefaultMTU     = 65535   // the TUN only receives; a large MTU never limits an inner packet
	DefaultRcvBuf  = 4 << 20 // per socket
	bufSize        = 1 << 16 // one IP datagram, the most a raw or UDP socket returns
	// maxConsecutiveReadErrors stops a reader whose socket keeps failing,
	// rather than spinning on it.
	maxConsecutiveReadErrors = 1000
)

// Options configure a decapsulator. The zero value (plus defaults) receives
// every encapsulation on IPv4 and IPv6 in the current namespace.
type Options struct {
	// Namespace is where the TUN, the sockets and the host settings live;
	// nil means the namespace of the calling process.
	Namespace *netns.NS
	// TUN is the name of the TUN device to create (default "xlbdecap0").
	TUN string
	// MTU of the TUN (default 65535).
	MTU int
	// Encaps to receive (default all: IPIP, GRE, GUE).
	Encaps []Encap
	// GUEPort is the UDP port GUE arrives on (default 6080).
	GUEPort uint16
	// IPv4Only skips the IPv6 raw sockets and binds GUE to IPv4 only, for
	// hosts with IPv6 disabled.
	IPv4Only bool
	// VIPs are added to lo (as /32 or /128) unless already there, and
	// removed again by Close if decap added them.
	VIPs []netip.Addr
	// NoHostConfig leaves rp_filter and lo alone (the operator did it).
	NoHostConfig bool
	// RcvBuf is the receive buffer per socket in bytes (default 4 MiB).
	RcvBuf int
	// Logf, if set, receives one line per lifecycle event (never per packet).
	Logf func(format string, args ...any)
}

func (o *Options) setDefaults() error {
	if o.TUN == "" {
		o.TUN = DefaultTUN
	}
	if len(o.TUN) >= unix.IFNAMSIZ {
		return fmt.Errorf("tun name %q longer than %d bytes", o.TUN, unix.IFNAMSIZ-1)
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.MTU < 1280 || o.MTU > 65535 {
		return fmt.Errorf("tun mtu %d outside 1280..65535", o.MTU)
	}
	if len(o.Encaps) == 0 {
		o.Encaps = []Encap{IPIP, GRE, GUE}
	}
	for _, e := range o.Encaps {
		if e < IPIP || e > GUE {
			return fmt.Errorf("unknown encapsulation %v", e)
		}
	}
	if o.GUEPort == 0 {
		o.GUEPort = DefaultGUEPort
	}
	if o.RcvBuf == 0 {
		o.RcvBuf = DefaultRcvBuf
	}
	for _, v := range o.VIPs {
		if !v.IsValid() || v.IsUnspecified() {
			return fmt.Errorf("invalid vip %v", v)
		}
		if o.IPv4Only && !v.Unmap().Is4() {
			return fmt.Errorf("vip %v is IPv6 but IPv4Only is set", v)
		}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// Decap is a running decapsulator: one reader goroutine per socket, each
// owning its socket, its TUN queue and its buffer.
type Decap struct {
	opts    Options
	tunName string
	readers []*reader
	added   []netip.Addr // VIPs this Decap put on lo

	wg       sync.WaitGroup
	failOnce sync.Once
	failed   chan struct{} // closed when a reader stops with an error
	errMu    sync.Mutex
	err      error // first reader error
	closed   sync.Once
}

// reader moves datagrams from one socket to one TUN queue. All its fields
// but st belong to its goroutine.
type reader struct {
	name  string
	kind  kind
	proto uint8 // next header of an IPv6 IPIP socket
	src   io.ReadCloser
	tun   io.WriteCloser
	buf   []byte
	st    stats
}

// Start creates the TUN and the sockets inside opts.Namespace, configures
// the host and starts one reader goroutine per socket. On error everything
// created so far is released.
func Start(opts Options) (*Decap, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("decap options: %w", err)
	}
	d := &Decap{opts: opts, failed: make(chan struct{})}
	if err := d.do(d.open); err != nil {
		d.release()
		return nil, err
	}
	if !opts.NoHostConfig {
		if err := d.addVIPs(); err != nil {
			d.release()
			return nil, err
		}
	}
	for _, r := range d.readers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := r.run(); err != nil {
				d.fail(err)
			}
		}()
	}
	opts.Logf("decap: tun %s, %d readers, encaps %v, gue port %d", d.tunName, len(d.readers), opts.Encaps, opts.GUEPort)
	return d, nil
}

// Run starts a decapsulator and serves until ctx is done or a reader fails,
// then closes it.
func Run(ctx context.Context, opts Options) error {
	d, err := Start(opts)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-d.failed:
	}
	return d.Close()
}

// TUN returns the name of the TUN device.
func (d *Decap) TUN() string { return d.tunName }

// Failed is closed when a reader stops with an error; Close returns it.
func (d *Decap) Failed() <-chan struct{} { return d.failed }

// Counters sums the counters of all readers. Safe from any goroutine.
func (d *Decap) Counters() Counters {
	var c Counters
	for _, r := range d.readers {
		r.st.addTo(&c)
	}
	return c
}

// Close stops the readers, closes the sockets and the TUN (which removes
// the device) and removes the VIPs it added. It returns the first reader
// error, if any. Safe to call more than once.
func (d *Decap) Close() error {
	var err error
	d.closed.Do(func() {
		for _, r := range d.readers {
			r.src.Close() // unblocks the reader's Read
		}
		d.wg.Wait()
		d.release()
		d.errMu.Lock()
		err = d.err
		d.errMu.Unlock()
	})
	return err
}

func (d *Decap) fail(err error) {
	d.errMu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.errMu.Unlock()
	d.failOnce.Do(func() { close(d.failed) })
}

// do runs fn in the configured namespace (or right here).
func (d *Decap) do(fn func() error) error {
	if d.opts.Namespace == nil {
		return fn()
	}
	return d.opts.Namespace.Do(fn)
}

// open creates sockets and TUN queues; it runs inside the namespace.
func (d *Decap) open() error {
	type sock struct {
		family, proto int
		kind          kind
	}
	var socks []sock
	wantGUE := false
	for _, e := range d.opts.Encaps {
		switch e {
		case IPIP:
			socks = append(socks, sock{unix.AF_INET, protoIPIP, kindRaw4}, sock{unix.AF_INET, protoIPv6, kindRaw4})
			if !d.opts.IPv4Only {
				socks = append(socks, sock{unix.AF_INET6, protoIPIP, kindRaw6IPIP}, sock{unix.AF_INET6, protoIPv6, kindRaw6IPIP})
			}
		case GRE:
			socks = append(socks, sock{unix.AF_INET, protoGRE, kindRaw4})
			if !d.opts.IPv4Only {
				socks = append(socks, sock{unix.AF_INET6, protoGRE, kindRaw6GRE})
			}
		case GUE:
			wantGUE = true
		}
	}

	newReader := func(name string, k kind, proto uint8, src io.ReadCloser) error {
		tun, actual, err := openTUNQueue(d.opts.TUN, len(d.readers) == 0)
		if err != nil {
			src.Close()
			return err
		}
		d.tunName = actual
		d.readers = append(d.readers, &reader{name: name, kind: k, proto: proto, src: src, tun: tun, buf: make([]byte, bufSize)})
		return nil
	}
	for _, s := range socks {
		f, err := rawSocket(s.family, s.proto, d.opts.RcvBuf)
		if err != nil {
			return fmt.Errorf("open raw socket ipv%d protocol %d: %w", familyVersion(s.family), s.proto, err)
		}
		if err := newReader(f.Name(), s.kind, uint8(s.proto), f); err != nil {
			return err
		}
	}
	if wantGUE {
		network := "udp"
		if d.opts.IPv4Only {
			network = "udp4"
		}
		c, err := net.ListenUDP(network, &net.UDPAddr{Port: int(d.opts.GUEPort)})
		if err != nil {
			return fmt.Errorf("listen gue on udp port %d: %w", d.opts.GUEPort, err)
		}
		if d.opts.RcvBuf > 0 {
			_ = c.SetReadBuffer(d.opts.RcvBuf)
		}
		if err := newReader(fmt.Sprintf("gue:%d", d.opts.GUEPort), kindGUE, 0, c); err != nil {
			return err
		}
	}
	if len(d.readers) == 0 {
		return errors.New("decap: nothing to receive")
	}
	if err := linkUp(d.tunName, d.opts.MTU); err != nil {
		return err
	}
	if !d.opts.NoHostConfig {
		// The inner source is the client, whose route points elsewhere:
		// strict reverse-path filtering on the TUN would drop every packet.
		// The kernel uses max(all, dev), so both must be 0.
		for _, p := range []string{"all", d.tunName} {
			if err := writeSysctl("net/ipv4/conf/"+p+"/rp_filter", "0"); err != nil {
				return err
			}
		}
	}
	return nil
}

// release closes every socket and TUN queue and removes added VIPs.
func (d *Decap) release() {
	for _, r := range d.readers {
		r.src.Close()
		r.tun.Close()
	}
	for _, v := range d.added {
		if err := d.ip("addr", "del", vipPrefix(v), "dev", "lo"); err != nil {
			d.opts.Logf("decap: remove vip %v: %v", v, err)
		}
	}
	d.added = nil
}

// addVIPs puts the VIPs on lo, remembering which were not there yet.
func (d *Decap) addVIPs() error {
	var have []netip.Addr
	err := d.do(func() error {
		lo, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		addrs, err := lo.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				have = append(have, p.Addr())
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list addresses of lo: %w", err)
	}
next:
	for _, v := range d.opts.VIPs {
		v = v.Unmap()
		for _, h := range have {
			if h == v {
				continue next
			}
		}
		args := []string{"addr", "add", vipPrefix(v), "dev", "lo"}
		if v.Is6() {
			// Without nodad a new IPv6 address is tentative (bind fails
			// with EADDRNOTAVAIL) until the kernel's DAD work runs, even
			// on lo: a server binding the VIP after Start would fail on
			// a loaded machine.
			args = append(args, "nodad")
		}
		if err := d.ip(args...); err != nil {
			return fmt.Errorf("add vip %v to lo: %w", v, err)
		}
		d.added = append(d.added, v)
	}
	return nil
}

func vipPrefix(v netip.Addr) string {
	return netip.PrefixFrom(v, v.BitLen()).String()
}

// ip runs ip(8) in the configured namespace.
func (d *Decap) ip(args ...string) error {
	if d.opts.Namespace != nil {
		return d.opts.Namespace.Run("ip", args...)
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// run reads until the socket is closed.
func (r *reader) run() error {
	consecutive := 0
	for {
		n, err := r.src.Read(r.buf)
		switch {
		case err == nil:
			consecutive = 0
			r.handle(n)
		case errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed):
			return nil
		case err == io.EOF:
			// os.File reports a zero-length datagram as EOF.
			r.handle(0)
		default:
			r.st.drops[DropReadError].Add(1)
			if consecutive++; consecutive > maxConsecutiveReadErrors {
				return fmt.Errorf("decap: read %s: %w", r.name, err)
			}
		}
	}
}

// handle decodes the datagram in r.buf[:n] and writes its inner packet to
// the TUN. It allocates nothing.
func (r *reader) handle(n int) {
	r.st.received.Add(1)
	inner, why := decode(r.kind, r.proto, r.buf[:n])
	if why != DropNone {
		r.st.drops[why].Add(1)
		return
	}
	if _, err := r.tun.Write(inner); err != nil {
		r.st.drops[DropTUNWrite].Add(1)
		return
	}
	r.st.delivered.Add(1)
}
