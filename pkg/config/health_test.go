package config

import (
	"reflect"
	"strings"
	"testing"
)

// healthRule is webRule with its [health_check] body replaced by body
// (its first line is line 5).
func healthRule(body ...string) string {
	return strings.Replace(webRule, "type = \"TCP\"\n", lines(body...), 1)
}

// TestHealthCheckKinds: what each type reads into HealthCheck, defaults
// included.
func TestHealthCheckKinds(t *testing.T) {
	base := DefaultRule().HealthCheck
	for _, tc := range []struct {
		name string
		body []string
		want func(*HealthCheck)
	}{
		{"HTTP2 defaults to TLS on 443", []string{`type = "HTTP2"`}, func(h *HealthCheck) { h.Type, h.Port, h.TLS = HealthHTTP2, 443, true }},
		{"HTTP2 h2c", []string{`type = "HTTP2"`, `tls = false`, `port = 8080`, `response = "ok"`, `proxy_header = "PROXY_V1"`},
			func(h *HealthCheck) { h.Type, h.Port, h.Response, h.ProxyHeader = HealthHTTP2, 8080, "ok", ProxyV1 }},
		{"SSL", []string{`type = "SSL"`, `host = "db.example.com"`, `request = "PING\r\n"`, `response = "+PONG"`},
			func(h *HealthCheck) {
				h.Type, h.Port, h.Host, h.Request, h.Response = HealthSSL, 443, "db.example.com", "PING\r\n", "+PONG"
			}},
		{"GRPC", []string{`type = "GRPC"`, `port = 50051`, `grpc_service_name = "echo.Echo"`},
			func(h *HealthCheck) { h.Type, h.Port, h.GRPCServiceName = HealthGRPC, 50051, "echo.Echo" }},
		{"GRPC over TLS", []string{`type = "GRPC"`, `port = 50051`, `tls = true`},
			func(h *HealthCheck) { h.Type, h.Port, h.TLS = HealthGRPC, 50051, true }},
		{"UDP binary", []string{`type = "UDP"`, `port = 53`, `request_hex = "be ef 01 00"`, `response_hex = "BEEF"`},
			func(h *HealthCheck) {
				h.Type, h.Port, h.Request, h.Response = HealthUDP, 53, "\xbe\xef\x01\x00", "\xbe\xef"
			}},
		{"TCP banner", []string{`type = "TCP"`, `port = 22`, `response = "SSH-2.0-"`},
			func(h *HealthCheck) { h.Type, h.Port, h.Response = HealthTCP, 22, "SSH-2.0-" }},
		{"HTTP body text", []string{`type = "HTTP"`, `response = "\"status\":\"ok\""`},
			func(h *HealthCheck) { h.Type, h.Port, h.Response = HealthHTTP, 80, `"status":"ok"` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": healthRule(tc.body...)})
			if errs != nil || ws != nil {
				t.Fatalf("errors %v, warnings %v", errs, ws)
			}
			want := base
			tc.want(&want)
			if got := cfg.Rules[0].HealthCheck; !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestHealthCheckRefusals: keys that make no sense for the type are
// refused with file, line, key and the reason; keys that are merely
// unused are warned about.
func TestHealthCheckRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     []string
		errs, ws []string
	}{
		{"tls on HTTP", []string{`type = "HTTP"`, `tls = true`},
			[]string{"rules.d/web.toml:6: health_check.tls: applies to HTTP2 and GRPC only: HTTP over TLS is type HTTPS"}, nil},
		{"tls on TCP", []string{`type = "TCP"`, `tls = true`},
			[]string{"rules.d/web.toml:6: health_check.tls: applies to HTTP2 and GRPC only: a TLS handshake over TCP is type SSL"}, nil},
		{"tls off on SSL", []string{`type = "SSL"`, `tls = false`},
			[]string{"rules.d/web.toml:6: health_check.tls: applies to HTTP2 and GRPC only: SSL always uses TLS"}, nil},
		{"PROXY_V1 on UDP", []string{`type = "UDP"`, `port = 53`, `request = "x"`, `proxy_header = "PROXY_V1"`},
			[]string{"rules.d/web.toml:8: health_check.proxy_header: PROXY_V1 is a line sent first on a TCP connection; a UDP check opens none"}, nil},
		{"bad proxy header", []string{`type = "TCP"`, `proxy_header = "PROXY_V2"`},
			[]string{`rules.d/web.toml:6: health_check.proxy_header: "PROXY_V2" is not one of NONE, PROXY_V1`}, nil},
		{"request on HTTP", []string{`type = "HTTP"`, `request = "GET /"`},
			[]string{"rules.d/web.toml:6: health_check.request: applies to TCP, SSL and UDP only: a HTTP check sends GET request_path"}, nil},
		{"request on GRPC", []string{`type = "GRPC"`, `port = 50051`, `request_hex = "00"`},
			[]string{"rules.d/web.toml:7: health_check.request_hex: applies to TCP, SSL and UDP only: a GRPC check sends the grpc.health.v1 Check call and passes on SERVING"}, nil},
		{"response on GRPC", []string{`type = "GRPC"`, `port = 50051`, `response = "SERVING"`},
			[]string{"rules.d/web.toml:7: health_check.response: applies to TCP, SSL, UDP, HTTP, HTTPS and HTTP2: a GRPC check sends the grpc.health.v1 Check call and passes on SERVING"}, nil},
		{"response on NONE", []string{`type = "NONE"`, `response = "x"`},
			[]string{"rules.d/web.toml:6: health_check.response: applies to TCP, SSL, UDP, HTTP, HTTPS and HTTP2: NONE sends no probe"}, nil},
		{"binary body", []string{`type = "HTTPS"`, `response_hex = "00ff"`},
			[]string{"rules.d/web.toml:6: health_check.response_hex: an HTTP body is matched as text: write response"}, nil},
		{"both forms", []string{`type = "TCP"`, `request = "x"`, `request_hex = "78"`},
			[]string{"rules.d/web.toml:7: health_check.request_hex: write request or request_hex, not both"}, nil},
		{"bad hex", []string{`type = "UDP"`, `port = 53`, `request_hex = "0g"`},
			[]string{`rules.d/web.toml:7: health_check.request_hex: "0g" is not hexadecimal bytes (two digits a byte, spaces allowed)`}, nil},
		{"empty response", []string{`type = "TCP"`, `response = ""`},
			[]string{"rules.d/web.toml:6: health_check.response: empty (leave the key out instead)"}, nil},
		{"too long", []string{`type = "TCP"`, `request = "` + strings.Repeat("x", 1025) + `"`},
			[]string{"rules.d/web.toml:6: health_check.request: 1025 bytes, more than 1024"}, nil},
		{"UDP without request", []string{`type = "UDP"`, `port = 53`},
			[]string{"rules.d/web.toml:4: health_check.request: missing: a UDP check needs the datagram it sends (request, or request_hex for binary)"}, nil},
		{"UDP without port", []string{`type = "UDP"`, `request = "x"`},
			[]string{"rules.d/web.toml:4: health_check.port: missing: a UDP check has no default port"}, nil},
		{"GRPC without port", []string{`type = "GRPC"`},
			[]string{"rules.d/web.toml:4: health_check.port: missing: a GRPC check has no default port"}, nil},
		{"service name on HTTP2", []string{`type = "HTTP2"`, `grpc_service_name = "x"`},
			[]string{"rules.d/web.toml:6: health_check.grpc_service_name: applies to GRPC only (health_check.type is HTTP2)"}, nil},
		{"service name with a space", []string{`type = "GRPC"`, `port = 1`, `grpc_service_name = "a b"`},
			[]string{`rules.d/web.toml:7: health_check.grpc_service_name: "a b" must be printable ASCII without spaces`}, nil},
		{"host on UDP is unused", []string{`type = "UDP"`, `port = 53`, `request = "x"`, `host = "dns.example.com"`},
			nil, []string{"rules.d/web.toml:8: health_check.host: ignored: a UDP check sends no host name (SSL, GRPC and the HTTP types do)"}},
		{"request path on GRPC is unused", []string{`type = "GRPC"`, `port = 1`, `request_path = "/x"`},
			nil, []string{"rules.d/web.toml:7: health_check.request_path: ignored: health_check.type is GRPC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, ws := loadFiles(t, map[string]string{"rules.d/web.toml": healthRule(tc.body...)})
			if !reflect.DeepEqual(errs, tc.errs) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tc.errs, "\n"))
			}
			if !reflect.DeepEqual(ws, tc.ws) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(tc.ws, "\n"))
			}
		})
	}
}

// TestWeightedMaglevHTTP2: weights come from any HTTP check's header, so
// WEIGHTED_MAGLEV accepts HTTP2 and refuses GRPC.
func TestWeightedMaglevHTTP2(t *testing.T) {
	weighted := func(body ...string) string {
		return lines(`locality_lb_policy = "WEIGHTED_MAGLEV"`) + healthRule(body...)
	}
	if _, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": weighted(`type = "HTTP2"`)}); errs != nil {
		t.Errorf("HTTP2: %v", errs)
	}
	_, errs, _ := loadFiles(t, map[string]string{"rules.d/web.toml": weighted(`type = "GRPC"`, `port = 1`)})
	want := []string{"rules.d/web.toml:1: locality_lb_policy: WEIGHTED_MAGLEV needs an HTTP, HTTPS or HTTP2 health check (weights come from its X-Load-Balancing-Endpoint-Weight header); health_check.type is GRPC"}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("GRPC: %v, want %v", errs, want)
	}
}
