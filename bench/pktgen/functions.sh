#!/bin/bash
# Helpers for xlb's pktgen sample scripts. Written for xlb from the kernel
# samples' documented contract (samples/pktgen, see bench/README.md): the
# same helper names, message prefixes and exit codes, plus a second
# backend for kernels without CONFIG_NET_PKTGEN.
#
# Backends: "kernel" writes /proc/net/pktgen; "afxdp" runs `xlb pktgen`.
# PKTGEN_BACKEND=kernel|afxdp forces one; otherwise kernel when
# /proc/net/pktgen exists (or `modprobe pktgen` creates it), else afxdp.
# XLB names the xlb binary (default: xlb found in PATH).
#
# Exit codes: 1 mode error (scripts), 2 usage, 3 missing proc file,
# device or tool, 4 not root, 5 invalid value or failed write.

# -- messages: errors always, warnings always, info only with -v --
err() {
    local code=$1
    shift
    echo "ERROR: $*" >&2
    exit "$code"
}

warn() {
    echo "WARN : $*" >&2
}

info() {
    [[ -n "$VERBOSE" ]] && echo "INFO : $*" >&2
    return 0
}

# -- the kernel backend: /proc/net/pktgen --
# PKTGEN_PROC_DIR points the kernel backend elsewhere (the tests use a
# directory of plain files to record what the scripts write).
PROC_DIR=${PKTGEN_PROC_DIR:-/proc/net/pktgen}

# proc_cmd FILE WORDS...: write WORDS to $PROC_DIR/FILE; show pktgen's
# complaint when the device file does not answer "Result: OK:".
proc_cmd() {
    local file=$PROC_DIR/$1
    shift
    [[ -e "$file" ]] || err 3 "proc file:$file does not exists (dev added to thread?)"
    [[ -w "$file" ]] || err 4 "proc file:$file not writable, not root?!"
    [[ "$DEBUG" == "yes" ]] && echo "cmd: $* > $file"
    local rc=0
    echo "$*" > "$file" || rc=$?
    if [[ "${file##*/}" != "pgctrl" ]] && ! grep -q "Result: OK:" "$file"; then
        grep "Result:" "$file" >&2
    fi
    (( rc == 0 )) || err 5 "Write error($rc) occurred cmd: \"$* > $file\""
}

pg_ctrl()   { proc_cmd pgctrl "$@"; }                     # start | stop | reset
pg_thread() { local t=$1; shift; proc_cmd "kpktgend_$t" "$@"; } # per kernel thread
pg_set()    { local d=$1; shift; proc_cmd "$d" "$@"; }    # per pktgen device

# Unless appending, the kernel generator is reset when the script ends.
trap_exit() {
    if [[ -z "$APPEND" && "$BACKEND" == "kernel" && $EUID -eq 0 ]]; then
        trap 'pg_ctrl reset' EXIT
    fi
}

# Re-run the script under sudo (keeping the environment) when not root.
root_check_run_with_sudo() {
    (( EUID == 0 )) && return 0
    if [[ -x "$0" ]] && command -v sudo >/dev/null; then
        info "Not root, running with sudo"
        sudo -E "$0" "$@"
        exit $?
    fi
    err 4 "cannot perform sudo run of $0"
}

# -- addresses and ports --

