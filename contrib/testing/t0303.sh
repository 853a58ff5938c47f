#!/usr/bin/env bash
# Runs git's own external-helper test, t/t0303-credential-external.sh, against the release
# portal-token under the default backend (auto) with no D-Bus session bus, once the encrypted
# file store exists (the test's second case is a store that compares stderr, and only the store
# that creates the file announces it).
#
# usage: contrib/testing/t0303.sh GIT_SOURCE_DIR
#   GIT_SOURCE_DIR: the source of the installed git (Debian 12: `apt-get source git`, with a
#   deb-src line), with its test tool built:
#     make NO_CURL=1 NO_EXPAT=1 NO_TCLTK=1 NO_GETTEXT=1 NO_PERL=1 NO_PYTHON=1 \
#         GIT-BUILD-OPTIONS t/helper/test-tool
set -euo pipefail
source_dir=$(cd "${1:?usage: contrib/testing/t0303.sh GIT_SOURCE_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
binary=$("$root/contrib/build-release.sh" 2>/dev/null)
work=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-t0303.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/run"
chmod 700 "$work/run"
ln -s "$binary" "$work/bin/git-credential-portal-token"
cd "$source_dir/t"
env -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u WAYLAND_DISPLAY -u PORTAL_TOKEN_BACKEND \
    PATH="$work/bin:$PATH" XDG_RUNTIME_DIR="$work/run" \
    PORTAL_TOKEN_FILE="$work/store" PORTAL_TOKEN_PASSPHRASE="t0303 passphrase" \
    GIT_TEST_INSTALLED="$(dirname "$(command -v git)")" GIT_TEST_CREDENTIAL_HELPER=portal-token \
    GIT_TEST_CREDENTIAL_HELPER_SETUP='printf "protocol=https\nhost=t0303-setup.example\nusername=u\npassword=p\n\n" | git-credential-portal-token store' \
    ./t0303-credential-external.sh "${@:2}"
