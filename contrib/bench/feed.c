/*
 * feed FILE [PROGRAM [ARGUMENT...]]: runs PROGRAM (an absolute or relative path, not searched in
 * PATH) with FILE as its stdin; with no PROGRAM, opens FILE and exits. The benchmarks run every
 * command through it: hyperfine 1.15 cannot give a command stdin without a shell, and a shell
 * costs more, and varies more, than git's whole `get`. Built static, so that it loads nothing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: feed FILE [PROGRAM [ARGUMENT...]]\n", stderr);
        return 2;
    }
    int descriptor = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (descriptor < 0 || dup2(descriptor, 0) < 0) {
        perror("feed");
        return 2;
    }
    close(descriptor);
    if (argc == 2) return 0;
    execv(argv[2], argv + 2);
    perror("feed");
    return 127;
}
