#!/usr/bin/env bash
# Writes the generated parts of the shell completions (contrib/completions/) and of the man
# page's OPTIONS section (contrib/man/portal-token.1) from the option table in
# Sources/Commands/OptionTable.swift. Only the text between each file's BEGIN GENERATED and
# END GENERATED lines changes.
#   contrib/dev/generate.sh            rewrites the files in contrib/
#   contrib/dev/generate.sh --check    fails, naming each file, when a committed file is stale
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

files=(completions/portal-token.bash completions/_portal-token completions/portal-token.fish man/portal-token.1)

swift build --product portal-token-docgen >&2
docgen="$(swift build --show-bin-path 2>/dev/null)/portal-token-docgen"

if [[ ${1:-} != --check ]]; then
    "$docgen" "$root/contrib"
    exit 0
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-generate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/completions" "$scratch/man"
for file in "${files[@]}"; do cp "contrib/$file" "$scratch/$file"; done
"$docgen" "$scratch"
stale=0
for file in "${files[@]}"; do
    if ! diff -u "contrib/$file" "$scratch/$file" >&2; then
        echo "generate.sh: error: contrib/$file is stale: run contrib/dev/generate.sh" >&2
        stale=1
    fi
done
exit "$stale"
