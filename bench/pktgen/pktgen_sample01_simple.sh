#!/bin/bash
# Simple example: one thread (thread 0 / TX queue 0) sends COUNT UDP
# packets to DEST_IP, source port random in 9..109, then prints the result.
#
# Kernel backend: device $DEV on kpktgend_0. AF_XDP backend: `xlb pktgen`
# on queue 0 of $DEV.
basedir=$(dirname "$0")
source "${basedir}/functions.sh"
ARGS=("$@")
source "${basedir}/parameters.sh"
root_check_run_with_sudo "${ARGS[@]}"

# This sample needs the destination MAC.
[ -z "$DST_MAC" ] && usage && err 2 "Must specify -m dst MAC"

if [ -z "$DEST_IP" ]; then
    [ -z "$IP6" ] && DEST_IP="198.18.0.42" || DEST_IP="FD00::1"
fi
[ -z "$COUNT" ] && COUNT="100000" # Zero means indefinitely
[ -z "$CLONE_SKB" ] && CLONE_SKB="0"
UDP_SRC_MIN=9
UDP_SRC_MAX=109

trap_exit

if [ "$BACKEND" == "afxdp" ]; then
    trap true SIGINT # Ctrl-C stops xlb pktgen, which still prints its result
    xlb_pktgen --src-port "$UDP_SRC_MIN-$UDP_SRC_MAX" --threads 1 --first-thread 0
    exit $?
fi

[ -z "$APPEND" ] && pg_ctrl "reset"
thread=0
pg_thread $thread "rem_device_all"
pg_thread $thread "add_device" "$DEV"
pg_set "$DEV" "count $COUNT"
pg_set "$DEV" "clone_skb $CLONE_SKB"
pg_set "$DEV" "pkt_size $PKT_SIZE"
pg_set "$DEV" "delay $DELAY"
pg_set "$DEV" "flag NO_TIMESTAMP"
[ -n "$UDP_CSUM" ] && pg_set "$DEV" "flag UDPCSUM"
pg_set "$DEV" "dst_mac $DST_MAC"
pg_set "$DEV" "dst${IP6} $DEST_IP"
if [ -n "$DST_PORT" ]; then
    pg_set "$DEV" "flag UDPDST_RND"
    pg_set "$DEV" "udp_dst_min $UDP_DST_MIN"
    pg_set "$DEV" "udp_dst_max $UDP_DST_MAX"
fi
pg_set "$DEV" "flag UDPSRC_RND"
pg_set "$DEV" "udp_src_min $UDP_SRC_MIN"
pg_set "$DEV" "udp_src_max $UDP_SRC_MAX"

if [ -z "$APPEND" ]; then
    echo "Running... ctrl^C to stop" >&2
    trap true SIGINT
    pg_ctrl "start"
    echo "Done" >&2
    echo "Result device: $DEV"
    cat "$PROC_DIR/$DEV"
else
    echo "Append mode: config done. Do more or use 'pg_ctrl start' to run"
fi
