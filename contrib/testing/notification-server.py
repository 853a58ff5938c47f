#!/usr/bin/python3
# A desktop notification server for the suite (Desktop Notifications Specification 1.2), on the
# session bus its environment names: it owns org.freedesktop.Notifications, appends each Notify
# call to DIR/notifications.jsonl (one JSON object a line) and each CloseNotification to
# DIR/closed, and answers as DIR/answer says when a notification arrives: "allow" or "deny"
# invokes that action, "dismiss" closes it, anything else (or no file) leaves it waiting.
# DIR/ready appears once the name is owned.
#
# usage: contrib/testing/notification-server.py DIR
import json
import os
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

INTERFACE = "org.freedesktop.Notifications"
directory = sys.argv[1]
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()


def append(name, text):
    with open(os.path.join(directory, name), "a") as file:
        file.write(text)


class Server(dbus.service.Object):
    def __init__(self):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.last = 0

    @dbus.service.method(INTERFACE, in_signature="susssasa{sv}i", out_signature="u", sender_keyword="sender")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout, sender=None):
        self.last += 1
        number = self.last
        append("notifications.jsonl", json.dumps({
            "id": number, "app": str(app), "icon": str(icon), "summary": str(summary), "body": str(body),
            "actions": [str(action) for action in actions], "hints": sorted(str(key) for key in hints),
            "timeout": int(timeout), "sender": str(sender),
        }) + "\n")
        try:
            with open(os.path.join(directory, "answer")) as file:
                answer = file.read().strip()
        except FileNotFoundError:
            answer = ""
        if answer in ("allow", "deny"):
            GLib.timeout_add(50, lambda: self.ActionInvoked(number, answer) and False)
        elif answer == "dismiss":
            GLib.timeout_add(50, lambda: self.NotificationClosed(number, 2) and False)
        return dbus.UInt32(number)

    @dbus.service.method(INTERFACE, in_signature="u", out_signature="")
    def CloseNotification(self, number):
        append("closed", "%d\n" % number)
        self.NotificationClosed(number, 3)

    @dbus.service.method(INTERFACE, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["actions", "body"]

    @dbus.service.method(INTERFACE, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("portal-token-test", "portal-token", "1", "1.2")

    @dbus.service.signal(INTERFACE, signature="us")
    def ActionInvoked(self, number, action):
        pass

    @dbus.service.signal(INTERFACE, signature="uu")
    def NotificationClosed(self, number, reason):
        pass


server = Server()
name = dbus.service.BusName(INTERFACE, bus, do_not_queue=True)
open(os.path.join(directory, "ready"), "w").close()
GLib.MainLoop().run()
