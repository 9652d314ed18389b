package health

import (
	"context"
	"net"
)

// DialIn returns a DialFunc that creates each probe socket inside do, a
// function that runs its argument in some context and returns its error:
// typically (*netns.NS).Do, so that probes leave from a network namespace.
// A socket keeps the namespace it was created in, so the connection is
// then used from any goroutine. d may be nil.
func DialIn(do func(func() error) error, d *net.Dialer) DialFunc {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var conn net.Conn
		err := do(func() error {
			var err error
			conn, err = d.DialContext(ctx, network, address)
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
