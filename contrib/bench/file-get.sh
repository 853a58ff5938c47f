#!/usr/bin/env bash
# Benchmark of `get` from the encrypted file store, whole process, against the floor any Swift
# program starts from and against git's own plaintext helper. One hyperfine run per round holds:
#   1. the feeder alone (contrib/bench/feed.c: it gives each command the request on stdin; its
#      median is subtracted from the others);
#   2. an empty Swift program built with `swiftc -O -static-stdlib` (the floor for any Swift program);
#   3. the same empty program linked as contrib/build-release.sh links portal-token (the C++
#      runtime linked in): the floor the release binary itself starts from;
#   4. git's own plaintext helper, `git credential-store get`;
#   5. `portal-token get --backend file`, the key cached in the kernel keyring;
#   6. `portal-token get` under `auto` with no D-Bus at all (the fallback a new user meets);
#   7. `portal-token token --backend file`, a Portal session in the file (inside its idle window,
#      so no request: the session's address is a port nothing listens on).
# Then a cold unlock (the key cache off, so Argon2id runs every time) in a run of its own, one by
# the TPM (swtpm, when installed), and, with valgrind, the instructions each program runs (no
# noise: what the time is made of).
# Every command answers the same request for one stored credential. hyperfine runs each command's
# runs one after the other, so a change in the machine's load between commands would show as a
# difference between them: the run is cut into many short rounds, and the ratios are taken within
# each round. Prints each round's medians, then the median and spread of each ratio over the
# rounds (goal: (5) and (7) at most 1.25 times (2)).
#
# Usage: contrib/bench/file-get.sh     (needs hyperfine, git, cc and python3; BENCH_ROUNDS=15 rounds
#                                       of BENCH_RUNS=60 runs each; valgrind for instruction counts)
set -euo pipefail
cd "$(dirname "$0")/../.."

source contrib/bench/lib.sh
binary=$(contrib/build-release.sh)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"

# The feeder, and the two empty Swift programs.
cc -O2 -static -o "$work/feed" contrib/bench/feed.c
bench_empty_swift "$work"

# Both helpers run in the same bare world: no user or system git config, no session bus.
export HOME=$work GIT_CONFIG_NOSYSTEM=1 XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
unset DBUS_SESSION_BUS_ADDRESS DISPLAY WAYLAND_DISPLAY PORTAL_TOKEN_PASSPHRASE PORTAL_TOKEN_BACKEND
bench_file_store "$work"
export PORTAL_AUTH_ENVIRONMENT_ID=bench-environment PORTAL_API_HOST=127.0.0.1:9

printf 'protocol=https\nhost=git.example.com\nusername=bench\npassword=%s\n\n' "$(head -c 30 /dev/urandom | base64)" >"$work/store-request"
printf 'protocol=https\nhost=git.example.com\n\n' >"$work/request"
git=$(command -v git)
git credential-store --file "$work/git-credentials" store <"$work/store-request"
"$binary" store --backend file <"$work/store-request"
session="bench-session-$RANDOM$RANDOM"
printf 'protocol=http\nhost=127.0.0.1:9\nusername=bench-user\npassword=%s\n\n' "$session" | "$binary" store --backend file
[ "$("$binary" token --backend file)" = "$session" ]
# Warm the key cache, and check both answer the same.
[ "$("$binary" get --backend file <"$work/request")" = "$(git credential-store --file "$work/git-credentials" get <"$work/request")" ]
[ "$("$binary" get <"$work/request" 2>/dev/null)" = "$("$binary" get --backend file <"$work/request")" ]

feed() { printf '%s %s' "$work/feed" "$work/request"; }
(cd "$work" && bench_rounds 10 60 \
    --command-name "feeder alone" "$(feed)" \
    --command-name "empty Swift program (swiftc -static-stdlib)" "$(feed) $work/empty-swift" \
    --command-name "empty Swift program, release link" "$(feed) $work/empty-swift-release-link" \
    --command-name "git credential-store get (plaintext)" \
    "$(feed) $git credential-store --file $work/git-credentials get" \
    --command-name "portal-token get, file, key cached" "$(feed) $binary get --backend file" \
    --command-name "portal-token get, auto without D-Bus" "$(feed) $binary get" \
    --command-name "portal-token token, file, session cached" "$(feed) $binary token --backend file") >&2
