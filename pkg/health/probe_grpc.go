package health

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// ErrNotServing is wrapped by a GRPC probe error for an answer other than
// SERVING.
var ErrNotServing = errors.New("not SERVING")

// runGRPC asks the backend's grpc.health.v1 service about the check's
// service on a fresh client connection, made by the prober's dialer.
func (p *prober) runGRPC(ctx context.Context) Result {
	creds := insecure.NewCredentials()
	if p.tls != nil {
		creds = credentials.NewTLS(p.tls) // ALPN h2, as gRPC requires
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return p.open(ctx) }),
		grpc.WithUserAgent(userAgent),
		grpc.WithDisableServiceConfig(),
		grpc.WithDisableRetry(),
	}
	if p.tls == nil {
		// With TLS, gRPC takes the authority from the TLS server name
		// (the host without its port) and refuses any other.
		opts = append(opts, grpc.WithAuthority(p.host))
	}
	cc, err := grpc.NewClient("passthrough:///"+p.addr.String(), opts...)
	if err != nil {
		return Result{Err: fmt.Errorf("grpc client: %w", err)}
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: p.grpc})
	if status.Code(err) == codes.DeadlineExceeded {
		// The server may see the call's deadline pass a moment before
		// ctx does, and cancel it first.
		return Result{Err: fmt.Errorf("check %q: %w: %w", p.grpc, context.DeadlineExceeded, err)}
	}
	if err != nil {
		return Result{Err: fmt.Errorf("check %q: %w", p.grpc, err)}
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return Result{Err: fmt.Errorf("%w: service %q is %s", ErrNotServing, p.grpc, st)}
	}
	return unweightedPass
}
