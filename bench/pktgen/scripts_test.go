// Package pktgen_test checks the sample scripts' flag contract (the
// kernel samples' exit codes and messages) and, as root, one real run of
// a sample through `xlb pktgen` on a veth counted at its peer.
package pktgen_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var samples = []string{
	"pktgen_sample01_simple.sh",
	"pktgen_sample02_multiqueue.sh",
	"pktgen_sample03_burst_single_flow.sh",
	"pktgen_sample04_many_flows.sh",
	"pktgen_sample05_flow_per_thread.sh",
}

// stubXLB writes an executable that records its arguments and prints a
// pktgen result, standing in for xlb.
func stubXLB(t *testing.T) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	bin, argsFile = filepath.Join(dir, "xlb"), filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\necho 'Device: stub@0'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func runScript(t *testing.T, env []string, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command("./"+name, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
	}
	return code, o.String(), e.String()
}

func TestFlagContract(t *testing.T) {
	stub, _ := stubXLB(t)
	env := []string{"XLB=" + stub, "PKTGEN_BACKEND=afxdp"}
	for _, s := range samples {
		for _, tc := range []struct {
			name   string
			env    []string
			args   []string
			code   int
			stderr string // must appear on stderr
			stdout string // must appear on stdout
		}{
			{"help", env, []string{"-h"}, 2, "ERROR: [ERROR] Unknown parameters!!!", "Usage: ./" + s + " [-vx] -i ethX"},
			{"unknown flag", env, []string{"-i", "lo", "-z"}, 2, "ERROR: [ERROR] Unknown parameters!!!", "Usage:"},
			{"missing -i", env, []string{"-m", "02:00:00:00:00:01"}, 2, "ERROR: Please specify output device", "Usage:"},
			{"bad port", env, []string{"-i", "lo", "-p", "444-433"}, 5, "ERROR: Invalid port(s): 444-433", ""},
			{"port zero", env, []string{"-i", "lo", "-p", "0"}, 5, "ERROR: Invalid port(s): 0-0", ""},
			{"bad address", env, []string{"-i", "lo", "-d", "198.18.0.300"}, 5, "ERROR: Invalid IPv4 address", ""},
			{"no such device", env, []string{"-i", "nosuchdev0"}, 3, "ERROR: Device nosuchdev0 does not exist", ""},
			{"bad backend", []string{"PKTGEN_BACKEND=dpdk"}, []string{"-i", "lo"}, 2, "ERROR: PKTGEN_BACKEND=dpdk", ""},
			{"no xlb", []string{"PKTGEN_BACKEND=afxdp", "XLB=/nonexistent/xlb"}, []string{"-i", "lo"}, 3, "ERROR: xlb binary not found", ""},
			{"verbose info", env, []string{"-v", "-h"}, 2, "INFO : Verbose mode", ""},
		} {
			t.Run(s+"/"+tc.name, func(t *testing.T) {
				code, stdout, stderr := runScript(t, tc.env, s, tc.args...)
				if code != tc.code || !strings.Contains(stderr, tc.stderr) || !strings.Contains(stdout, tc.stdout) {
					t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant on stderr %q, on stdout %q", code, tc.code, stdout, stderr, tc.stderr, tc.stdout)
				}
			})
		}
	}
	t.Run("missing MAC warns", func(t *testing.T) {
		_, _, stderr := runScript(t, env, samples[1], "-i", "nosuchdev0")
		if !strings.Contains(stderr, "WARN : Missing destination MAC address") || !strings.Contains(stderr, "WARN : Missing destination IP address") {
			t.Errorf("stderr: %s", stderr)
		}
	})
}

