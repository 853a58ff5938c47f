#!/usr/bin/env bash
# Fetches gnome-keyring 48 (Debian trixie's) into DIR without installing anything, as
# current-git.sh does for git: its .deb files and those of the libraries it loads, with trixie's
# own libc, are unpacked under DIR/root, and the daemon is run through trixie's loader. apt works
# from a private state directory (DIR/apt) that names only trixie.
#
# It writes DIR/bin/gnome-keyring-daemon, a wrapper that takes the daemon's own arguments, and
# prints its path. Running it again with a working DIR costs nothing.
#
# usage: contrib/testing/gnome-keyring-48.sh DIR
set -euo pipefail
dir=${1:?usage: contrib/testing/gnome-keyring-48.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
wanted=48

fail() { echo "gnome-keyring-48.sh: error: $*" >&2; exit 1; }

usable() {
    local version
    version=$(timeout 10 "$dir/bin/gnome-keyring-daemon" --version 2>/dev/null) || return 1
    [[ $version == "gnome-keyring-daemon: $wanted."* ]]
}

if usable; then
    echo "$dir/bin/gnome-keyring-daemon"
    exit 0
fi

source "$(dirname "$0")/private-apt.sh"
private_apt "$dir/apt" "deb http://deb.debian.org/debian trixie main"
mkdir -p "$dir/debs"

echo "gnome-keyring-48.sh: fetching Debian trixie's gnome-keyring into $dir" >&2
timeout 300 apt-get "${apt_options[@]}" update -qq >&2 \
    || fail "cannot read Debian trixie's package lists (is Debian's archive reachable?)"
rm -f "$dir"/debs/*.deb
# The daemon's own libraries (readelf -d: NEEDED) and theirs, all from trixie, with its libc.
packages=(gnome-keyring libgck-1-0 libgcr-base-3-1 libgcrypt20 libgpg-error0 libglib2.0-0t64 libsystemd0
    libcap2 libatomic1 libp11-kit0 libffi8 libpcre2-8-0 libmount1 libblkid1 libselinux1 zlib1g libc6)
(cd "$dir/debs" && timeout 300 apt-get "${apt_options[@]}" download -qq "${packages[@]/%//trixie}" >&2) \
    || fail "cannot download gnome-keyring and its libraries from Debian trixie (is Debian's archive reachable?)"

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
mkdir -p "$dir/bin"
cat > "$dir/bin/gnome-keyring-daemon" <<WRAPPER
#!/bin/sh
# gnome-keyring from Debian trixie, run with its own libc through its loader
# (contrib/testing/gnome-keyring-48.sh). exec keeps the daemon's PID the wrapper's.
exec '$loader' --library-path '$dir/root/usr/lib/x86_64-linux-gnu:$dir/root/lib/x86_64-linux-gnu' '$dir/root/usr/bin/gnome-keyring-daemon' "\$@"
WRAPPER
chmod 755 "$dir/bin/gnome-keyring-daemon"

usable || fail "the unpacked gnome-keyring does not run: $("$dir/bin/gnome-keyring-daemon" --version 2>&1 | head -n3)"
echo "gnome-keyring-48.sh: $("$dir/bin/gnome-keyring-daemon" --version)" >&2
echo "$dir/bin/gnome-keyring-daemon"
