#!/usr/bin/env bash
# backend-setup.sh: prepare a Linux backend of xlb the kernel-native way.
#
# xlb delivers client packets to a backend without NAT: encapsulated in
# IPIP, GUE or GRE (L3), or with only the MAC rewritten (DIRECT, same L2).
# The backend must accept packets addressed to the VIP and answer the
# client directly with source = VIP (direct server return). This script
# sets that up with the kernel's own tunnel devices. On hosts without the
# ipip/ip6_tunnel/sit/fou/ip_gre modules, run `xlb decap` instead (a TUN-
# based decapsulator in userspace).
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: backend-setup.sh [options] --vip ADDR [--vip ADDR ...]

Prepare this host as an xlb backend (kernel-native decapsulation).

Options:
  --vip ADDR         a VIP (IPv4 or IPv6) to put on lo; repeat for several
  --encap LIST       comma-separated: ipip,gue,gre,direct (default: ipip,gue,gre,direct)
  --gue-port PORT    UDP port of GUE (default 6080, as xlb's [encap] gue_port)
  --dev IFACE        uplink for arp_ignore/arp_announce (default: the
                     interface of the IPv4 default route)
  --down             undo: remove the VIPs from lo, the fou ports, and bring
                     the tunnel devices down (sysctls and modules are kept)
  --dry-run          print the commands instead of running them
  -h, --help         show this help

What it does (up):
  ipip    modprobe ipip sit ip6_tunnel; bring up the fallback devices tunl0
          (4in4), sit0 (6in4) and ip6tnl0 in "mode any" (4in6, 6in6): they
          receive tunnel packets from any source.
  gue     modprobe fou; ip fou add port PORT gue (IPv4 and IPv6). GUE
          variant 1 (what xlb sends) is handed to the ipip devices, so gue
          also sets up ipip.
  gre     modprobe ip_gre ip6_gre; bring up gre0 and ip6gre0 (fallback
          devices: any source, any key).
  direct  arp_ignore=1 and arp_announce=2 (all and --dev): the VIP on lo
          must never be answered or announced on the wire.
  always  the VIPs on lo (/32, /128); rp_filter=0 on all and on every
          tunnel device (the inner source is the client, whose route is not
          the tunnel); ip_forward untouched.

Check: `ip -s link show tunl0` counts decapsulated packets; a server bound
to the VIP must see the client's address and the VIP.
USAGE
}

vips=()
encaps="ipip,gue,gre,direct"
gue_port=6080
dev=""
down=0
dry=0

while [ $# -gt 0 ]; do
  case "$1" in
    --vip) vips+=("${2:?--vip needs an address}"); shift 2 ;;
    --encap) encaps="${2:?--encap needs a list}"; shift 2 ;;
    --gue-port) gue_port="${2:?--gue-port needs a port}"; shift 2 ;;
    --dev) dev="${2:?--dev needs an interface}"; shift 2 ;;
    --down) down=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "backend-setup.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "backend-setup.sh: $*" >&2; exit 1; }

[ ${#vips[@]} -gt 0 ] || die "no --vip given (see --help)"
[[ "$gue_port" =~ ^[0-9]+$ ]] && [ "$gue_port" -ge 1 ] && [ "$gue_port" -le 65535 ] || die "bad --gue-port $gue_port"

want_ipip=0 want_gue=0 want_gre=0 want_direct=0
IFS=',' read -r -a list <<<"$encaps"
for e in "${list[@]}"; do
  case "${e,,}" in
    ipip) want_ipip=1 ;;
    gue) want_gue=1; want_ipip=1 ;;
    gre) want_gre=1 ;;
    direct) want_direct=1 ;;
    *) die "unknown encapsulation '$e' (want ipip, gue, gre, direct)" ;;
  esac
done

