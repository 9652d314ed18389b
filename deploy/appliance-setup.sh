#!/usr/bin/env bash
# appliance-setup.sh: prepare the appliance VM's interface for xlb.
#
# xlb is one-armed: VIP traffic arrives on one interface and leaves on the
# same one, encapsulated towards the backends. The kernel keeps handling
# everything that is not for a VIP (ARP/ND, SSH, BGP, health probes), so
# the host's own networking stays as it is; this script only tunes the
# interface for AF_XDP.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: appliance-setup.sh [options] --interface IFACE

Tune an interface for xlb (run as root before `xlb run`).

Options:
  --interface IFACE  the interface xlb serves (the `interface` of xlb.toml)
  --queues N         set N combined channels (default: leave as they are)
  --dry-run          print the commands instead of running them
  -h, --help         show this help

What it does:
  - turns off LRO and GRO on IFACE: XDP sees frames as the wire carries
    them, and AF_XDP cannot take aggregated super-frames;
  - sets the number of combined channels (RSS queues) with --queues;
  - stops irqbalance from moving the queues' interrupts and pins queue i's
    interrupt to CPU i (xlb pins queue i's worker to CPU i too);
  - raises net.core.optmem_max for AF_XDP socket options and keeps
    rp_filter loose on IFACE (ICMP errors about VIP flows come from
    anywhere);
  - prints what xlb will see: driver, channels, XDP support hints.
USAGE
}

die() { echo "ERROR: $*" >&2; exit 2; }

iface="" queues="" dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --interface) [ $# -ge 2 ] || die "--interface needs a value"; iface=$2; shift 2 ;;
    --queues) [ $# -ge 2 ] || die "--queues needs a value"; queues=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done
[ -n "$iface" ] || { usage >&2; die "--interface is required"; }
case "$queues" in ''|*[!0-9]*) [ -z "$queues" ] || die "--queues: not a number: $queues" ;; esac

run() {
  if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi
}

if [ "$dry" = 0 ]; then
  [ "$(id -u)" = 0 ] || die "run as root"
  [ -e "/sys/class/net/$iface" ] || die "no interface $iface"
fi

run ethtool -K "$iface" lro off gro off || echo "WARN : could not change offloads on $iface" >&2
if [ -n "$queues" ]; then
  run ethtool -L "$iface" combined "$queues" || echo "WARN : could not set $queues channels on $iface" >&2
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet irqbalance 2>/dev/null; then
  run systemctl stop irqbalance
fi
i=0
for irq in $(grep -E "${iface}(-|:).*(TxRx|rx|queue)" /proc/interrupts 2>/dev/null | cut -d: -f1 | tr -d ' '); do
  cpu=$(( i % $(nproc) ))
  run sh -c "echo $cpu > /proc/irq/$irq/smp_affinity_list"
  i=$((i + 1))
done
run sysctl -q -w net.core.optmem_max=1048576
run sysctl -q -w "net.ipv4.conf.$iface.rp_filter=2"
if [ "$dry" = 0 ]; then
  echo "INFO : $iface driver $(ethtool -i "$iface" 2>/dev/null | awk '/^driver/ {print $2}'), $(ls -d /sys/class/net/"$iface"/queues/rx-* 2>/dev/null | wc -l) rx queues"
  echo "INFO : xlb attaches in native XDP mode where the driver supports it, else generic; \`xlb run\` logs which."
fi
