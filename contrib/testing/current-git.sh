#!/usr/bin/env bash
# Fetches a current git (Debian trixie's, 2.47) into DIR without installing anything: its .deb
# files and those of the libraries it loads, with trixie's own libc, are unpacked under
# DIR/root and git is run through trixie's loader, so nothing on the system changes. apt works
# from a private state directory (DIR/apt) that names only trixie.
#
# It writes two identical wrappers:
#   DIR/bin/git    the git to run
#   DIR/exec/git   the same, as GIT_EXEC_PATH: git runs `git credential-HELPER` again through the
#                  exec path, which must lead back to this git, not the system's
# and prints the path of DIR/bin/git. Running it again with a working DIR costs nothing.
#
# usage: contrib/testing/current-git.sh DIR
set -euo pipefail
dir=${1:?usage: contrib/testing/current-git.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# The oldest git that speaks the credential protocol's capabilities (authtype, state).
minimum=2.46

fail() { echo "current-git.sh: error: $*" >&2; exit 1; }

usable() {
    local version
    version=$(timeout 10 "$dir/bin/git" --version 2>/dev/null) || return 1
    version=${version#git version }
    [ "$(printf '%s\n%s\n' "$minimum" "$version" | sort -V | head -n1)" = "$minimum" ] || return 1
    # The exec-path wrapper must be the same git.
    [ "$(timeout 10 "$dir/exec/git" --version 2>/dev/null)" = "git version $version" ]
}

if usable; then
    echo "$dir/bin/git"
    exit 0
fi

source "$(dirname "$0")/private-apt.sh"
private_apt "$dir/apt" "deb http://deb.debian.org/debian trixie main"
mkdir -p "$dir/debs"

echo "current-git.sh: fetching Debian trixie's git into $dir" >&2
timeout 300 apt-get "${apt_options[@]}" update -qq >&2 \
    || fail "cannot read Debian trixie's package lists (is Debian's archive reachable?)"
rm -f "$dir"/debs/*.deb
# git's own binary needs libc, PCRE2 and zlib; with trixie's libc come trixie's versions of both.
(cd "$dir/debs" && timeout 300 apt-get "${apt_options[@]}" download -qq \
    git/trixie libc6/trixie libpcre2-8-0/trixie zlib1g/trixie >&2) \
    || fail "cannot download git and its libraries from Debian trixie (is Debian's archive reachable?)"

rm -rf "$dir/root.new"
mkdir -p "$dir/root.new"
for deb in "$dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir/root.new"
done
rm -rf "$dir/root"
mv "$dir/root.new" "$dir/root"

loader="$dir/root/usr/lib64/ld-linux-x86-64.so.2"
[ -x "$loader" ] || loader="$dir/root/lib64/ld-linux-x86-64.so.2"
[ -e "$loader" ] || fail "trixie's libc has no x86-64 loader under $dir/root"
mkdir -p "$dir/bin" "$dir/exec"
for wrapper in "$dir/bin/git" "$dir/exec/git"; do
    cat > "$wrapper" <<EOF
#!/bin/sh
# git from Debian trixie, run with its own libc through its loader (contrib/testing/current-git.sh).
GIT_EXEC_PATH='$dir/exec'
export GIT_EXEC_PATH
exec '$loader' --library-path '$dir/root/usr/lib/x86_64-linux-gnu:$dir/root/lib/x86_64-linux-gnu' '$dir/root/usr/bin/git' "\$@"
EOF
    chmod 755 "$wrapper"
done

usable || fail "the unpacked git does not run: $("$dir/bin/git" --version 2>&1 | head -n3)"
echo "current-git.sh: $("$dir/bin/git" --version)" >&2
echo "$dir/bin/git"
