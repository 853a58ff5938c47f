#!/usr/bin/env bash
# Where a cached `get` from the encrypted file touches memory, against the two empty Swift
# programs of file-get.sh: every page fault recorded with `perf record -e page-faults`, counted
# by the mapping it fell in (the binary's code, its relocated data, its .data, its zeroed data
# and heap, the libraries), then what a fault and the /proc reads of the audit line cost on this
# machine, from a small C program. Needs perf, cc, swiftc and python3.
# Usage: contrib/bench/page-faults.sh
set -euo pipefail
command -v perf >/dev/null || { echo "page-faults.sh needs perf (apt-get install linux-perf)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
source contrib/bench/lib.sh
binary=$(contrib/build-release.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
bench_empty_swift "$work"
export HOME=$work XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data XDG_STATE_HOME=$work/state
unset DBUS_SESSION_BUS_ADDRESS DISPLAY WAYLAND_DISPLAY PORTAL_TOKEN_PASSPHRASE PORTAL_TOKEN_BACKEND
bench_file_store "$work"
printf 'protocol=https\nhost=git.example.com\nusername=bench\npassword=p\n\n' | "$binary" store --backend file
printf 'protocol=https\nhost=git.example.com\n\n' >"$work/request"
"$binary" get --backend file <"$work/request" >/dev/null

faults() {
    perf record -q -e page-faults -c 1 -d -o "$work/perf.data" "$@" <"$work/request" >/dev/null 2>&1
    perf script -i "$work/perf.data" --show-mmap-events -F ip,addr 2>/dev/null | bench_python "$1"
}
classify='
import collections, re, sys
binary = sys.argv[1].split("/")[-1]
maps, counts, writable = [], collections.Counter(), 0
for line in sys.stdin:
    m = re.search(r"MMAP2? .*\[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ \S+.*\]: (\S+) (.*)$", line)
    if m:
        start, size, mode, path = m.groups()
        previous = maps[-1][2] if maps else ""
        if path.split("/")[-1] == binary:
            if mode == "rw-p":
                writable += 1
            name = {"r-xp": "the binary: code", "r--p": "the binary: read-only data"}.get(mode) or (
                "the binary: relocated data (.data.rel.ro, .got)" if writable == 1 else "the binary: .data")
        elif path.startswith("//anon") and previous.startswith("the binary"):
            name = "the binary: zeroed data (.bss)"
        elif path.startswith("//anon") or path.startswith("[heap]"):
            name = "heap and other anonymous memory"
        elif path.startswith("[stack]"):
            name = "stack"
        else:
            name = "libraries and the loader"
        maps.append((int(start, 16), int(start, 16) + int(size, 16), name))
        continue
    fields = line.split()
    if not fields:
        continue
    address = int(fields[0], 16)
    owner = next((n for s, e, n in reversed(maps) if s <= address < e), "heap and other anonymous memory")
    counts[owner] += 1
print(f"{binary}: {sum(counts.values())} page faults")
for name, count in counts.most_common():
    print(f"  {count:4d}  {name}")
'
bench_python() { python3 -c "$classify" "$@"; }
faults "$work/empty-swift"
faults "$work/empty-swift-release-link"
faults "$binary" get --backend file

cat >"$work/costs.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
int main(int argc, char **argv) {
    enum { pages = 1000 };
    double anon = 1e9, file = 1e9;
    char buffer[1024];
    for (int round = 0; round < 20; round++) {
        char *p = mmap(0, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        double t = now();
        for (int i = 0; i < pages; i++) p[i * 4096] = 1;
        t = now() - t; if (t < anon) anon = t;
        munmap(p, pages * 4096);
        int fd = open(argv[1], O_RDONLY);
        volatile char *q = mmap(0, pages * 4096, PROT_READ, MAP_PRIVATE, fd, 0), sum = 0;
        t = now();
        for (int i = 0; i < pages; i++) sum += q[i * 4096];
        t = now() - t; if (t < file) file = t;
        munmap((void *)q, pages * 4096); close(fd);
    }
    double t = now();
    for (int i = 0; i < 2000; i++) { int fd = open("/proc/1/stat", O_RDONLY); read(fd, buffer, sizeof buffer); close(fd); }
    double stat = (now() - t) / 2000;
    t = now();
    for (int i = 0; i < 2000; i++) readlink("/proc/self/exe", buffer, sizeof buffer);
    double link = (now() - t) / 2000;
    printf("a page fault: %.2f us zeroed, %.2f us from the page cache; /proc/PID/stat opened, read and closed:"
           " %.2f us; /proc/PID/exe read: %.2f us\n", anon / pages, file / pages, stat, link);
}
C
cc -O2 -o "$work/costs" "$work/costs.c"
"$work/costs" "$binary"