hyperfine -N --style none --warmup 2 --runs 20 --export-csv "$work/cold.csv" \
    --command-name "feeder alone" "$(feed)" \
    --command-name "portal-token get, file, cold unlock" \
    "$(feed) /usr/bin/env PORTAL_TOKEN_KEY_CACHE_TIMEOUT=0 $binary get --backend file" >&2

# A cold unlock by the TPM (the key cache off and no passphrase source: the TPM unseals the key
# every run), on swtpm: a software TPM, which answers faster than a hardware one.
tpm_line=""
if command -v swtpm >/dev/null; then
    mkdir -p "$work/tpm"
    swtpm socket --tpm2 --tpmstate dir="$work/tpm" --server type=unixio,path="$work/tpm/sock" \
        --ctrl type=unixio,path="$work/tpm/sock.ctrl" --flags not-need-init,startup-clear &
    tpm=$!
    trap 'kill $tpm 2>/dev/null; rm -rf "$work"' EXIT
    for _ in $(seq 100); do [ -S "$work/tpm/sock.ctrl" ] && break; sleep 0.05; done
    sealed=(PORTAL_TOKEN_FILE="$work/sealed-store" PORTAL_TOKEN_FILE_TPM=on TPM2TOOLS_TCTI="swtpm:path=$work/tpm/sock")
    env "${sealed[@]}" "$binary" store --backend file <"$work/store-request"
    hyperfine -N --style none --warmup 2 --runs 20 --export-csv "$work/tpm.csv" \
        --command-name "feeder alone" "$(feed)" \
        --command-name "portal-token get, file, cold unlock by the TPM" \
        "$(feed) /usr/bin/env -u PORTAL_TOKEN_PASSPHRASE_FILE PORTAL_TOKEN_KEY_CACHE_TIMEOUT=0 ${sealed[*]} $binary get --backend file" >&2
    tpm_line=$work/tpm.csv
fi

bench_python "$work" "$rounds" "$tpm_line" <<'PY'
import sys
from rounds import medians, print_medians, print_spreads, read_rounds
work, rounds = sys.argv[1], int(sys.argv[2])
empty, floor = "empty Swift program (swiftc -static-stdlib)", "empty Swift program, release link"
git, file, auto = "git credential-store get (plaintext)", "portal-token get, file, key cached", \
    "portal-token get, auto without D-Bus"
token = "portal-token token, file, session cached"
every, times = read_rounds(rounds, work, less="feeder alone", less_label="the feeder")
ratios = {"file / empty Swift": [], "token / empty Swift": [], "auto / empty Swift": [], "file / git": [],
          "file / release-linked empty": []}
for m in every:
    ratios["file / empty Swift"].append(m[file] / m[empty])
    ratios["token / empty Swift"].append(m[token] / m[empty])
    ratios["auto / empty Swift"].append(m[auto] / m[empty])
    ratios["file / git"].append(m[file] / m[git])
    ratios["file / release-linked empty"].append(m[file] / m[floor])
print_medians(times, 48, f"medians over {rounds} rounds, less the feeder:")
print_spreads(ratios, 30, f"ratios over {rounds} rounds: median (min-max)")
print("  goal: file / empty Swift and token / empty Swift <= 1.25")
cold = medians(f"{work}/cold.csv")
print(f"cold unlock (Argon2id, 64 MiB): {cold['portal-token get, file, cold unlock'] - cold['feeder alone']:.1f} ms"
      " (goal <= 250 ms)")
if len(sys.argv) > 3 and sys.argv[3]:
    tpm = medians(sys.argv[3])
    print(f"cold unlock by the TPM (swtpm): "
          f"{tpm['portal-token get, file, cold unlock by the TPM'] - tpm['feeder alone']:.1f} ms (goal <= 500 ms)")
PY

# Instructions, from valgrind: the same every run, whatever else the machine is doing.
if command -v valgrind >/dev/null; then
    count() {
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" <"$work/request" 2>&1 >/dev/null |
            sed -n 's/.*Collected : //p'
    }
    echo "instructions (valgrind):"
    printf '  %-48s %10s\n' "empty Swift program (swiftc -static-stdlib)" "$(count "$work/empty-swift")"
    printf '  %-48s %10s\n' "empty Swift program, release link" "$(count "$work/empty-swift-release-link")"
    printf '  %-48s %10s\n' "git credential-store get" "$(count "$git" credential-store --file "$work/git-credentials" get)"
    printf '  %-48s %10s\n' "portal-token get, file, key cached" "$(count "$binary" get --backend file)"
    printf '  %-48s %10s\n' "portal-token token, file, session cached" "$(count "$binary" token --backend file)"
fi
