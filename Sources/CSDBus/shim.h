#ifndef PORTAL_TOKEN_CSDBUS_SHIM_H
#define PORTAL_TOKEN_CSDBUS_SHIM_H

/*
 * libsystemd's sd-bus: one D-Bus round trip without GLib, for the checks that run on every
 * invocation (is there a session bus, does a Secret Service provider own or activate its name,
 * is a collection locked). GLib's start-up alone costs about 6 ms a process; a whole process
 * that reads one property through sd-bus about 3 ms.
 */
#include <systemd/sd-bus.h>

#endif
