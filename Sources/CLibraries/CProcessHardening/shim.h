#ifndef PORTAL_TOKEN_CPROCESSHARDENING_SHIM_H
#define PORTAL_TOKEN_CPROCESSHARDENING_SHIM_H

#include <sys/prctl.h>

/*
 * prctl(2) is variadic, so Swift cannot call it. No dump by another process of this user, and no
 * core file whatever the core-file limit (docs/security.md, "Hardening rules"): PR_SET_DUMPABLE 0
 * also makes /proc/PID/environ, mem and maps root's, and refuses ptrace by the same user. execve
 * resets it, so the programs portal-token starts are not bound by it. Returns 0 when it took effect.
 */
static inline int portal_token_forbid_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

#endif
