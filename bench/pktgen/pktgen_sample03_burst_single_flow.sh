#!/bin/bash
# Burst, single flow: every thread sends the same flow in bursts of BURST
# (xmit_more; -b 0 disables), as fast as it can. No randomness, so the
# target sees one flow: this overloads a single CPU there.
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
[ -z "$BURST" ] && BURST=32
[ -z "$CLONE_SKB" ] && CLONE_SKB="0" # No need for clones when bursting
[ -z "$COUNT" ] && COUNT="0"         # Zero means indefinitely

trap_exit

if [ "$BACKEND" == "afxdp" ]; then
    trap true SIGINT
    xlb_pktgen --threads "$THREADS" --first-thread "$F_THREAD" --batch "$(( BURST > 0 ? BURST : 1 ))"
    exit $?
fi

[ -z "$APPEND" ] && pg_ctrl "reset"
for ((thread = F_THREAD; thread <= L_THREAD; thread++)); do
    dev=${DEV}@${thread}
    pg_device_base $thread "$dev"
    pg_set "$dev" "burst $BURST"
done

pg_run_and_report