// TestAFXDPMapping: what each sample asks of `xlb pktgen` (run as root,
// because the scripts re-run themselves with sudo otherwise).
func TestAFXDPMapping(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the scripts re-run themselves under sudo when not root")
	}
	for _, tc := range []struct {
		script string
		args   []string
		code   int
		want   []string // each line: one xlb invocation
	}{
		{samples[0], []string{"-i", "lo"}, 2, nil}, // sample01 needs -m
		{samples[0], []string{"-i", "lo", "-m", "02:00:00:00:00:02", "-k"}, 0, []string{
			"pktgen --dev lo --size 60 --count 100000 --dst-mac 02:00:00:00:00:02 --dst 198.18.0.42 --udp-csum --src-port 9-109 --threads 1 --first-thread 0"}},
		{samples[1], []string{"-i", "lo", "-t", "2", "-f", "1", "-6", "-d", "fd00::/120", "-p", "433-444", "-s", "128", "-w", "1000"}, 0, []string{
			"pktgen --dev lo --size 128 --count 100000 --dst-mac 90:e2:ba:ff:ff:ff --dst fd00::/120 --dst-port 433-444 --delay 1000 --src-port 9-109 --threads 2 --first-thread 1 --batch 1"}},
		{samples[2], []string{"-i", "lo", "-m", "02:00:00:00:00:02"}, 0, []string{
			"pktgen --dev lo --size 60 --count 0 --dst-mac 02:00:00:00:00:02 --dst 198.18.0.42 --threads 1 --first-thread 0 --batch 32"}},
		{samples[3], []string{"-i", "lo", "-b", "8"}, 1, nil}, // no bursting in sample04
		{samples[3], []string{"-i", "lo", "-n", "10", "-t", "2"}, 0, []string{
			"pktgen --dev lo --size 60 --count 10 --dst-mac 90:e2:ba:ff:ff:ff --dst 198.18.0.42 --src 198.18.0.0/15 --flows 8000 --flowlen 10 --threads 2 --first-thread 0"}},
		{samples[4], []string{"-i", "lo", "-t", "2", "-n", "5"}, 0, []string{
			"pktgen --dev lo --size 60 --count 5 --dst-mac 90:e2:ba:ff:ff:ff --dst 198.18.0.42 --src 198.18.1.1 --threads 1 --first-thread 0 --batch 32",
			"pktgen --dev lo --size 60 --count 5 --dst-mac 90:e2:ba:ff:ff:ff --dst 198.18.0.42 --src 198.18.2.1 --threads 1 --first-thread 1 --batch 32"}},
		{samples[1], []string{"-i", "lo", "-a"}, 1, nil}, // append needs the kernel
	} {
		t.Run(tc.script+strings.Join(tc.args, ""), func(t *testing.T) {
			stub, argsFile := stubXLB(t)
			code, stdout, stderr := runScript(t, []string{"XLB=" + stub, "PKTGEN_BACKEND=afxdp"}, tc.script, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			got, _ := os.ReadFile(argsFile)
			lines := strings.Split(strings.TrimSpace(string(got)), "\n")
			if len(tc.want) == 0 && len(got) != 0 {
				t.Fatalf("xlb was run: %s", got)
			}
			if len(tc.want) == 0 {
				return
			}
			// sample05 starts its threads side by side: order may vary.
			if strings.Join(sorted(lines), "\n") != strings.Join(sorted(tc.want), "\n") {
				t.Errorf("xlb runs:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
			if c := strings.Count(stdout, "Device: stub@0"); c != len(tc.want) {
				t.Errorf("stdout shows %d results, want %d:\n%s", c, len(tc.want), stdout)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSampleRunsXLBPktgen runs sample02 with two threads for real through
// the xlb binary, on a veth in a namespace, and counts at the peer.
func TestSampleRunsXLBPktgen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and AF_XDP")
	}
	xlb := filepath.Join(t.TempDir(), "xlb")
	if out, err := exec.Command("go", "build", "-o", xlb, "../../cmd/xlb").CombinedOutput(); err != nil {
		t.Fatalf("build xlb: %v\n%s", err, out)
	}
	suffix := fmt.Sprint(os.Getpid() % 100000)
	a, b := "pgsample-a"+suffix, "pgsample-b"+suffix
	for _, ns := range []string{a, b} {
		ip(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		ip(t, "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	ip(t, "-n", a, "link", "add", "pgs0", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", "pgs1", "netns", b, "numtxqueues", "2", "numrxqueues", "2")
	ip(t, "-n", a, "addr", "add", "198.18.0.1/24", "dev", "pgs0")
	ip(t, "-n", a, "link", "set", "pgs0", "up")
	ip(t, "-n", b, "link", "set", "pgs1", "up")
	rx := func() uint64 {
		var l []struct {
			Address string `json:"address"`
			Stats64 struct {
				RX struct{ Packets uint64 } `json:"rx"`
			} `json:"stats64"`
		}
		if err := json.Unmarshal([]byte(ip(t, "-n", b, "-s", "-j", "link", "show", "pgs1")), &l); err != nil || len(l) != 1 {
			t.Fatalf("peer counters: %v", err)
		}
		return l[0].Stats64.RX.Packets
	}
	before := rx()
	cmd := exec.Command("ip", "netns", "exec", a, "./"+samples[1], "-i", "pgs0", "-m", "02:00:00:00:00:02", "-t", "2", "-n", "2000", "-s", "100")
	cmd.Env = append(os.Environ(), "XLB="+xlb, "PKTGEN_BACKEND=afxdp")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sample02: %v\n%s", err, out)
	}
	t.Logf("\n%s", out)
	for q := range 2 {
		if !strings.Contains(string(out), fmt.Sprintf("Device: pgs0@%d\nResult: OK: ", q)) ||
			!strings.Contains(string(out), "usec, 2000 (100byte,0frags)\n") {
			t.Fatalf("output lacks thread %d's result:\n%s", q, out)
		}
	}
	var got uint64
	for range 50 {
		if got = rx() - before; got >= 4000 {
			break
		}
		exec.Command("sleep", "0.02").Run()
	}
	if got != 4000 {
		t.Fatalf("peer received %d packets, want 4000", got)
	}

	// The same generator with --json: one object whose counts match.
	before = rx()
	js, err := exec.Command("ip", "netns", "exec", a, xlb, "pktgen", "--json", "-i", "pgs0", "-m", "02:00:00:00:00:02",
		"--proto", "tcp-syn", "--src", "198.19.0.0/16", "--flows", "500", "-n", "1500", "-s", "64").Output()
	if err != nil {
		t.Fatalf("xlb pktgen --json: %v\n%s", err, js)
	}
	var rep struct {
		Interface string `json:"interface"`
		Packets   uint64 `json:"packets"`
		Errors    uint64 `json:"errors"`
		Threads   []struct {
			Device  string `json:"device"`
			Packets uint64 `json:"packets"`
			PktSize int    `json:"pkt_size"`
			PPS     uint64 `json:"pps"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(js, &rep); err != nil || strings.Count(strings.TrimSpace(string(js)), "\n") != 0 {
		t.Fatalf("not one JSON object (%v):\n%s", err, js)
	}
	if rep.Interface != "pgs0" || rep.Packets != 1500 || rep.Errors != 0 || len(rep.Threads) != 1 ||
		rep.Threads[0].Device != "pgs0@0" || rep.Threads[0].PktSize != 64 || rep.Threads[0].PPS == 0 {
		t.Fatalf("report %+v", rep)
	}
	for range 50 {
		if got = rx() - before; got >= 1500 {
			break
		}
		exec.Command("sleep", "0.02").Run()
	}
	if got != 1500 {
		t.Fatalf("peer received %d packets from the --json run, want 1500", got)
	}
}

// TestKernelBackendWrites: with the kernel backend pointed at a directory
// of plain files standing in for /proc/net/pktgen, each sample writes the
// configuration the kernel samples write (seen through -x's "cmd:" lines).
func TestKernelBackendWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the scripts re-run themselves under sudo when not root")
	}
	for _, tc := range []struct {
		script string
		args   []string
		want   []string // in order, each a whole "cmd:" line's command
		not    []string
	}{
		{samples[0], []string{"-i", "lo", "-m", "02:00:00:00:00:02", "-k"}, []string{
			"reset > pgctrl", "rem_device_all > kpktgend_0", "add_device lo > kpktgend_0", "count 100000 > lo", "clone_skb 0 > lo",
			"pkt_size 60 > lo", "delay 0 > lo", "flag NO_TIMESTAMP > lo", "flag UDPCSUM > lo", "dst_mac 02:00:00:00:00:02 > lo",
			"dst 198.18.0.42 > lo", "flag UDPSRC_RND > lo", "udp_src_min 9 > lo", "udp_src_max 109 > lo", "start > pgctrl"}, nil},
		{samples[1], []string{"-i", "lo", "-t", "2", "-f", "1", "-p", "433-444"}, []string{
			"add_device lo@1 > kpktgend_1", "flag QUEUE_MAP_CPU > lo@1", "dst_min 198.18.0.42 > lo@1", "dst_max 198.18.0.42 > lo@1",
			"flag UDPDST_RND > lo@1", "udp_dst_min 433 > lo@1", "udp_dst_max 444 > lo@1",
			"add_device lo@2 > kpktgend_2", "udp_src_max 109 > lo@2", "start > pgctrl"}, []string{"kpktgend_0"}},
		{samples[2], []string{"-i", "lo", "-6", "-d", "fd00::/126"}, []string{
			"count 0 > lo@0", "dst6_min fd00:: > lo@0", "dst6_max fd00::3 > lo@0", "burst 32 > lo@0", "start > pgctrl"}, []string{"UDPSRC_RND"}},
		{samples[3], []string{"-i", "lo", "-d", "198.18.0.0/30"}, []string{
			"dst_min 198.18.0.0 > lo@0", "dst_max 198.18.0.3 > lo@0", "flag IPSRC_RND > lo@0", "src_min 198.18.0.0 > lo@0",
			"src_max 198.19.255.255 > lo@0", "flows 8000 > lo@0", "flowlen 10 > lo@0", "flag FLOW_SEQ > lo@0", "start > pgctrl"}, nil},
		{samples[4], []string{"-i", "lo", "-t", "2"}, []string{
			"src_min 198.18.1.1 > lo@0", "src_max 198.18.1.1 > lo@0", "burst 32 > lo@0",
			"src_min 198.18.2.1 > lo@1", "src_max 198.18.2.1 > lo@1", "start > pgctrl"}, nil},
		{samples[1], []string{"-i", "lo", "-a"}, []string{"add_device lo@0 > kpktgend_0"}, []string{"reset > pgctrl", "start > pgctrl"}},
	} {
		t.Run(tc.script+strings.Join(tc.args, ""), func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"pgctrl", "kpktgend_0", "kpktgend_1", "kpktgend_2", "lo", "lo@0", "lo@1", "lo@2"} {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The exit status is the last grep's: the plain files never say
			// "Result:", so it is 1 here where /proc would make it 0.
			code, stdout, stderr := runScript(t, []string{"PKTGEN_BACKEND=kernel", "PKTGEN_PROC_DIR=" + dir}, tc.script, append(tc.args, "-x")...)
			if code > 1 || strings.Contains(stderr, "ERROR:") {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			var cmds []string
			for _, l := range strings.Split(stdout, "\n") {
				if c, ok := strings.CutPrefix(l, "cmd: "); ok {
					cmds = append(cmds, strings.ReplaceAll(c, dir+"/", ""))
				}
			}
			i := 0
			for _, c := range cmds {
				if i < len(tc.want) && c == tc.want[i] {
					i++
				}
				for _, n := range tc.not {
					if strings.Contains(c, n) {
						t.Errorf("wrote %q", c)
					}
				}
			}
			if i < len(tc.want) {
				t.Errorf("missing (in order) %q; wrote:\n%s", tc.want[i], strings.Join(cmds, "\n"))
			}
		})
	}
}
