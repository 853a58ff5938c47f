#!/usr/bin/env bash
# Fetches the source of a Debian release's git into DIR and builds what git's own test framework
# needs to run t/t0303-credential-external.sh against an installed git (GIT_TEST_INSTALLED): the
# test tool (t/helper/test-tool), GIT-BUILD-OPTIONS and the built templates. Nothing on the system
# changes: apt works from a private state directory (DIR/apt) that names only SUITE's sources.
# Only the upstream tarball is unpacked, without the documentation, translations, GUIs and every
# other test script.
#
# Prints the path of the prepared source tree. Running it again with a prepared DIR costs nothing.
#
# usage: contrib/testing/git-source.sh DIR SUITE      (SUITE: a Debian suite, e.g. trixie)
set -euo pipefail
usage="usage: contrib/testing/git-source.sh DIR SUITE"
dir=${1:?$usage}
suite=${2:?$usage}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

fail() { echo "git-source.sh: error: $*" >&2; exit 1; }

# The tree is ready once its test tool runs; the stamp names the tree.
if [ -f "$dir/ready" ]; then
    tree=$(cat "$dir/ready")
    if [ -x "$tree/t/helper/test-tool" ] && [ -f "$tree/GIT-BUILD-OPTIONS" ] \
        && [ -d "$tree/templates/blt" ] && [ -f "$tree/t/t0303-credential-external.sh" ]; then
        echo "$tree"
        exit 0
    fi
fi
rm -f "$dir/ready"

source "$(dirname "$0")/private-apt.sh"
private_apt "$dir/apt" "deb-src http://deb.debian.org/debian $suite main"
mkdir -p "$dir/download"

echo "git-source.sh: fetching the source of Debian $suite's git into $dir" >&2
timeout 300 apt-get "${apt_options[@]}" update -qq >&2 \
    || fail "cannot read Debian $suite's source lists (is Debian's archive reachable?)"
rm -f "$dir"/download/*
(cd "$dir/download" && timeout 300 apt-get "${apt_options[@]}" source --download-only -qq "git/$suite" >&2) \
    || fail "cannot download git's source from Debian $suite (is Debian's archive reachable?)"
tarball=$(ls "$dir"/download/git_*.orig.tar.* 2>/dev/null | head -n1)
[ -n "$tarball" ] || fail "Debian $suite's git source has no upstream tarball"
version=${tarball##*/git_}
version=${version%.orig.tar.*}
top="git-$version"

rm -rf "$dir/$top"
# What the test framework and the test tool need, and the one test script that runs.
timeout 120 tar -xf "$tarball" -C "$dir" \
    --exclude="$top/Documentation" --exclude="$top/po" --exclude="$top/gitk-git" \
    --exclude="$top/git-gui" --exclude="$top/t/perf" --exclude="$top/t/t[0-9]*" \
    || fail "cannot unpack $tarball"
timeout 120 tar -xf "$tarball" -C "$dir" "$top/t/t0303-credential-external.sh" \
    || fail "$tarball has no t/t0303-credential-external.sh"
tree="$dir/$top"

echo "git-source.sh: building git $version's test tool" >&2
make_options=(NO_CURL=1 NO_EXPAT=1 NO_TCLTK=1 NO_GETTEXT=1 NO_PERL=1 NO_PYTHON=1 SHELL_PATH=/bin/sh)
if ! timeout 900 make -C "$tree" "${make_options[@]}" -j"$(nproc)" \
        GIT-BUILD-OPTIONS t/helper/test-tool >"$dir/build.log" 2>&1 \
    || ! timeout 120 make -C "$tree/templates" SHELL_PATH=/bin/sh PERL_PATH=/usr/bin/perl \
        >>"$dir/build.log" 2>&1; then
    tail -n 20 "$dir/build.log" >&2
    fail "cannot build git $version's test tool (whole log: $dir/build.log)"
fi
echo "$tree" > "$dir/ready"
echo "$tree"
