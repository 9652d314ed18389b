#!/bin/bash
# One flow per thread: thread t sends from 198.18.(t+1).1 only, so each
# thread's traffic is one flow ("silo'ing": on the target every flow may
# land on its own CPU). Bursts of BURST.
#
# AF_XDP backend: one `xlb pktgen` per thread, side by side.
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
[ -z "$BURST" ] && BURST=32
[ -z "$COUNT" ] && COUNT="0" # Zero means indefinitely

thread_src() {
    if [ -z "$IP6" ]; then echo "198.18.$(($1 + 1)).1"; else echo "fd00:198:18:$(($1 + 1))::1"; fi
}

trap_exit

if [ "$BACKEND" == "afxdp" ]; then
    trap true SIGINT
    out=$(mktemp -d)
    pids=()
    for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
        xlb_pktgen --src "$(thread_src $thread)" --threads 1 --first-thread "$thread" \
            --batch "$(( BURST > 0 ? BURST : 1 ))" > "$out/$thread" &
        pids+=($!)
    done
    rc=0
    for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
    for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do cat "$out/$thread"; done
    rm -rf "$out"
    exit $rc
fi

[ -n "$IP6" ] && err 1 "IPv6 sources are not supported by the kernel backend of this sample"
[ -z "$APPEND" ] && pg_ctrl "reset"
for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
    dev=${DEV}@${thread}
    pg_device_base $thread "$dev"
    pg_set "$dev" "src_min $(thread_src $thread)"
    pg_set "$dev" "src_max $(thread_src $thread)"
    pg_set "$dev" "burst $BURST"
done

pg_run_and_report
