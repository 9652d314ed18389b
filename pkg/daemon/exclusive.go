package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/procfd"
)

// One daemon per interface and per control socket
// (docs/design.md#command-line).
//
// claim runs when a daemon starts fresh (not as the successor of a
// hand-over, which takes over its predecessor's program and socket on
// purpose). It refuses to start when a live process holds the XDP program
// attached to the interface — another xlb, most likely — naming its pid;
// an attached program no process holds (the pinned link of an xlb that
// crashed or that systemd stopped with its fd store) is the one this
// daemon takes over, as before. It then binds the control socket before
// anything is attached, and a socket it cannot bind (another process
// serves it) stops the start: a daemon nobody can reach would run
// unmanaged and share the state file.
func (d *daemon) claim() error {
	if err := xdpFree(d.cfg.Interface); err != nil {
		return err
	}
	ln, err := control.Listen(d.cfg.ControlSocket)
	if err != nil {
		return err
	}
	d.controlLn = ln
	return nil
}

// unclaim closes and removes the control socket of a daemon that stops
// before it served.
func (d *daemon) unclaim() {
	if d.controlLn != nil {
		d.controlLn.Close()
		os.Remove(d.cfg.ControlSocket)
		d.controlLn = nil
	}
}

// xdpFree returns an error when ifname has an XDP program that a live
// process (other than this one) holds.
func xdpFree(ifname string) error {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return nil
	}
	holders := bpfProgHolders(x.ProgId)
	if len(holders) == 0 {
		return nil
	}
	return fmt.Errorf("%s already has an XDP program (another xlb? %s); stop it first (xlb stop -c its configuration)", ifname, strings.Join(holders, ", "))
}

// bpfProgHolders lists the processes (but this one) holding a file
// descriptor of BPF program id, or of a BPF link running it, as "pid N
// (comm)": what bpftool's pids column shows, from /proc/*/fdinfo.
func bpfProgHolders(id uint32) []string {
	want := "prog_id:\t" + strconv.FormatUint(uint64(id), 10)
	self := os.Getpid()
	var out []string
	for _, pid := range procfd.Holders(func(pid int, fd, target string) bool {
		return pid != self && (target == "anon_inode:bpf-prog" || target == "anon_inode:bpf_link") && procfd.InfoHas(pid, fd, want)
	}) {
		out = append(out, fmt.Sprintf("pid %d (%s)", pid, procfd.Comm(pid)))
	}
	return out
}
