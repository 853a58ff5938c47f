# Sourced by the benchmarks, for what they share:
#   bench_file_store DIR                   points portal-token at an encrypted file store in DIR
#                                          (DIR/store), with a fresh passphrase in DIR/passphrase
#                                          and the key cached for 10 minutes
#   bench_empty_swift DIR                  builds the floor every Swift program starts from: an
#                                          empty program with `swiftc -O -static-stdlib` (DIR/empty-swift)
#                                          and the same linked as contrib/build-release.sh links
#                                          portal-token (DIR/empty-swift-release-link; after that script ran)
#   bench_rounds WARMUP RUNS ARGUMENT...   `rounds` hyperfine runs (BENCH_ROUNDS, default the
#                                          `rounds` already set, else 15) of the commands the
#                                          hyperfine ARGUMENTs name, each of RUNS runs (BENCH_RUNS
#                                          when set), exporting round-N.csv in the current directory
#   bench_python ARGUMENT...               python3 on the script on stdin, which can
#                                          `from rounds import ...` (contrib/bench/rounds.py)
# hyperfine runs each command's runs one after the other, so a change in the machine's load
# between commands would show as a difference between them; within a short round it cannot, so
# the benchmarks cut their run into rounds and take each ratio within a round.
bench_directory=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rounds=${BENCH_ROUNDS:-${rounds:-15}}

bench_file_store() {
    export PORTAL_TOKEN_FILE=$1/store PORTAL_TOKEN_PASSPHRASE_FILE=$1/passphrase
    export PORTAL_TOKEN_KEY_CACHE_TIMEOUT=600
    (umask 077 && printf 'bench passphrase %s\n' "$RANDOM$RANDOM" >"$1/passphrase")
}

bench_empty_swift() {
    : >"$1/empty.swift"
    swiftc -O -static-stdlib "$1/empty.swift" -o "$1/empty-swift"
    swiftc -O -static-stdlib "$1/empty.swift" -o "$1/empty-swift-release-link" \
        -Xclang-linker -fuse-ld=lld -Xclang-linker -L"$bench_directory/../../.build/release-static-libs" \
        -Xclang-linker -static-libgcc
}

bench_rounds() {
    local warmup=$1 runs=$2 round
    shift 2
    for round in $(seq "$rounds"); do
        hyperfine -N --style none --warmup "$warmup" --runs "${BENCH_RUNS:-$runs}" \
            --export-csv "round-$round.csv" "$@"
    done
}

bench_python() {
    PYTHONPATH=$bench_directory${PYTHONPATH:+:$PYTHONPATH} python3 - "$@"
}
