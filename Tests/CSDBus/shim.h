#ifndef PORTAL_TOKEN_CSDBUS_SHIM_H
#define PORTAL_TOKEN_CSDBUS_SHIM_H

/*
 * libsystemd's sd-bus, for the tests only: a D-Bus client written by others, which calls the
 * desktop handler as a launcher does, so the handler's own D-Bus (Sources/Adapters/SessionBus) is checked
 * against an independent implementation.
 */
#include <systemd/sd-bus.h>

#endif
