#!/usr/bin/env bash
# Writes the generated parts of the shell completions (contrib/completions/), of the man page
# (contrib/man/portal-token.1: SYNOPSIS, COMMANDS, OPTIONS, EXIT STATUS) and the command list of
# docs/commands.md from the option table (Sources/Commands/OptionTable.swift) and each command's
# summary and details. Only the text between each file's BEGIN GENERATED and END GENERATED
# lines changes.
#   contrib/dev/generate.sh            rewrites the files
#   contrib/dev/generate.sh --check    fails, naming each file, when a committed file is stale
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

files=(contrib/completions/portal-token.bash contrib/completions/_portal-token contrib/completions/portal-token.fish
    contrib/man/portal-token.1 docs/commands.md)

swift build --product portal-token-docgen >&2
docgen="$(swift build --show-bin-path 2>/dev/null)/portal-token-docgen"

if [[ ${1:-} != --check ]]; then
    "$docgen" "$root"
    exit 0
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-generate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
for file in "${files[@]}"; do mkdir -p "$scratch/$(dirname "$file")" && cp "$file" "$scratch/$file"; done
"$docgen" "$scratch"
stale=0
for file in "${files[@]}"; do
    if ! diff -u "$file" "$scratch/$file" >&2; then
        echo "generate.sh: error: $file is stale: run contrib/dev/generate.sh" >&2
        stale=1
    fi
done
exit "$stale"
