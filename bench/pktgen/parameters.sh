#!/bin/bash
# Command-line parsing shared by the pktgen sample scripts: the kernel
# samples' flags (getopts "s:i:d:m:p:f:t:c:n:b:w:vxh6ak"), variables,
# defaults and exit codes. Sourced after functions.sh.

usage() {
    cat <<USAGE

Usage: $0 [-vx] -i ethX
  -i : (\$DEV)       output interface/device (required)
  -s : (\$PKT_SIZE)  packet size (without the 4-byte FCS the NIC adds)
  -d : (\$DEST_IP)   destination IP. CIDR (e.g. 198.18.0.0/15) is also allowed
  -m : (\$DST_MAC)   destination MAC-addr
  -p : (\$DST_PORT)  destination PORT range (e.g. 433-444) is also allowed
  -t : (\$THREADS)   threads to start
  -f : (\$F_THREAD)  index of first thread (zero indexed CPU number)
  -c : (\$SKB_CLONE) SKB clones send before alloc new SKB
  -n : (\$COUNT)     num messages to send per thread, 0 means indefinitely
  -b : (\$BURST)     HW level bursting of SKBs
  -w : (\$DELAY)     Tx Delay value (ns)
  -v : (\$VERBOSE)   verbose
  -x : (\$DEBUG)     debug
  -6 : (\$IP6)       IPv6
  -a : (\$APPEND)    Script will not reset generator's state, but will append its config
  -k : (\$UDP_CSUM)  enable UDP tx checksum

Backend: PKTGEN_BACKEND=kernel|afxdp (default: kernel if /proc/net/pktgen exists, else
\`xlb pktgen\` on AF_XDP); XLB=/path/to/xlb.
USAGE
}

while getopts "s:i:d:m:p:f:t:c:n:b:w:vxh6ak" option; do
    case $option in
    i) export DEV=$OPTARG; info "Output device set to: DEV=$DEV" ;;
    s) export PKT_SIZE=$OPTARG; info "Packet size set to: PKT_SIZE=$PKT_SIZE bytes" ;;
    d) export DEST_IP=$OPTARG; info "Destination IP set to: DEST_IP=$DEST_IP" ;;
    m) export DST_MAC=$OPTARG; info "Destination MAC set to: DST_MAC=$DST_MAC" ;;
    p) export DST_PORT=$OPTARG; info "Destination PORT set to: DST_PORT=$DST_PORT" ;;
    f) export F_THREAD=$OPTARG; info "Index of first thread (zero indexed CPU number): $F_THREAD" ;;
    t) export THREADS=$OPTARG; info "Number of threads to start: $THREADS" ;;
    c) export CLONE_SKB=$OPTARG; info "CLONE_SKB=$CLONE_SKB" ;;
    n) export COUNT=$OPTARG; info "COUNT=$COUNT" ;;
    b) export BURST=$OPTARG; info "SKB bursting: BURST=$BURST" ;;
    w) export DELAY=$OPTARG; info "DELAY=$DELAY" ;;
    v) export VERBOSE=yes; info "Verbose mode: VERBOSE=$VERBOSE" ;;
    x) export DEBUG=yes; info "Debug mode: DEBUG=$DEBUG" ;;
    6) export IP6=6; info "IP6: IP6=$IP6" ;;
    a) export APPEND=yes; info "Append mode: APPEND=$APPEND" ;;
    k) export UDP_CSUM=yes; info "UDP tx checksum: UDP_CSUM=$UDP_CSUM" ;;
    h | ?) usage; err 2 "[ERROR] Unknown parameters!!!" ;;
    esac
done
shift $((OPTIND - 1))

if [ -z "$PKT_SIZE" ]; then
    # NIC adds 4 bytes CRC
    export PKT_SIZE=60
    info "Default packet size set to: set to $PKT_SIZE bytes"
fi

if [ -z "$F_THREAD" ]; then
    # First thread (F_THREAD) reference the zero indexed CPU number
    export F_THREAD=0
fi

if [ -z "$THREADS" ]; then
    export THREADS=1
fi

# default DELAY
[ -z "$DELAY" ] && export DELAY=0 # Zero means max speed

export L_THREAD=$((THREADS + F_THREAD - 1))

if [ -z "$DEV" ]; then
    usage
    err 2 "Please specify output device"
fi

if [ -z "$DST_MAC" ]; then
    warn "Missing destination MAC address"
fi

if [ -z "$DEST_IP" ]; then
    warn "Missing destination IP address"
fi

for v in PKT_SIZE F_THREAD THREADS DELAY; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || err 5 "Invalid number: $v=${!v}"
done
for v in COUNT BURST CLONE_SKB; do
    [[ -z "${!v}" || "${!v}" =~ ^[0-9]+$ ]] || err 5 "Invalid number: $v=${!v}"
done

if [ -n "$DEST_IP" ]; then
    validate_addr${IP6} "$DEST_IP"
    read -r DST_MIN DST_MAX <<< "$(parse_addr${IP6} "$DEST_IP")"
fi

if [ -n "$DST_PORT" ]; then
    read -r UDP_DST_MIN UDP_DST_MAX <<< "$(parse_ports "$DST_PORT")"
    validate_ports "$UDP_DST_MIN" "$UDP_DST_MAX"
fi

[ -d /sys/class/net/"$DEV" ] || err 3 "Device $DEV does not exist"

select_backend
