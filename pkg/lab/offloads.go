package lab

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/xlbnet/xlb/pkg/ethtool"
	"github.com/xlbnet/xlb/pkg/netns"
)

// disableOffloads turns off TX checksum offload, scatter-gather, TSO and
// GSO on ifname in ns. With ethtool(8) installed it uses it (it knows every
// feature bit of the running kernel, such as tx-tcp-accecn-segmentation);
// without, the legacy ethtool ioctls do it (pkg/ethtool), so a fresh
// machine needs no extra package (a TSO flavour the legacy commands do not
// name may stay on, but without scatter-gather and checksum offload it is
// never used).
func disableOffloads(ns *netns.NS, ifname string) error {
	if _, err := exec.LookPath("ethtool"); err == nil {
		if out, err := ns.Command("ethtool", "-K", ifname, "tx", "off", "sg", "off", "tso", "off", "gso", "off").CombinedOutput(); err != nil {
			return fmt.Errorf("disable offloads on %s: %w: %s", ifname, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	err := ns.Do(func() error {
		for _, cmd := range []uint32{ethtool.STXCSUM, ethtool.SSG, ethtool.STSO, ethtool.SGSO} {
			if err := ethtool.Set(ifname, cmd, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disable offloads on %s: %w", ifname, err)
	}
	return nil
}
