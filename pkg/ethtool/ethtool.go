package ethtool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Channels is struct ethtool_channels: the maximum and the current
// number of each kind of channel (ETHTOOL_GCHANNELS).
type Channels struct {
	MaxRX, MaxTX, MaxOther, MaxCombined uint32
	RX, TX, Other, Combined             uint32
}

// GetChannels reads the interface's channel counts.
func GetChannels(ifname string) (Channels, error) {
	c := channels{cmd: cmdGChannels}
	if err := ioctl(ifname, &c); err != nil {
		return Channels{}, fmt.Errorf("ethtool get channels of %s: %w", ifname, err)
	}
	return Channels{MaxRX: c.maxRX, MaxTX: c.maxTX, MaxOther: c.maxOther, MaxCombined: c.maxCombined,
		RX: c.rx, TX: c.tx, Other: c.other, Combined: c.combined}, nil
}

// ActiveRXQueues is the number of receive queues the interface uses now:
// its combined plus receive-only channels (ETHTOOL_GCHANNELS, what
// `ethtool -l` shows under "Current hardware settings"), which an AF_XDP
// socket can bind to; an interface allocates more (ip link's numrxqueues)
// than it may use. A driver without the call reports its queues in
// /sys/class/net/IF/queues (the real count); the second result says which
// source answered.
func ActiveRXQueues(ifname string) (int, string, error) {
	c, err := GetChannels(ifname)
	if err == nil && c.RX+c.Combined > 0 {
		return int(c.RX + c.Combined), "ethtool channels", nil
	}
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return 0, "", err
	}
	entries, serr := os.ReadDir(filepath.Join("/sys/class/net", ifname, "queues"))
	if serr != nil {
		return 0, "", fmt.Errorf("count receive queues of %s: %w", ifname, serr)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "rx-") {
			n++
		}
	}
	if n == 0 {
		return 0, "", fmt.Errorf("count receive queues of %s: none in /sys/class/net/%s/queues", ifname, ifname)
	}
	return n, "sysfs", nil
}

// Legacy offload commands (include/uapi/linux/ethtool.h); the kernel still
// maps them onto the netdev features.
const (
	GTXCSUM = 0x16 // get TX checksum offload
	STXCSUM = 0x17 // set TX checksum offload
	GSG     = 0x18 // get scatter-gather
	SSG     = 0x19 // set scatter-gather: without it no TSO flavour stays on
	GTSO    = 0x1e // get TCP segmentation offload
	STSO    = 0x1f // set TCP segmentation offload
	GGSO    = 0x23 // get generic segmentation offload
	SGSO    = 0x24 // set generic segmentation offload
)

// Get runs a legacy "get" command (GTXCSUM, GSG, GTSO, GGSO) and returns
// its value (1 on, 0 off).
func Get(ifname string, cmd uint32) (uint32, error) {
	v := value{cmd: cmd}
	if err := ioctl(ifname, &v); err != nil {
		return 0, fmt.Errorf("ethtool command %#x on %s: %w", cmd, ifname, err)
	}
	return v.data, nil
}

// Set runs a legacy "set" command (STXCSUM, SSG, STSO, SGSO).
func Set(ifname string, cmd, data uint32) error {
	v := value{cmd: cmd, data: data}
	if err := ioctl(ifname, &v); err != nil {
		return fmt.Errorf("ethtool command %#x on %s: %w", cmd, ifname, err)
	}
	return nil
}

const cmdGChannels = 0x3c

// value is struct ethtool_value.
type value struct {
	cmd  uint32
	data uint32
}

// channels is struct ethtool_channels.
type channels struct {
	cmd                                 uint32
	maxRX, maxTX, maxOther, maxCombined uint32
	rx, tx, other, combined             uint32
}
