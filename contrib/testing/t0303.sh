#!/usr/bin/env bash
# Runs git's own external-helper test, t/t0303-credential-external.sh, against the release
# portal-token on one backend, named by T0303_BACKEND:
#   auto (the default): auto with no D-Bus session bus, once the encrypted file store exists (the
#     test's second case is a store that compares stderr, and only the store that creates the
#     file announces it);
#   file: --backend file;
#   secret-service: --backend secret-service, on the session bus of the environment (run it
#     inside a session with a keyring);
#   vault: --backend vault, on the OpenBao server VAULT_ADDR, VAULT_CACERT and
#     PORTAL_TOKEN_VAULT_TOKEN_FILE name (contrib/testing/openbao.sh start DIR writes them to
#     DIR/env), under a path prefix of its own.
#
# usage: [T0303_BACKEND=auto|file|secret-service|vault] contrib/testing/t0303.sh GIT_SOURCE_DIR [GIT_DIR [TEST OPTIONS...]]
#   GIT_SOURCE_DIR: the source of the git under test (contrib/testing/git-source.sh DIR trixie
#   fetches and prepares git 2.47.3's), with its test tool built:
#     make NO_CURL=1 NO_EXPAT=1 NO_TCLTK=1 NO_GETTEXT=1 NO_PERL=1 NO_PYTHON=1 \
#         GIT-BUILD-OPTIONS t/helper/test-tool
#   GIT_DIR: the directory holding the git binary to test (GIT_TEST_INSTALLED); by default the
#   directory of the git on PATH. Its `git --exec-path` must lead back to the same git.
set -euo pipefail
usage="usage: contrib/testing/t0303.sh GIT_SOURCE_DIR [GIT_DIR [TEST OPTIONS...]]"
source_dir=$(cd "${1:?$usage}" && pwd)
git_dir=${2:-$(dirname "$(command -v git)")}
git_dir=$(cd "$git_dir" && pwd)
[ -x "$git_dir/git" ] || { echo "t0303.sh: error: no git in $git_dir" >&2; exit 1; }
[ -x "$source_dir/t/helper/test-tool" ] && [ -f "$source_dir/GIT-BUILD-OPTIONS" ] \
    || { echo "t0303.sh: error: $source_dir has no built t/helper/test-tool and GIT-BUILD-OPTIONS" >&2; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
binary=$("$root/contrib/build-release.sh" 2>/dev/null)
work=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-t0303.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/run"
chmod 700 "$work/run"
ln -s "$binary" "$work/bin/git-credential-portal-token"
backend=${T0303_BACKEND:-auto}
case "$backend" in
    auto) settings=(-u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u WAYLAND_DISPLAY -u PORTAL_TOKEN_BACKEND) ;;
    file) settings=(-u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u WAYLAND_DISPLAY PORTAL_TOKEN_BACKEND=file) ;;
    secret-service)
        [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] || { echo "t0303.sh: error: secret-service needs a session bus" >&2; exit 1; }
        settings=(PORTAL_TOKEN_BACKEND=secret-service) ;;
    vault)
        [ -n "${VAULT_ADDR:-}" ] && [ -n "${PORTAL_TOKEN_VAULT_TOKEN_FILE:-}" ] \
            || { echo "t0303.sh: error: vault needs VAULT_ADDR and PORTAL_TOKEN_VAULT_TOKEN_FILE" >&2; exit 1; }
        settings=(-u DBUS_SESSION_BUS_ADDRESS PORTAL_TOKEN_BACKEND=vault
            PORTAL_TOKEN_VAULT_PATH_PREFIX="portal-token-t0303/$(basename "$work")") ;;
    *) echo "t0303.sh: error: T0303_BACKEND must be auto, file, secret-service or vault" >&2; exit 1 ;;
esac
echo "t0303.sh: backend $backend: $source_dir/t/t0303-credential-external.sh against $("$git_dir/git" --version) and $("$binary" --version 2>&1 | head -n1)" >&2
cd "$source_dir/t"
env "${settings[@]}" \
    PATH="$work/bin:$PATH" XDG_RUNTIME_DIR="$work/run" \
    PORTAL_TOKEN_FILE="$work/store" PORTAL_TOKEN_PASSPHRASE="t0303 passphrase" \
    GIT_TEST_INSTALLED="$git_dir" GIT_TEST_CREDENTIAL_HELPER=portal-token \
    GIT_TEST_CREDENTIAL_HELPER_SETUP="printf 'protocol=https\nhost=t0303-setup-$backend.example\nusername=u\npassword=p\n\n' | git-credential-portal-token store" \
    ./t0303-credential-external.sh --root="$work/trash" "${@:3}"
