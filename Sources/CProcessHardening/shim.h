#ifndef PORTAL_TOKEN_CPROCESSHARDENING_SHIM_H
#define PORTAL_TOKEN_CPROCESSHARDENING_SHIM_H

#include <sys/prctl.h>
#include <sys/resource.h>

/*
 * prctl(2) is variadic, so Swift cannot call it. No core file and no dump by another process
 * of this user (docs/security.md, "Hardening rules"): PR_SET_DUMPABLE 0 also makes /proc/PID/environ, mem and
 * maps root's, and refuses ptrace by the same user. Returns 0 when both took effect.
 */
static inline int portal_token_forbid_core_dumps(void) {
    struct rlimit none = { 0, 0 };
    int limited = setrlimit(RLIMIT_CORE, &none);
    int undumpable = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return limited == 0 && undumpable == 0 ? 0 : -1;
}

#endif
