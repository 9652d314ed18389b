package encap_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

func TestNewTemplateValidates(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name    string
		mod     func(*encap.Spec)
		wantErr string // "" means valid
	}{
		{name: "ipip v4", mod: func(s *encap.Spec) {}},
		{name: "gue v6", mod: func(s *encap.Spec) { s.Kind, s.Src, s.Dst = encap.GUE, a(self6), a(back6) }},
		{name: "4in6 explicit", mod: func(s *encap.Spec) { s.Src, s.Dst, s.Inner = a(self6), a(back6), packet.IPv4 }},
		{name: "mapped v4 addresses are v4", mod: func(s *encap.Spec) { s.Src, s.Dst = a("::ffff:192.0.2.1"), a("::ffff:192.0.2.10") }},
		{name: "direct needs no addresses", mod: func(s *encap.Spec) { s.Kind, s.Src, s.Dst = encap.Direct, netip.Addr{}, netip.Addr{} }},
		{name: "no kind", mod: func(s *encap.Spec) { s.Kind = encap.KindNone }, wantErr: "unknown kind"},
		{name: "kind out of range", mod: func(s *encap.Spec) { s.Kind = 9 }, wantErr: "unknown kind"},
		{name: "6in4", mod: func(s *encap.Spec) { s.Inner = packet.IPv6 }, wantErr: "IPv6 inside IPv4 is not supported"},
		{name: "6in4 gre", mod: func(s *encap.Spec) { s.Kind, s.Inner = encap.GRE, packet.IPv6 }, wantErr: "IPv6 inside IPv4"},
		{name: "bad inner family", mod: func(s *encap.Spec) { s.Inner = 5 }, wantErr: "unknown inner family"},
		{name: "mixed families", mod: func(s *encap.Spec) { s.Dst = a(back6) }, wantErr: "different families"},
		{name: "no backend", mod: func(s *encap.Spec) { s.Dst = netip.Addr{} }, wantErr: "addresses are required"},
		{name: "no source", mod: func(s *encap.Spec) { s.Src = netip.Addr{} }, wantErr: "addresses are required"},
		{name: "multicast backend", mod: func(s *encap.Spec) { s.Dst = a("239.1.1.1") }, wantErr: "not a unicast"},
		{name: "broadcast backend", mod: func(s *encap.Spec) { s.Dst = a("255.255.255.255") }, wantErr: "not a unicast"},
		{name: "unspecified source", mod: func(s *encap.Spec) { s.Src = a("::"); s.Dst = a(back6) }, wantErr: "not a unicast"},
		{name: "zero source MAC", mod: func(s *encap.Spec) { s.SrcMAC = [6]byte{} }, wantErr: "source MAC is zero"},
		{name: "zero next-hop MAC", mod: func(s *encap.Spec) { s.DstMAC = [6]byte{} }, wantErr: "destination MAC is zero"},
		{name: "mtu too small v4", mod: func(s *encap.Spec) { s.MTU = 575 }, wantErr: "mtu 575 outside 576..65535"},
		{name: "mtu too small v6 gue", mod: func(s *encap.Spec) { s.Kind, s.Src, s.Dst, s.MTU = encap.GUE, a(self6), a(back6), 1327 }, wantErr: "mtu 1327 outside 1328..65535"},
		{name: "mtu v6 gue minimum", mod: func(s *encap.Spec) { s.Kind, s.Src, s.Dst, s.MTU = encap.GUE, a(self6), a(back6), 1328 }},
		{name: "mtu too large", mod: func(s *encap.Spec) { s.MTU = 65536 }, wantErr: "outside"},
		{name: "direct mtu too small", mod: func(s *encap.Spec) { s.Kind, s.MTU = encap.Direct, 100 }, wantErr: "mtu 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(encap.IPIP, false)
			tt.mod(&s)
			tmpl, err := encap.NewTemplate(s)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewTemplate: %v", err)
				}
				if tmpl.Kind() != s.Kind {
					t.Errorf("Kind = %v, want %v", tmpl.Kind(), s.Kind)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewTemplate error = %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "encap template") {
				t.Errorf("error %q lacks the lower-case context prefix", err)
			}
		})
	}
}

