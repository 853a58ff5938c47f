#!/usr/bin/env bash
# Builds the release binary the way it is installed and measured, and prints its path:
#   - the Swift standard library linked in (--static-swift-stdlib): start-up without loading it;
#   - linked by lld, with relative relocations packed (-z pack-relative-relocs), identical code
#     folded, unused sections dropped and no symbol exported: less for the loader to touch;
#   - no NEEDED entry for a library no symbol is taken from (--as-needed, see
#     contrib/release/link-as-needed.cfg): libsystemd, loaded with dlopen, is not mapped at start;
#   - functions ordered by contrib/release/link-order/portal-token.order, so the code that `get` runs
#     sits together and the kernel maps a few hundred kilobytes of the binary instead of most of
#     it. A stale order file costs only that gain, never correctness;
#   - the C++ runtime the Swift runtime needs linked in too (libstdc++.a, and libgcc's unwinder):
#     loading libstdc++.so and binding its thousands of symbols is most of what an empty Swift
#     program costs at start (docs/benchmarks.md, "The encrypted file store");
#   - no RUNPATH ($ORIGIN): the loader looks for each library only where the system keeps it;
#   - generic types' metadata reached through their accessors, not by mangled name: the runtime
#     then demangles nothing, and never searches every protocol conformance in the binary to
#     check a generic requirement the compiler already knew (a fifth of a cached `get`'s work).
# usage: contrib/build-release.sh [--product NAME]      (default product: portal-token)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
product=portal-token
if [ "${1:-}" = --product ]; then product=${2:?--product needs a name}; fi
# The linker looks for -lstdc++ in this directory first, where only the static archive is.
libstdcxx=$(cc -print-file-name=libstdc++.a)
if [ ! -f "$libstdcxx" ]; then
    echo "build-release.sh: error: libstdc++.a not found: install the libstdc++ development package of the gcc that cc runs" >&2
    exit 1
fi
static_libs=$root/.build/release-static-libs
mkdir -p "$static_libs"
ln -sfn "$libstdcxx" "$static_libs/libstdc++.a"
flags=(
    -c release --static-swift-stdlib --disable-local-rpath
    -Xswiftc -Xclang-linker -Xswiftc -L"$static_libs"
    -Xswiftc -Xclang-linker -Xswiftc -static-libgcc
    -Xswiftc -Xfrontend -Xswiftc -function-sections
    -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors
    -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld
    -Xswiftc -Xclang-linker -Xswiftc --config="$root/contrib/release/link-as-needed.cfg"
    -Xlinker -z -Xlinker pack-relative-relocs
    -Xlinker --icf=all -Xlinker --gc-sections -Xlinker --no-export-dynamic
    -Xlinker --symbol-ordering-file="$root/contrib/release/link-order/portal-token.order"
    -Xlinker --no-warn-symbol-ordering
)
bindir=$(swift build "${flags[@]}" --show-bin-path)
# SwiftPM does not see the order file as an input: removing the binary makes it link again.
rm -f "$bindir/$product"
swift build "${flags[@]}" --product "$product" >&2
echo "$bindir/$product"
