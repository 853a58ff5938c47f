#ifndef PORTAL_TOKEN_CPEERCREDENTIALS_SHIM_H
#define PORTAL_TOKEN_CPEERCREDENTIALS_SHIM_H

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

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

/*
 * The uid that owns the TCP socket whose local end is `far_address`:`far_port` and whose remote
 * end is `near_address`:`near_port` (addresses of `family`, 4 or 16 bytes in network order,
 * ports in host order): on loopback, the far end of a connection this process made, which the
 * kernel gives the uid of the listener it came from (a socket in its queue, or accepted). One
 * exact lookup through NETLINK_SOCK_DIAG (sock_diag(7)), bounded by a one-second receive
 * timeout. Returns 0 with *uid set, 1 when the kernel knows no such socket, -1 on failure.
 */
static inline int portal_token_tcp_socket_owner(
    int family, const unsigned char *far_address, unsigned short far_port,
    const unsigned char *near_address, unsigned short near_port, unsigned int *uid) {
    size_t length = family == AF_INET ? 4 : 16;
    if (family != AF_INET && family != AF_INET6) return -1;
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct timeval bound = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof(message));
    message.header.nlmsg_len = sizeof(message);
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = (unsigned char)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_sport = htons(far_port);
    message.request.id.idiag_dport = htons(near_port);
    memcpy(message.request.id.idiag_src, far_address, length);
    memcpy(message.request.id.idiag_dst, near_address, length);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (send(fd, &message, sizeof(message), 0) != (ssize_t)sizeof(message)) {
        close(fd);
        return -1;
    }
    long buffer[1024];
    ssize_t received = recv(fd, buffer, sizeof(buffer), 0);
    close(fd);
    if (received < (ssize_t)sizeof(struct nlmsghdr)) return -1;
    struct nlmsghdr *reply = (struct nlmsghdr *)buffer;
    if (!NLMSG_OK(reply, (unsigned int)received)) return -1;
    if (reply->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *error = (struct nlmsgerr *)NLMSG_DATA(reply);
        return error->error == -ENOENT ? 1 : -1;
    }
    if (reply->nlmsg_type != SOCK_DIAG_BY_FAMILY || reply->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return -1;
    struct inet_diag_msg *found = (struct inet_diag_msg *)NLMSG_DATA(reply);
    *uid = found->idiag_uid;
    return 0;
}

#endif