func TestTemplateDefaultsAndOverheads(t *testing.T) {
	tests := []struct {
		kind     encap.Kind
		v6       bool
		overhead int
	}{
		{encap.IPIP, false, 20}, {encap.IPIP, true, 40},
		{encap.GUE, false, 28}, {encap.GUE, true, 48},
		{encap.GRE, false, 24}, {encap.GRE, true, 44},
		{encap.Direct, false, 0}, {encap.Direct, true, 0},
	}
	for _, tt := range tests {
		tmpl, err := encap.NewTemplate(spec(tt.kind, tt.v6))
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Overhead() != tt.overhead || encap.Overhead(tt.kind, tt.v6) != tt.overhead {
			t.Errorf("%v v6=%v: overhead %d / %d, want %d", tt.kind, tt.v6, tmpl.Overhead(), encap.Overhead(tt.kind, tt.v6), tt.overhead)
		}
		if tmpl.MTU() != encap.DefaultMTU || tmpl.InnerMTU() != encap.DefaultMTU-tt.overhead {
			t.Errorf("%v: MTU %d inner %d", tt.kind, tmpl.MTU(), tmpl.InnerMTU())
		}
		if tt.kind == encap.GUE && tmpl.Spec().GUEPort != encap.DefaultGUEPort {
			t.Errorf("GUE port default = %d", tmpl.Spec().GUEPort)
		}
	}
}

func TestKindNames(t *testing.T) {
	for _, k := range []encap.Kind{encap.IPIP, encap.GUE, encap.GRE, encap.Direct} {
		got, err := encap.ParseKind(strings.ToLower(k.String()))
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", strings.ToLower(k.String()), got, err)
		}
	}
	if encap.Direct.String() != "DIRECT" || encap.Kind(42).String() != "Kind(42)" {
		t.Errorf("String: %q %q", encap.Direct, encap.Kind(42))
	}
	if _, err := encap.ParseKind("vxlan"); err == nil || !strings.Contains(err.Error(), `"vxlan"`) {
		t.Errorf("ParseKind(vxlan) error = %v", err)
	}
	if _, err := encap.ParseKind("NONE"); err == nil {
		t.Errorf("ParseKind(NONE) accepted")
	}
}

func TestResultNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range encap.Result(encap.NumResults) {
		s := r.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("Result(%d).String() = %q (empty, unknown or repeated)", r, s)
		}
		seen[s] = true
	}
	if encap.TooBig.String() != "packet-too-big" || encap.Result(encap.NumResults).String() != "unknown" {
		t.Errorf("names: %q %q", encap.TooBig, encap.Result(encap.NumResults))
	}
}

// TestUsesFlowHash: the encapsulation of a packet changes with the flow
// hash exactly when the template says it reads one.
func TestUsesFlowHash(t *testing.T) {
	for _, c := range perfCases() {
		tmpl, err := encap.NewTemplate(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, r := packet.Parse(c.in)
		if r != packet.OK {
			t.Fatal(r)
		}
		var out [2][]byte
		for i, h := range []uint64{0x0123456789abcdef, 0x0123456789abcdee} {
			buf, off, n := chunk(c.in)
			o, l, res := tmpl.Encap(buf, off, n, &m, h, 7)
			if res != encap.OK {
				t.Fatalf("%s: %v", c.name, res)
			}
			out[i] = buf[o : o+l]
		}
		if differ := string(out[0]) != string(out[1]); differ != tmpl.UsesFlowHash() {
			t.Errorf("%s: output depends on the flow hash: %v; UsesFlowHash: %v", c.name, differ, tmpl.UsesFlowHash())
		}
	}
}
