#!/usr/bin/env bash
# Lays out the Swift sources with swift-format and the repository's .swift-format.
#   contrib/dev/format.sh           rewrites every .swift file in place
#   contrib/dev/format.sh --check   changes nothing; fails, listing what is off, when a file is not
#                               laid out as the formatter would, or a line is over 120 columns
set -euo pipefail
cd "$(dirname "$0")/../.."

max_columns=120

mode=write
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    *) echo "format.sh: error: unknown argument '$1'" >&2
       echo "hint: contrib/dev/format.sh [--check]" >&2
       exit 2 ;;
esac

mapfile -t files < <(find Package.swift Sources Tests -name '*.swift' -type f | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
    echo "format.sh: error: no .swift files found" >&2
    exit 1
fi

if [ "$mode" = write ]; then
    swift format format --in-place --parallel --configuration .swift-format -- "${files[@]}"
    exit 0
fi

status=0

# The formatter's own findings: a file that `contrib/dev/format.sh` would change.
if ! findings=$(swift format lint --strict --parallel --configuration .swift-format -- "${files[@]}" 2>&1); then
    echo "format.sh: error: these files are not formatted; run contrib/dev/format.sh" >&2
    printf '%s\n' "$findings" | sed -n 's/^\([^:]*\.swift\):.*/\1/p' | sort -u | sed 's/^/  /' >&2
    status=1
fi

# Lines the formatter cannot shorten (long string literals, comments) are checked on their own.
if long=$(LC_ALL=C.UTF-8 perl -CSD -ne \
        'chomp; print "  $ARGV:$.: " . length($_) . " columns\n" if length($_) > '"$max_columns"';
         close ARGV if eof' -- "${files[@]}") && [ -n "$long" ]; then
    echo "format.sh: error: lines over $max_columns columns" >&2
    printf '%s\n' "$long" >&2
    status=1
fi

if [ "$status" -eq 0 ]; then
    echo "format.sh: ${#files[@]} files formatted, no line over $max_columns columns"
fi
exit $status
