#!/usr/bin/python3
# Watches the test suite's shared gnome-keyring on the session bus and says what happens to it,
# for contrib/test.sh, naming the process behind each event. No test of the suite may lock that
# keyring or write its keyring file from elsewhere (the tests that do such things use a bus and
# keyring of their own), so these are findings, written to OUTPUT, which fail the suite:
#
#   - a call of Lock or LockService on the Secret Service, with the caller's PID, command line,
#     working directory and parent;
#   - the login collection becoming locked, with the keyring files' sizes and times and the end of
#     the daemon's log (gnome-keyring locks a collection whose file was rewritten under another
#     password: "master password for keyring changed without our knowledge").
#
# It also says, on standard error only, when org.freedesktop.secrets changes owner (the daemon
# ended, and contrib/test.sh started it again) and when gnome-keyring's own password interface is
# called.
#
# Usage: keyring-watch.py KEYRINGS-DIRECTORY DAEMON-LOG OUTPUT
# It runs until killed; the session bus is DBUS_SESSION_BUS_ADDRESS's.
import os
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

keyrings, daemon_log, output_path = sys.argv[1:4]
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
address = os.environ["DBUS_SESSION_BUS_ADDRESS"]
monitor = dbus.bus.BusConnection(address)
queries = dbus.bus.BusConnection(address)
output = open(output_path, "a", buffering=1)


def say(text, finding=True):
    """A finding goes to OUTPUT too, and fails the suite; every line goes to standard error."""
    line = f"keyring-watch: {time.strftime('%H:%M:%S')} {text}"
    if finding:
        output.write(line + "\n")
    print(line, file=sys.stderr, flush=True)


def process(name):
    """The PID, command line and working directory of a bus name's owner, as far as still known."""
    try:
        pid = int(queries.call_blocking(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "GetConnectionUnixProcessID", "s", (name,), timeout=2))
    except dbus.DBusException as error:
        return f"{name} (gone: {error.get_dbus_name()})"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        directory = os.readlink(f"/proc/{pid}/cwd")
        with open(f"/proc/{pid}/status") as f:
            parent = next((line.split()[1] for line in f if line.startswith("PPid:")), "?")
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            parent_command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"{name} pid {pid} (gone)"
    return f"{name} pid {pid} [{command}] in {directory}, child of {parent} [{parent_command[:300]}]"


def files():
    try:
        entries = sorted(os.listdir(keyrings))
    except OSError as error:
        return f"{keyrings}: {error.strerror}"
    described = []
    for entry in entries:
        try:
            status = os.stat(os.path.join(keyrings, entry))
            described.append(f"{entry} {status.st_size} bytes, modified {status.st_mtime:.3f}")
        except OSError:
            described.append(f"{entry} (gone)")
    return "; ".join(described)


def on_message(connection, message):
    kind = message.get_type()
    member = message.get_member()
    if kind == 1:  # a method call: Lock and LockService are findings
        say(f"{message.get_interface()}.{member}{tuple(message.get_args_list())} "
            f"called by {process(message.get_sender())}", finding=member in ("Lock", "LockService"))
    elif kind == 4 and member == "NameOwnerChanged":
        name, old, new = message.get_args_list()
        say(f"{name} changed owner from '{old}' to '{new}'"
            + (f": the new owner is {process(new)}" if new else ""), finding=False)


rules = [
    "type='method_call',interface='org.freedesktop.Secret.Service',member='Lock'",
    "type='method_call',interface='org.freedesktop.Secret.Service',member='LockService'",
    "type='method_call',interface='org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface'",
    "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.secrets'",
]
monitor.add_message_filter(on_message)
monitor.call_blocking(
    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring",
    "BecomeMonitor", "asu", (rules, dbus.UInt32(0)), timeout=10)

locked = False


def check():
    global locked
    # Never a call that would start a daemon: after the suite's own has gone, a new one would be
    # started by the bus for this query alone.
    try:
        owned = bool(queries.call_blocking(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "NameHasOwner", "s", ("org.freedesktop.secrets",), timeout=2))
    except dbus.DBusException:
        owned = False
    if not owned:
        return True
    # Asked on a connection of its own each time, as a new client of the keyring sees it (the
    # keyring keeps what it knows of each client apart).
    try:
        fresh = dbus.bus.BusConnection(address)
    except dbus.DBusException:
        return True
    try:
        now = bool(fresh.call_blocking(
            "org.freedesktop.secrets", "/org/freedesktop/secrets/collection/login",
            "org.freedesktop.DBus.Properties", "Get", "ss",
            ("org.freedesktop.Secret.Collection", "Locked"), timeout=120))
    except dbus.DBusException:
        # No answer is no finding (the owner changes are watched above); the next check asks
        # again. The bound is long: a client that leaves before gnome-keyring has answered it
        # is what its own bug reports show aborting the daemon.
        return True
    finally:
        fresh.close()
    if now and not locked:
        try:
            with open(daemon_log, errors="replace") as f:
                log = f.read()[-4000:]
        except OSError as error:
            log = error.strerror
        say(f"the login collection is locked now; keyring files: {files()}; the daemon's log ends:\n{log}")
    locked = now
    return True


check()
GLib.timeout_add(1000, check)
GLib.MainLoop().run()