for v in "${vips[@]}"; do
  case "$v" in
    */*) die "--vip $v: give an address, not a prefix" ;;
    *:*) ;;
    *.*.*.*) ;;
    *) die "--vip $v: not an IPv4 or IPv6 address" ;;
  esac
done

if [ "$dry" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  die "must run as root (or use --dry-run)"
fi

run() {
  if [ "$dry" -eq 1 ]; then
    echo "$*"
  else
    "$@"
  fi
}

# try: like run, but a failure (already present, already gone) is not fatal.
try() {
  if [ "$dry" -eq 1 ]; then
    echo "$*"
  else
    "$@" 2>/dev/null || true
  fi
}

# load MODULE [DEVICE]: modprobe MODULE unless DEVICE (its fallback device)
# exists already, e.g. because the module is built in.
load() {
  if [ -n "${2:-}" ] && [ "$dry" -eq 0 ] && ip link show dev "$2" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$dry" -eq 1 ]; then
    echo "modprobe $1"
    return 0
  fi
  command -v modprobe >/dev/null 2>&1 && modprobe "$1" 2>/dev/null ||
    die "cannot load kernel module $1 (a kernel without tunnel modules?): run 'xlb decap' instead"
}

sysctl_set() { run sysctl -q -w "$1=$2"; }

vip_prefix() {
  case "$1" in
    *:*) echo "$1/128" ;;
    *) echo "$1/32" ;;
  esac
}

tunnel_devs=()
[ "$want_ipip" -eq 1 ] && tunnel_devs+=(tunl0 sit0 ip6tnl0)
[ "$want_gre" -eq 1 ] && tunnel_devs+=(gre0 ip6gre0)

if [ "$down" -eq 1 ]; then
  for v in "${vips[@]}"; do
    try ip addr del "$(vip_prefix "$v")" dev lo
  done
  if [ "$want_gue" -eq 1 ]; then
    try ip fou del port "$gue_port"
    try ip -6 fou del port "$gue_port"
  fi
  for d in "${tunnel_devs[@]}"; do
    try ip link set "$d" down
  done
  exit 0
fi

if [ -z "$dev" ] && [ "$want_direct" -eq 1 ]; then
  dev=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')
  [ -n "$dev" ] || die "no IPv4 default route: give --dev"
fi

if [ "$want_ipip" -eq 1 ]; then
  load ipip tunl0
  load sit sit0
  load ip6_tunnel ip6tnl0
  # The fallback ip6tnl0 accepts only 6in6 until told otherwise.
  run ip -6 tunnel change ip6tnl0 mode any
fi
if [ "$want_gre" -eq 1 ]; then
  load ip_gre gre0
  load ip6_gre ip6gre0
fi
for d in "${tunnel_devs[@]}"; do
  run ip link set "$d" up
done

if [ "$want_gue" -eq 1 ]; then
  load fou
  # fou6 is a separate module on some kernels, built into fou on others.
  if [ "$dry" -eq 1 ]; then echo "modprobe fou6"; else modprobe fou6 2>/dev/null || true; fi
  try ip fou add port "$gue_port" gue
  try ip -6 fou add port "$gue_port" gue
fi

# Reverse-path filtering: the kernel applies max(all, dev).
sysctl_set net.ipv4.conf.all.rp_filter 0
for d in "${tunnel_devs[@]}"; do
  case "$d" in
    ip6tnl0|ip6gre0) ;; # IPv6 devices have no IPv4 rp_filter
    *) sysctl_set "net.ipv4.conf.$d.rp_filter" 0 ;;
  esac
done

if [ "$want_direct" -eq 1 ]; then
  for scope in all "$dev"; do
    sysctl_set "net.ipv4.conf.$scope.arp_ignore" 1
    sysctl_set "net.ipv4.conf.$scope.arp_announce" 2
  done
fi

for v in "${vips[@]}"; do
  case "$v" in
    # nodad: else an IPv6 address is tentative (a service cannot bind it)
    # until the kernel's duplicate address detection has run, even on lo.
    *:*) try ip addr add "$(vip_prefix "$v")" dev lo nodad ;;
    *) try ip addr add "$(vip_prefix "$v")" dev lo ;;
  esac
done

echo "backend-setup.sh: ready for ${encaps} on VIPs ${vips[*]}" >&2
