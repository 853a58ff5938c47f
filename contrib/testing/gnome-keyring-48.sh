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
# The daemon's own libraries (readelf -d: NEEDED) and theirs, all from trixie, with its libc.
trixie_unpack "$dir" gnome-keyring gnome-keyring libgck-1-0 libgcr-base-3-1 libgcrypt20 libgpg-error0 libglib2.0-0t64 \
    libsystemd0 libcap2 libatomic1 libp11-kit0 libffi8 libpcre2-8-0 libmount1 libblkid1 libselinux1 zlib1g
mkdir -p "$dir/bin"
cat > "$dir/bin/gnome-keyring-daemon" <<WRAPPER
#!/bin/sh
# gnome-keyring from Debian trixie, run with its own libc through its loader
# (contrib/testing/gnome-keyring-48.sh). exec keeps the daemon's PID the wrapper's.
exec $trixie_loader '$dir/root/usr/bin/gnome-keyring-daemon' "\$@"
WRAPPER
chmod 755 "$dir/bin/gnome-keyring-daemon"

usable || fail "the unpacked gnome-keyring does not run: $("$dir/bin/gnome-keyring-daemon" --version 2>&1 | head -n3)"
echo "gnome-keyring-48.sh: $("$dir/bin/gnome-keyring-daemon" --version)" >&2
echo "$dir/bin/gnome-keyring-daemon"
