package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// backgroundTraffic drives HTTP requests over IPv4 until the test ends.
func backgroundTraffic(t *testing.T, l *lab.Lab) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l.Drive(ctx, lab.DriveOptions{Requests: 100, Concurrency: 4, Family: 4})
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// injectFrames sends raw Ethernet frames to the appliance from the
// router's end of its link (the kernel checks nothing on the way out, so
// malformed packets reach xlb as they are).
func injectFrames(t *testing.T, l *lab.Lab, frames [][]byte) {
	t.Helper()
	a := l.Appliances[0]
	err := l.Router.Do(func() error {
		ifi, err := net.InterfaceByName(a.RouterLink)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		copy(sa.Addr[:], a.MAC)
		for _, f := range frames {
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
}

// malformed returns n frames to the lab's VIP that xlb's parser refuses
// for reason: "ipv4-bad-checksum" or "bad-tcp-flags".
func malformed(l *lab.Lab, reason string, n int) [][]byte {
	var out [][]byte
	for i := range n {
		s := packettest.Spec{SrcMAC: l.GatewayMAC, DstMAC: l.XLBMAC, Src: l.ClientAddrs4[i%len(l.ClientAddrs4)], Dst: l.Opts.VIP4,
			Proto: layers.IPProtocolTCP, SrcPort: uint16(50000 + i), DstPort: l.Opts.HTTPPort, ACK: true, Payload: []byte("malformed")}
		if reason == "bad-tcp-flags" {
			s.SYN, s.FIN, s.ACK = true, true, false
		}
		f := packettest.Frame(s)
		if reason == "ipv4-bad-checksum" {
			f[14+10] ^= 0x5a
		}
		out = append(out, f)
	}
	return out
}

// readPcapNG reads every packet of a pcapng file with gopacket, with the
// name of the interface each came on.
func readPcapNG(t *testing.T, data []byte) (pkts []gopacket.Packet, ifaces []string) {
	t.Helper()
	r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("pcapng: %v", err)
	}
	for {
		d, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		intf, err := r.Interface(ci.InterfaceIndex)
		if err != nil {
			t.Fatal(err)
		}
		pkts = append(pkts, gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default))
		ifaces = append(ifaces, intf.Name)
	}
	return pkts, ifaces
}

// ipv4Layers returns a packet's IPv4 headers, outer first.
func ipv4Layers(p gopacket.Packet) []*layers.IPv4 {
	var out []*layers.IPv4
	for _, l := range p.Layers() {
		if ip, ok := l.(*layers.IPv4); ok {
			out = append(out, ip)
		}
	}
	return out
}

// tshark runs tshark with stdin and returns its standard output (it
// warns about running as root on stderr).
func tshark(stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("tshark", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	return out, nil
}

func TestEndToEndCapture(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 2})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	x := xlbIn(t, l, rules)
	backgroundTraffic(t, l)
	vip := l.Opts.VIP4.String()
	tunnels := map[string]bool{}
	for _, b := range l.Backends {
		tunnels[b.Tunnel4.String()] = true
	}
	capture := func(args ...string) (string, []byte) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "capture.pcapng")
		_, stderr, err := runXLB(t, append([]string{"capture", "--socket", x.Socket(), "--duration", "90s", "-w", file}, args...)...)
		if err != nil {
			t.Fatalf("xlb capture %v: %v\n%s", args, err, stderr)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return file, data
	}
	for _, point := range []string{"rx", "tx", "both"} {
		t.Run(point, func(t *testing.T) {
			file, data := capture("--point", point, "--count", "100")
			pkts, ifaces := readPcapNG(t, data)
			if len(pkts) != 100 {
				t.Fatalf("%d packets in the file, want 100", len(pkts))
			}
			seen := map[string]int{}
			for i, p := range pkts {
				seen[ifaces[i]]++
				ips := ipv4Layers(p)
				tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
				switch ifaces[i] {
				case "rx:tx": // as received: client → VIP
					if len(ips) != 1 || ips[0].DstIP.String() != vip || tcp == nil || int(tcp.DstPort) != int(l.Opts.HTTPPort) {
						t.Fatalf("packet %d (rx): %v", i, p)
					}
				case "tx:tx": // as sent: appliance → backend, around client → VIP
					if len(ips) != 2 || ips[0].SrcIP.String() != l.XLBAddr4.String() || !tunnels[ips[0].DstIP.String()] ||
						ips[0].Protocol != layers.IPProtocolIPv4 || ips[1].DstIP.String() != vip || tcp == nil || int(tcp.DstPort) != int(l.Opts.HTTPPort) {
						t.Fatalf("packet %d (tx): %v", i, p)
					}
				default:
					t.Fatalf("packet %d on interface %q: not forwarded traffic", i, ifaces[i])
				}
			}
			t.Logf("interfaces: %v", seen)
			if point != "tx" && seen["rx:tx"] == 0 || point != "rx" && seen["tx:tx"] == 0 {
				t.Errorf("point %s: interfaces %v", point, seen)
			}
			t.Run("tshark", func(t *testing.T) {
				if _, err := exec.LookPath("tshark"); err != nil {
					t.Skip("skipped: tshark is not installed (.ci/run installs it)")
				}
				out, err := tshark(nil, "-r", file, "-T", "fields", "-e", "frame.interface_name", "-e", "tcp.dstport")
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if len(lines) != 100 || !strings.Contains(string(out), fmt.Sprintf("\t%d", l.Opts.HTTPPort)) {
					t.Errorf("tshark read %d lines:\n%s", len(lines), out)
				}
			})
		})
	}

	t.Run("drops with their reason, piped to tshark", func(t *testing.T) {
		// Malformed packets injected while a capture of drops runs.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 40 {
				time.Sleep(100 * time.Millisecond)
				injectFrames(t, l, malformed(l, "ipv4-bad-checksum", 1))
			}
		}()
		var out, errOut bytes.Buffer
		app := newApp(&out, &errOut)
		err := app.Run([]string{"xlb", "capture", "--socket", x.Socket(), "--verdict", "drop", "--reason", "ipv4-bad-checksum", "--point", "rx", "--count", "5", "--duration", "60s", "-w", "-"})
		<-done
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		pkts, ifaces := readPcapNG(t, out.Bytes())
		if len(pkts) != 5 {
			t.Fatalf("%d packets, want 5", len(pkts))
		}
		for i := range pkts {
			if ifaces[i] != "rx:drop:ipv4-bad-checksum" {
				t.Errorf("packet %d on %q", i, ifaces[i])
			}
		}
		if _, err := exec.LookPath("tshark"); err != nil {
			t.Skip("skipped the pipe into tshark: tshark is not installed (.ci/run installs it)")
		}
		got, err := tshark(out.Bytes(), "-r", "-", "-T", "fields", "-e", "frame.interface_name", "-e", "ip.dst")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(got), "rx:drop:ipv4-bad-checksum\t"+l.Opts.VIP4.String()); n != 5 {
			t.Errorf("tshark -r - saw %d dropped packets:\n%s", n, got)
		}
	})

	t.Run("listing", func(t *testing.T) {
		stdout, stderr, err := runXLB(t, "capture", "--socket", x.Socket(), "--count", "10", "--duration", "60s", "--backend", l.Backends[1].Tunnel4.String(), "--point", "tx")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 10 {
			t.Fatalf("%d lines:\n%s", len(lines), stdout)
		}
		for _, line := range lines {
			if !strings.Contains(line, " tx tx rule web4 → "+l.Backends[1].Tunnel4.String()) || !strings.Contains(line, "IPv4 "+l.XLBAddr4.String()+" > "+l.Backends[1].Tunnel4.String()) {
				t.Errorf("line %q", line)
			}
		}
		if !strings.Contains(stderr, "xlb capture: 10 packets (ended by count)") {
			t.Errorf("stderr %q", stderr)
		}
	})
}
