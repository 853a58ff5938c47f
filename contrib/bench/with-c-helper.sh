# Sourced by the keyring benchmarks: builds the release binary and git's C libsecret helper,
# and exports PORTAL_TOKEN_BIN and C_HELPER (the helper's directory is removed on exit).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
contrib/deps.sh test
PORTAL_TOKEN_BIN=$(contrib/build-release.sh 2>/dev/null)
helpers=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-helpers.XXXXXX")
trap 'rm -rf "$helpers"' EXIT
contrib/testing/build-git-helpers.sh "$helpers"
C_HELPER=$helpers/git-credential-libsecret
export PORTAL_TOKEN_BIN C_HELPER
