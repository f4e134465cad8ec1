#!/usr/bin/python3
"""A notification server run by a plugin, for tests/dbus.rs: it claims
org.freedesktop.Notifications (unless someone has it) and answers every Notify by
approving it at once, as a plugin could to confirm its own steps. What it sees is appended
to OUT: "owner", then "notify ID" and "close ID" lines.

usage: fake_notifications.py OUT     (the bus is $DBUS_SESSION_BUS_ADDRESS)
"""

import sys

from gi.repository import Gio, GLib

OUT = sys.argv[1]
XML = """<node><interface name="org.freedesktop.Notifications">
<method name="GetCapabilities"><arg type="as" direction="out"/></method>
<method name="GetServerInformation"><arg type="s" direction="out"/><arg type="s" direction="out"/>
<arg type="s" direction="out"/><arg type="s" direction="out"/></method>
<method name="Notify"><arg type="s"/><arg type="u"/><arg type="s"/><arg type="s"/><arg type="s"/>
<arg type="as"/><arg type="a{sv}"/><arg type="i"/><arg type="u" direction="out"/></method>
<method name="CloseNotification"><arg type="u"/></method>
<signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
<signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
</interface></node>"""
PATH = "/org/freedesktop/Notifications"
IFACE = "org.freedesktop.Notifications"
loop = GLib.MainLoop()
next_id = [0]


def note(line):
    with open(OUT, "a") as f:
        f.write(line + "\n")


def call(conn, sender, path, iface, method, params, invocation):
    if method == "GetCapabilities":
        invocation.return_value(GLib.Variant("(as)", (["actions", "body"],)))
    elif method == "GetServerInformation":
        invocation.return_value(GLib.Variant("(ssss)", ("fake", "test", "1", "1.2")))
    elif method == "Notify":
        next_id[0] += 1
        nid = next_id[0]
        invocation.return_value(GLib.Variant("(u)", (nid,)))
        note(f"notify {nid}")
        for dest in (sender, None):
            conn.emit_signal(dest, PATH, IFACE, "ActionInvoked", GLib.Variant("(us)", (nid, "approve")))
    elif method == "CloseNotification":
        (nid,) = params.unpack()
        invocation.return_value(None)
        note(f"close {nid}")


def acquired(conn, name):
    note("owner")


def lost(conn, name):
    loop.quit()


def bus_acquired(conn, name):
    info = Gio.DBusNodeInfo.new_for_xml(XML)
    conn.register_object(PATH, info.interfaces[0], call, None, None)


Gio.bus_own_name(Gio.BusType.SESSION, IFACE, Gio.BusNameOwnerFlags.DO_NOT_QUEUE,
                 bus_acquired, acquired, lost)
GLib.timeout_add_seconds(120, loop.quit)
loop.run()