# validate_addr ADDR[/LEN]: an IPv4 address or CIDR block, else exit 5.
validate_addr() {
    local ip=${1%/*} octet
    if [[ "$1" == */* ]]; then
        local len=${1#*/}
        [[ "$len" =~ ^[0-9]+$ ]] && (( len <= 32 )) || err 5 "Invalid IPv4 prefix length: $1"
    fi
    [[ "$ip" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || err 5 "Invalid IPv4 address: $1"
    for octet in ${ip//./ }; do
        (( 10#$octet <= 255 )) || err 5 "Invalid IPv4 address: $1"
    done
}

# parse_addr ADDR[/LEN]: print "first last" of the block (network and
# broadcast included).
parse_addr() {
    validate_addr "$1"
    local ip=${1%/*} len=32 a b c d
    [[ "$1" == */* ]] && len=${1#*/}
    IFS=. read -r a b c d <<< "$ip"
    local n=$(( (10#$a << 24) | (10#$b << 16) | (10#$c << 8) | 10#$d ))
    local mask=$(( len == 0 ? 0 : (0xffffffff << (32 - len)) & 0xffffffff ))
    local lo=$(( n & mask )) hi=$(( (n & mask) | (~mask & 0xffffffff) ))
    printf '%d.%d.%d.%d %d.%d.%d.%d\n' \
        $((lo >> 24 & 255)) $((lo >> 16 & 255)) $((lo >> 8 & 255)) $((lo & 255)) \
        $((hi >> 24 & 255)) $((hi >> 16 & 255)) $((hi >> 8 & 255)) $((hi & 255))
}

# IPv6 arithmetic is left to python3's ipaddress module.
validate_addr6() {
    python3 -c 'import ipaddress, sys
a = sys.argv[1]
ipaddress.IPv6Network(a, strict=False) if "/" in a else ipaddress.IPv6Address(a)' "$1" 2>/dev/null \
        || err 5 "Invalid IPv6 address: $1"
}

parse_addr6() {
    validate_addr6 "$1"
    python3 -c 'import ipaddress, sys
n = ipaddress.IPv6Network(sys.argv[1], strict=False)
print(n[0], n[-1])' "$1"
}

# dest_range: DST_MIN and DST_MAX from DEST_IP (after a sample's default).
dest_range() {
    validate_addr${IP6} "$DEST_IP"
    read -r DST_MIN DST_MAX <<< "$(parse_addr${IP6} "$DEST_IP")"
}

# parse_ports N|MIN-MAX: print "min max".
parse_ports() {
    local lo=${1%%-*} hi=${1#*-}
    echo "$lo $hi"
}

# validate_ports MIN MAX: 1 <= MIN <= MAX <= 65535, else exit 5.
validate_ports() {
    if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $2 <= 65535 && $1 <= $2 )); then
        return 0
    fi
    err 5 "Invalid port(s): $1-$2"
}

# -- backend selection and the AF_XDP backend --

select_backend() {
    case "$PKTGEN_BACKEND" in
    kernel | afxdp) BACKEND=$PKTGEN_BACKEND ;;
    "")
        [[ -d $PROC_DIR ]] || modprobe pktgen 2>/dev/null
        if [[ -d $PROC_DIR ]]; then BACKEND=kernel; else BACKEND=afxdp; fi
        ;;
    *) err 2 "PKTGEN_BACKEND=$PKTGEN_BACKEND: want kernel or afxdp" ;;
    esac
    if [[ "$BACKEND" == "kernel" && ! -d $PROC_DIR ]]; then
        err 3 "$PROC_DIR does not exist (no pktgen module?); try PKTGEN_BACKEND=afxdp"
    fi
    if [[ "$BACKEND" == "afxdp" ]]; then
        XLB=${XLB:-$(command -v xlb)}
        [[ -n "$XLB" && -x "$XLB" ]] || err 3 "xlb binary not found: set XLB=/path/to/xlb or put xlb in PATH"
        [[ -n "$APPEND" ]] && err 1 "Append mode (-a) needs the kernel backend: xlb pktgen keeps no configuration between runs"
    fi
    info "Backend: $BACKEND"
}

# xlb_pktgen ARGS...: run `xlb pktgen` with the settings every sample
# shares, then the sample's own ARGS. Prints pktgen's Device/Result lines.
xlb_pktgen() {
    local args=(pktgen --dev "$DEV" --size "$PKT_SIZE" --count "$COUNT")
    [[ -n "$DST_MAC" ]] && args+=(--dst-mac "$DST_MAC")
    [[ -n "$DEST_IP" ]] && args+=(--dst "$DEST_IP")
    [[ -n "$DST_PORT" ]] && args+=(--dst-port "$DST_PORT")
    [[ -n "$UDP_CSUM" ]] && args+=(--udp-csum)
    (( ${DELAY:-0} > 0 )) && args+=(--delay "$DELAY")
    [[ -n "$CLONE_SKB" && "$CLONE_SKB" != 0 ]] && info "clone_skb $CLONE_SKB means nothing to AF_XDP (ignored)"
    args+=("$@")
    [[ "$DEBUG" == "yes" ]] && echo "cmd: $XLB ${args[*]}"
    "$XLB" "${args[@]}"
}

# pg_device_base THREAD DEV: what every multi-thread sample sets on its
# device: bind DEV to kernel thread THREAD (queue = CPU), then count, clone,
# size, delay, no timestamp, UDP checksum (-k), destination MAC and address
# range, and the destination port range (-p).
pg_device_base() {
    local thread=$1 dev=$2
    pg_thread $thread "rem_device_all"
    pg_thread $thread "add_device" "$dev"
    pg_set "$dev" "flag QUEUE_MAP_CPU"
    pg_set "$dev" "count $COUNT"
    pg_set "$dev" "clone_skb $CLONE_SKB"
    pg_set "$dev" "pkt_size $PKT_SIZE"
    pg_set "$dev" "delay $DELAY"
    pg_set "$dev" "flag NO_TIMESTAMP"
    [ -n "$UDP_CSUM" ] && pg_set "$dev" "flag UDPCSUM"
    pg_set "$dev" "dst_mac $DST_MAC"
    pg_set "$dev" "dst${IP6}_min $DST_MIN"
    pg_set "$dev" "dst${IP6}_max $DST_MAX"
    if [ -n "$DST_PORT" ]; then
        pg_set "$dev" "flag UDPDST_RND"
        pg_set "$dev" "udp_dst_min $UDP_DST_MIN"
        pg_set "$dev" "udp_dst_max $UDP_DST_MAX"
    fi
}

# pg_run_and_report: start the configured threads (Ctrl-C stops them and
# the results are still printed) and print each device's Result lines; in
# append mode (-a) only say the configuration is in place.
pg_run_and_report() {
    if [ -z "$APPEND" ]; then
        echo "Running... ctrl^C to stop" >&2
        trap true SIGINT
        pg_ctrl "start"
        local thread dev
        for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
            dev=${DEV}@${thread}
            echo "Device: $dev"
            grep -A2 "Result:" "$PROC_DIR/$dev"
        done
    else
        echo "Append mode: config done. Do more or use 'pg_ctrl start' to run"
    fi
}
