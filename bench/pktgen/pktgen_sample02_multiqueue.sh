#!/bin/bash
# Multiqueue: one thread per CPU F_THREAD..L_THREAD, each on its own TX
# queue (queue = CPU), UDP source port random in 9..109.
basedir=$(dirname "$0")
source "${basedir}/functions.sh"
ARGS=("$@")
source "${basedir}/parameters.sh"
root_check_run_with_sudo "${ARGS[@]}"

[ -z "$COUNT" ] && COUNT="100000" # Zero means indefinitely
[ -z "$CLONE_SKB" ] && CLONE_SKB="0"
if [ -z "$DEST_IP" ]; then
    [ -z "$IP6" ] && DEST_IP="198.18.0.42" || DEST_IP="FD00::1"
fi
dest_range
[ -z "$DST_MAC" ] && DST_MAC="90:e2:ba:ff:ff:ff"
[ -z "$BURST" ] && BURST=1
UDP_SRC_MIN=9
UDP_SRC_MAX=109

trap_exit

if [ "$BACKEND" == "afxdp" ]; then
    trap true SIGINT
    xlb_pktgen --src-port "$UDP_SRC_MIN-$UDP_SRC_MAX" --threads "$THREADS" --first-thread "$F_THREAD" --batch "$(( BURST > 0 ? BURST : 1 ))"
    exit $?
fi

[ -z "$APPEND" ] && pg_ctrl "reset"
for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
    dev=${DEV}@${thread}
    pg_device_base $thread "$dev"
    pg_set "$dev" "burst $BURST"
    pg_set "$dev" "flag UDPSRC_RND"
    pg_set "$dev" "udp_src_min $UDP_SRC_MIN"
    pg_set "$dev" "udp_src_max $UDP_SRC_MAX"
done

if [ -z "$APPEND" ]; then
    echo "Running... ctrl^C to stop" >&2
    trap true SIGINT
    pg_ctrl "start"
    echo "Done" >&2
    for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
        dev=${DEV}@${thread}
        echo "Device: $dev"
        grep -A2 "Result:" "$PROC_DIR/$dev"
    done
else
    echo "Append mode: config done. Do more or use 'pg_ctrl start' to run"
fi
