package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// The router's BGP daemon (Options.Router).
const (
	RouterBIRD = "bird" // BIRD 2 (Debian bird2), the default
	RouterFRR  = "frr"  // FRR's zebra and bgpd (Debian frr)
)

// frrDaemons is where Debian's frr package puts zebra and bgpd (not on
// PATH).
var frrDaemons = "/usr/lib/frr"

// ErrNoFRR is returned by Up with Router FRR when zebra, bgpd or vtysh is
// missing.
var ErrNoFRR = errors.New("FRR is not installed (the fleet lab's router runs its zebra and bgpd): apt-get install frr")

// FRRParams fill FRRConfig: the router's identity, the appliances'
// addresses per family, and the prefixes inside which the appliances'
// host routes are accepted.
type FRRParams struct {
	RouterID               netip.Addr
	LocalAS, PeerAS        uint32
	Neighbors4, Neighbors6 []netip.Addr
	VIPs4, VIPs6           netip.Prefix
}

// frrTemplate is the bgpd configuration deploy/fleet.md shows (rendered
// with that page's addresses; TestFRRConfigIsTheDocSnippet keeps them
// equal) and the lab's router runs (rendered with the lab's).
var frrTemplate = template.Must(template.New("frr").Parse(`router bgp {{.LocalAS}}
 bgp router-id {{.RouterID}}
 neighbor XLB peer-group
 neighbor XLB remote-as {{.PeerAS}}
 neighbor XLB timers 1 3
 neighbor XLB timers connect 2
{{- range .Neighbors4}}
 neighbor {{.}} peer-group XLB
{{- end}}
 neighbor XLB6 peer-group
 neighbor XLB6 remote-as {{.PeerAS}}
 neighbor XLB6 timers 1 3
 neighbor XLB6 timers connect 2
{{- range .Neighbors6}}
 neighbor {{.}} peer-group XLB6
{{- end}}
 !
 address-family ipv4 unicast
  no neighbor XLB6 activate
  neighbor XLB prefix-list xlb-vips4 in
  neighbor XLB route-map NONE out
  maximum-paths 16
 exit-address-family
 address-family ipv6 unicast
  neighbor XLB6 activate
  neighbor XLB6 prefix-list xlb-vips6 in
  neighbor XLB6 route-map NONE out
  maximum-paths 16
 exit-address-family
!
ip prefix-list xlb-vips4 seq 10 permit {{.VIPs4}} ge 32
ipv6 prefix-list xlb-vips6 seq 10 permit {{.VIPs6}} ge 128
route-map NONE deny 10
`))

// FRRConfig is the router's bgpd configuration: eBGP to every appliance
// per family with keepalive 1 s / hold 3 s and a 2 s connect retry, VIP
// host routes imported, nothing exported, up to 16 equal paths per VIP
// (maximum-paths), which zebra installs as one multipath kernel route.
func FRRConfig(p FRRParams) string {
	var b strings.Builder
	if err := frrTemplate.Execute(&b, p); err != nil {
		panic(err) // the template and FRRParams are fixed: a bug
	}
	return b.String()
}

// FRRParams are the lab's: the router on the fabric, every appliance, the
// VIPs' /24 and /64.
func (l *Lab) FRRParams() FRRParams {
	return FRRParams{
		RouterID: l.Gateway4, LocalAS: RouterAS, PeerAS: ApplianceAS,
		Neighbors4: l.ApplianceAddrs(false), Neighbors6: l.ApplianceAddrs(true),
		VIPs4: netip.PrefixFrom(l.Opts.VIP4, 24).Masked(), VIPs6: netip.PrefixFrom(l.Opts.VIP6, 64).Masked(),
	}
}

// frrProcess is zebra and bgpd running in the router namespace, children
// of the process that called Up, with every path (configuration, pid
// files, vty sockets, zebra's API socket, logs) in dir.
type frrProcess struct {
	dir   string
	procs []*daemon // zebra, bgpd
}

type daemon struct {
	name   string
	cmd    *exec.Cmd
	out    strings.Builder
	exited chan struct{}
}

func (f *frrProcess) logFile(d string) string { return filepath.Join(f.dir, d+".log") }

// startFRR sets the router's multipath hash to the 5-tuple and starts
// zebra (which installs bgpd's routes in the router's kernel) and bgpd
// with FRRConfig. They run as the frr user (zebra refuses root unless
// root is in the frrvty group), so dir belongs to frr.
func (l *Lab) startFRR() error {
	if _, err := exec.LookPath("vtysh"); err != nil {
		return ErrNoFRR
	}
	for _, d := range []string{"zebra", "bgpd"} {
		if _, err := os.Stat(filepath.Join(frrDaemons, d)); err != nil {
			return ErrNoFRR
		}
	}
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("%w (no frr user: %v)", ErrNoFRR, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := l.routerHash(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "xlb-lab-frr-")
	if err != nil {
		return err
	}
	f := &frrProcess{dir: dir}
	l.frr = f
	l.onClose(l.stopFRR)
	// Lab-only lines before the configuration deploy/fleet.md shows:
	// session changes in the log.
	conf := "debug bgp neighbor-events\ndebug bgp updates in\n!\n" + FRRConfig(l.FRRParams())
	files := map[string]string{"zebra.conf": "", "bgpd.conf": conf}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	for _, d := range []string{"zebra", "bgpd"} {
		p := &daemon{name: d, exited: make(chan struct{})}
		p.cmd = l.Router.Command("nice", append(routerNice, filepath.Join(frrDaemons, d),
			"-f", filepath.Join(dir, d+".conf"), "-i", filepath.Join(dir, d+".pid"),
			"-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir, "-P", "0",
			"--log", "file:"+f.logFile(d), "--log-level", "debug")...)
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", d, err)
		}
		go func() { p.cmd.Wait(); close(p.exited) }()
		f.procs = append(f.procs, p)
		// bgpd connects to zebra's socket: wait until zebra answers.
		if err := f.waitVTY(p); err != nil {
			return err
		}
	}
	return nil
}

// waitVTY waits until daemon p answers vtysh.
func (f *frrProcess) waitVTY(p *daemon) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.vtysh("-d", p.name, "-c", "show version"); err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %s", p.name, strings.TrimSpace(p.out.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within 10s: %s", p.name, f.dir, strings.TrimSpace(p.out.String()))
		}
	}
}

func (f *frrProcess) vtysh(args ...string) (string, error) {
	out, err := exec.Command("vtysh", append([]string{"--vty_socket", f.dir}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// stopFRR ends bgpd, then zebra (the processes Up started, by their pids),
// and removes their directory.
func (l *Lab) stopFRR() {
	f := l.frr
	if f == nil {
		return
	}
	for i := len(f.procs) - 1; i >= 0; i-- {
		p := f.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	os.RemoveAll(f.dir)
}

// Vtysh runs vtysh commands (each one -c) against the router's FRR and
// returns their output.
func (l *Lab) Vtysh(cmds ...string) (string, error) {
	if l.frr == nil {
		return "", errors.New("lab runs no frr (Options.Router)")
	}
	var args []string
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	return l.frr.vtysh(args...)
}

// FRRLog returns the router's bgpd and zebra logs, for test failure
// messages.
func (l *Lab) FRRLog() string {
	if l.frr == nil {
		return ""
	}
	var b strings.Builder
	for _, d := range []string{"bgpd", "zebra"} {
		text, _ := os.ReadFile(l.frr.logFile(d))
		fmt.Fprintf(&b, "== %s\n%s", d, text)
	}
	return b.String()
}
