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
# git's own binary needs libc, PCRE2 and zlib; with trixie's libc come trixie's versions of both.
trixie_unpack "$dir" git git libpcre2-8-0 zlib1g
mkdir -p "$dir/bin" "$dir/exec"
for wrapper in "$dir/bin/git" "$dir/exec/git"; do
    cat > "$wrapper" <<EOF
#!/bin/sh
# git from Debian trixie, run with its own libc through its loader (contrib/testing/current-git.sh).
GIT_EXEC_PATH='$dir/exec'
export GIT_EXEC_PATH
exec $trixie_loader '$dir/root/usr/bin/git' "\$@"
EOF
    chmod 755 "$wrapper"
done

usable || fail "the unpacked git does not run: $("$dir/bin/git" --version 2>&1 | head -n3)"
echo "current-git.sh: $("$dir/bin/git" --version)" >&2
echo "$dir/bin/git"
