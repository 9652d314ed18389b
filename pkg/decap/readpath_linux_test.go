package decap

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/decap/decaptest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestReadPathAllocatesNothing runs the real per-packet step of a reader,
// Read from the socket and handle, over a raw IPIP socket and a GUE UDP
// socket (the two kinds of file decap reads), and counts allocations.
func TestReadPathAllocatesNothing(t *testing.T) {
	ns := testutil.NewNetNS(t, "dca")
	lo := netip.MustParseAddr("127.0.0.1")
	inner := decaptest.UDP(client4, vip4, 1, make([]byte, 512))

	readers := map[string]*reader{}
	var sendRaw int
	var gue, sendGUE *net.UDPConn
	err := ns.Do(func() error {
		f, err := rawSocket(unix.AF_INET, protoIPIP, 1<<20)
		if err != nil {
			return err
		}
		readers["raw"] = &reader{kind: kindRaw4, src: f, tun: &fakeTUN{}, buf: make([]byte, bufSize)}
		if sendRaw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, protoIPIP); err != nil {
			return err
		}
		if gue, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		readers["gue"] = &reader{kind: kindGUE, src: gue, tun: &fakeTUN{}, buf: make([]byte, bufSize)}
		sendGUE, err = net.DialUDP("udp4", nil, gue.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range readers {
			r.src.Close()
		}
		unix.Close(sendRaw)
		sendGUE.Close()
	}()
	to := &unix.SockaddrInet4{Addr: lo.As4()}
	send := map[string]func(){
		"raw": func() { unix.Sendto(sendRaw, inner, 0, to) },
		"gue": func() { sendGUE.Write(inner) },
	}
	for name, r := range readers {
		step := func() {
			send[name]()
			n, err := r.src.Read(r.buf)
			if err != nil {
				t.Fatalf("%s: read: %v", name, err)
			}
			r.handle(n)
		}
		step() // warm up
		if a := testing.AllocsPerRun(200, step); a != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", name, a)
		}
		if r.st.delivered.Load() < 201 {
			t.Errorf("%s: delivered %d, want 201 (counters: drops %v)", name, r.st.delivered.Load(), r.st.drops[1:])
		}
	}
}
