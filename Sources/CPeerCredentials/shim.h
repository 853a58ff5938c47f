#ifndef PORTAL_TOKEN_CPEERCREDENTIALS_SHIM_H
#define PORTAL_TOKEN_CPEERCREDENTIALS_SHIM_H

#include <sys/pidfd.h>
#include <sys/socket.h>

/*
 * SO_PEERPIDFD (Linux 6.5): a pidfd of the process that connected, taken by the kernel at
 * connect time, so it cannot name a later process that reused the pid. Older headers lack it.
 */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

static const int portal_token_so_peerpidfd = SO_PEERPIDFD;

/*
 * struct ucred needs _GNU_SOURCE, which Swift's Glibc module is built without: the same three
 * fields, read with SO_PEERCRED. Returns 0 on success.
 */
struct portal_token_peer_credentials {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

static inline int portal_token_read_peer_credentials(int socket, struct portal_token_peer_credentials *out) {
    socklen_t length = sizeof(*out);
    return getsockopt(socket, SOL_SOCKET, SO_PEERCRED, out, &length);
}

/* Whether the process behind a pidfd is still running (signal 0 delivers nothing). */
static inline int portal_token_pidfd_alive(int pidfd) {
    return pidfd_send_signal(pidfd, 0, 0, 0) == 0;
}

#endif
