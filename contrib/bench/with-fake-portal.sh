# Sourced by the benchmarks against the loopback fake Portal server (contrib/bench/fake-portal.sh
# starts it, inside the private keyring): builds the release binary and the fake server, and
# exports PORTAL_TOKEN_BIN, FAKE_SERVER and BENCH_SCRIPTS (this directory). Then
# `bench_in_keyring SCRIPT` runs the bash SCRIPT in place of the benchmark, inside a private
# gnome-keyring (contrib/dev/run-in-keyring.sh), in its working directory $BENCH_WORK, with
# `set -euo pipefail` and lib.sh's functions.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
contrib/deps.sh test
PORTAL_TOKEN_BIN=$(contrib/build-release.sh 2>/dev/null)
FAKE_SERVER=$(contrib/build-release.sh --product portal-fake-server 2>/dev/null)
BENCH_SCRIPTS=$root/contrib/bench
export PORTAL_TOKEN_BIN FAKE_SERVER BENCH_SCRIPTS

bench_in_keyring() {
    exec contrib/dev/run-in-keyring.sh bash -c "set -euo pipefail
cd \"\$BENCH_WORK\"
. \"\$BENCH_SCRIPTS/lib.sh\"
$1"
}
