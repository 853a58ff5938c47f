#!/usr/bin/env bash
# What a `dh-ietf1024-sha256-aes128-cbc-pkcs7` transfer session costs the keyring daemon against a
# `plain` one (docs/storage.md, "The transfer session: `plain`"): inside a private gnome-keyring,
# BENCH_CALLS `Service.OpenSession` calls of each kind through busctl, one round each,
# and the CPU time gnome-keyring-daemon spent on them (utime + stime from /proc, in clock ticks),
# which the machine's load does not change the way it changes wall-clock time. The client offers
# a random 1024-bit public value, as libsecret does; the daemon generates its key pair and derives
# the shared key, the work it does for every libsecret client that reads a secret.
# Usage: contrib/bench/transfer-session.sh   (needs busctl, from systemd)
set -euo pipefail
cd "$(dirname "$0")/../.."
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    daemon=$(pgrep -n -x gnome-keyring-d)
    calls=${BENCH_CALLS:-200}
    tick_ms=$((1000 / $(getconf CLK_TCK)))
    key=$(python3 -c "import os; b = bytes([0x7f]) + os.urandom(127); print(\"128 \" + \" \".join(map(str, b)))")
    cpu() { awk "{print \$14 + \$15}" "/proc/$daemon/stat"; }
    open_session() {
        if [ "$1" = plain ]; then set -- sv plain s ""; else set -- sv dh-ietf1024-sha256-aes128-cbc-pkcs7 ay $key; fi
        busctl --user call org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service \
            OpenSession "$@" >/dev/null
    }
    for kind in plain dh; do
        before=$(cpu)
        for _ in $(seq "$calls"); do open_session "$kind"; done
        after=$(cpu)
        spent=$(( (after - before) * tick_ms ))
        echo "$kind: gnome-keyring-daemon spent $spent ms of CPU on $calls OpenSession calls" \
            "($(python3 -c "print(f\"{$spent / $calls:.2f}\")") ms each)"
    done
'
