package health

import (
	"context"
	"net"
	"net/netip"
)

// DialFunc makes the connection of one probe: the seam through which
// probes may leave some other way than the appliance's own socket to the
// backend (through the data path, for instance, addressed to the rule's
// VIP). network is "tcp" (TCP, SSL, HTTP, HTTPS, HTTP2, GRPC) or "udp"
// (UDP); key names the target (rule and backend); addr is the backend's
// address with the check's port. The connection returned must behave as
// a connected socket of that network (a stream for "tcp", one datagram
// per Read and Write for "udp"), honour deadlines, and release
// everything on Close. It is called once per probe, on the target's
// goroutine (GRPC: on gRPC's), and must honour ctx.
type DialFunc func(ctx context.Context, network string, key Key, addr netip.AddrPort) (net.Conn, error)

// DirectDial is the default DialFunc: a socket of the calling process's
// network stack, connected to addr.
func DirectDial(ctx context.Context, network string, _ Key, addr netip.AddrPort) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr.String())
}

// DialIn returns a DialFunc that creates each probe socket inside do, a
// function that runs its argument in some context and returns its error:
// typically (*netns.NS).Do, so that probes leave from a network namespace.
// A socket keeps the namespace it was created in, so the connection is
// then used from any goroutine. d may be nil.
func DialIn(do func(func() error) error, d *net.Dialer) DialFunc {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, network string, _ Key, addr netip.AddrPort) (net.Conn, error) {
		var conn net.Conn
		err := do(func() error {
			var err error
			conn, err = d.DialContext(ctx, network, addr.String())
			return err
		})
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			return nil, err
		}
		return conn, nil
	}
}
