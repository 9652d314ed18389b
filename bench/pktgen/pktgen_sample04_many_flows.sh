#!/bin/bash
# Many flows: source addresses from 198.18.0.0/15, FLOWS flows of FLOWLEN
# packets each, sent in turn (pktgen's flows/flowlen with FLOW_SEQ). This
# is the conntrack and Maglev benchmark's load. Bursting is refused.
#
# AF_XDP backend: flow i is the i-th tuple of the ranges (source address
# varying fastest), so FLOWS flows are FLOWS distinct tuples; the kernel
# draws each flow's source at random within the range.
basedir=$(dirname "$0")
source "${basedir}/functions.sh"
ARGS=("$@")
source "${basedir}/parameters.sh"
root_check_run_with_sudo "${ARGS[@]}"

if [ -z "$DEST_IP" ]; then
    [ -z "$IP6" ] && DEST_IP="198.18.0.42" || DEST_IP="FD00::1"
fi
dest_range
[ -z "$DST_MAC" ] && DST_MAC="90:e2:ba:ff:ff:ff"
[ -z "$CLONE_SKB" ] && CLONE_SKB="0"
[ -z "$COUNT" ] && COUNT="0" # Zero means indefinitely
[ -n "$BURST" ] && err 1 "Bursting not supported for this mode"

# Source addresses, and the flow variation.
[ -z "$IP6" ] && SRC_RANGE="198.18.0.0/15" || SRC_RANGE="fd00:198:18::/112"
read -r SRC_MIN SRC_MAX <<< "$(parse_addr${IP6} "$SRC_RANGE")"
FLOWS=${FLOWS:-8000} # 65535 at most
FLOWLEN=${FLOWLEN:-10}
(( FLOWS >= 1 && FLOWS <= 65535 )) || err 5 "Invalid FLOWS=$FLOWS: want 1-65535"

trap_exit

if [ "$BACKEND" == "afxdp" ]; then
    trap true SIGINT
    xlb_pktgen --src "$SRC_RANGE" --flows "$FLOWS" --flowlen "$FLOWLEN" --threads "$THREADS" --first-thread "$F_THREAD"
    exit $?
fi

[ -n "$IP6" ] && err 1 "IPv6 source ranges are not supported by the kernel backend of this sample"
[ -z "$APPEND" ] && pg_ctrl "reset"
for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
    dev=${DEV}@${thread}
    pg_device_base $thread "$dev"
    pg_set "$dev" "flag IPSRC_RND"
    pg_set "$dev" "src_min $SRC_MIN"
    pg_set "$dev" "src_max $SRC_MAX"
    pg_set "$dev" "flows $FLOWS"
    pg_set "$dev" "flowlen $FLOWLEN"
    pg_set "$dev" "flag FLOW_SEQ"
done

pg_run_and_report
