#!/usr/bin/env python3
"""A client of the runner's socket, written only from the older runner's wire description
(shared reference, section 2.3 "Client -> runner" and 2.4 "Runner -> client"), with the
Python standard library alone.

It checks that a client written for the older runner still works against this one:
Content-Length framing, token authentication, runner.command (dry run and a real step),
runner.status and runner.plugins, runner.invoke (with its policy errors), runner.validate_plugin,
$/cancel, and answering the runner's host.confirm requests.

Usage: python3 tests/compat_client.py SOCKET TOKEN

The runner must be configured with a plugin "test" (utter-test-plugin --plan-op terminal,
kind router) and "fake_rs" (action, provides action.open_url@1), and with
[policy] enabled_ops = ["terminal"]. Exit status 0 when every check passed, 1 otherwise
(each failure is printed), 2 on a usage or connection problem.
"""

import json
import socket
import sys

TIMEOUT_S = 60


class WireError(Exception):
    pass


class RunnerConnection:
    """One connection: Content-Length frames of compact JSON, JSON-RPC 2.0 envelopes."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.connect(path)
        self.pending = b""
        self.counter = 0
        # How to answer host.confirm: a function from its params to the result to send.
        self.on_confirm = None
        self.confirm_requests = []
        self.notifications = []

    def close(self):
        self.sock.close()

    def send(self, message):
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self.sock.sendall(b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n\r\n" + body)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise WireError("the runner closed the connection")
        self.pending += chunk

    def receive(self):
        while b"\r\n\r\n" not in self.pending:
            self._fill()
        head, self.pending = self.pending.split(b"\r\n\r\n", 1)
        length = None
        for line in head.split(b"\r\n"):
            if not line:
                continue
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None:
            raise WireError("a frame without Content-Length: %r" % head)
        while len(self.pending) < length:
            self._fill()
        body, self.pending = self.pending[:length], self.pending[length:]
        return json.loads(body.decode("utf-8"))

    def request(self, method, params, request_id=None):
        if request_id is None:
            self.counter += 1
            request_id = self.counter
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def wait_response(self, request_id):
        """Read until the response to request_id, serving the runner's own requests."""
        while True:
            message = self.receive()
            if "method" in message:
                self._serve(message)
                continue
            if message.get("id") == request_id:
                return message

    def call(self, method, params):
        return self.wait_response(self.request(method, params))

    def _serve(self, message):
        method = message["method"]
        if "id" not in message or message["id"] is None:
            self.notifications.append(message)
            return
        if method == "host.confirm":
            params = message.get("params", {})
            self.confirm_requests.append(message)
            answer = self.on_confirm(params) if self.on_confirm else {"approved": False}
            # The id is echoed exactly as the runner sent it (a string "0:<n>").
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
        else:
            self.send({
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "method not found: " + method},
            })


FAILURES = []


def check(condition, what, detail=None):
    if condition:
        print("ok   " + what)
    else:
        FAILURES.append(what)
        print("FAIL " + what + ("" if detail is None else ": " + json.dumps(detail)))


def error_code(response):
    error = response.get("error")
    return error.get("code") if isinstance(error, dict) else None


def is_plugin_entry(entry):
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("id"), str)
        and isinstance(entry.get("kind"), str)
        and isinstance(entry.get("epoch"), int)
        and isinstance(entry.get("status"), str)
        and isinstance(entry.get("provides"), list)
        and isinstance(entry.get("requires"), list)
    )


def is_step_result(entry):
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("op"), str)
        and isinstance(entry.get("ok"), bool)
        and isinstance(entry.get("detail"), str)
        and (
            "error" not in entry
            or entry["error"] is None
            or (isinstance(entry["error"], dict) and isinstance(entry["error"].get("code"), int))
        )
    )


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    path, token = argv[1], argv[2]
    try:
        conn = RunnerConnection(path)
    except OSError as e:
        print("cannot connect to %s: %s" % (path, e))
        return 2

    # Authentication: nothing but runner.auth before it.
    r = conn.call("runner.status", {})
    check(error_code(r) == -32003, "runner.status before runner.auth is refused with -32003", r)
    r = conn.call("runner.auth", {"token": token + "-wrong"})
    check(error_code(r) == -32003, "a wrong token is refused with -32003", r)
    r = conn.call("runner.auth", {"token": token})
    check(r.get("result") == {}, "runner.auth with the token answers {}", r)

    # runner.status and runner.plugins: {plugins: [{id, kind, epoch, status, provides, requires}]}
    for method in ("runner.status", "runner.plugins"):
        r = conn.call(method, {})
        plugins = r.get("result", {}).get("plugins")
        check(
            isinstance(plugins, list) and plugins and all(is_plugin_entry(p) for p in plugins),
            method + " lists plugins as {id, kind, epoch, status, provides, requires}",
            r,
        )
        by_id = {p["id"]: p for p in plugins or [] if isinstance(p, dict)}
        check(
            by_id.get("fake_rs", {}).get("status") == "ok" and by_id.get("test", {}).get("status") == "ok",
            method + " shows fake_rs and test running",
            r,
        )

    # runner.command: {results: [{op, ok, detail, error?}]}; step failures stay inside results.
    r = conn.call("runner.command", {"utterance": "open https://example.com", "dry_run": True})
    results = r.get("result", {}).get("results")
    check(
        isinstance(results, list) and len(results) == 1 and is_step_result(results[0])
        and results[0]["op"] == "open_url" and results[0]["ok"] is True,
        "runner.command dry run plans one open_url step that would succeed",
        r,
    )
    r = conn.call("runner.command", {"utterance": "open https://example.com", "provenance": "user"})
    results = r.get("result", {}).get("results")
    check(
        isinstance(results, list) and len(results) == 1 and is_step_result(results[0])
        and results[0]["ok"] is True and "https://example.com" in results[0]["detail"],
        "runner.command runs the open_url step on fake_rs",
        r,
    )
    r = conn.call("runner.command", {"utterance": "open https://example.com", "provenance": None})
    check("result" in r, "runner.command reads provenance null as user", r)
    r = conn.call("runner.command", {"utterance": "   "})
    check(error_code(r) == -32602, "a blank utterance is -32602", r)
    r = conn.call("runner.command", {"utterance": "open https://example.com", "provenance": "martian"})
    check(error_code(r) == -32602, "a bad provenance is -32602", r)
    r = conn.call("runner.command", {"utterance": "open javascript:alert(1)"})
    results = r.get("result", {}).get("results") or [{}]
    check(
        "result" in r and results[0].get("ok") is False
        and isinstance(results[0].get("error"), dict) and results[0]["error"].get("code") == -32003,
        "a step the policy refuses is reported inside results with -32003",
        r,
    )

    # runner.command with a step that needs confirmation: host.confirm comes on this connection.
    conn.on_confirm = lambda params: {"ok": True}  # the older fallback key
    r = conn.call("runner.command", {"utterance": "terminal echo hello"})
    results = r.get("result", {}).get("results") or [{}]
    check(results[0].get("ok") is True, "a terminal step runs after host.confirm approves it", r)
    confirm = conn.confirm_requests[-1] if conn.confirm_requests else {}
    params = confirm.get("params", {})
    check(
        isinstance(confirm.get("id"), str) and confirm["id"].startswith("0:"),
        "host.confirm ids are strings \"0:<n>\"",
        confirm,
    )
    check(
        params.get("op") == "terminal" and params.get("args") == {"command": "echo hello"}
        and params.get("provenance") == "user" and isinstance(params.get("summary"), str)
        and "echo hello" in params["summary"],
        "host.confirm carries {op, args, provenance, summary} with the exact args",
        confirm,
    )

    # runner.invoke: relayed to the plugin after the policy gates.
    invoke = {
        "plugin": "fake_rs",
        "method": "action.invoke",
        "params": {"op": "open_url", "args": {"url": "https://example.com"}, "provenance": "user"},
    }
    r = conn.call("runner.invoke", invoke)
    check(r.get("result", {}).get("ok") is True, "runner.invoke relays action.invoke to fake_rs", r)
    r = conn.call("runner.invoke", {"plugin": "fake_rs", "method": "action.invoke",
                                    "params": {"op": "open_url", "args": {"url": "https://example.com"}}})
    check(error_code(r) == -32003, "action.invoke without a provenance key is -32003", r)
    r = conn.call("runner.invoke", {"plugin": "fake_rs", "method": "action.invoke",
                                    "params": {"op": "open_url", "args": {"url": "https://evil.example"},
                                               "provenance": "screen"}})
    check(error_code(r) == -32006, "a URL authored from screen provenance is -32006", r)
    r = conn.call("runner.invoke", {"plugin": "fake_rs", "method": "action.invoke",
                                    "params": {"op": "open_url", "args": {"url": "file:///etc/passwd"},
                                               "provenance": "user"}})
    check(error_code(r) == -32003 and "allowed" in (r["error"].get("data") or {}),
          "a URL scheme outside the allow-list is -32003 with data.allowed", r)
    r = conn.call("runner.invoke", {"plugin": "no-such-plugin", "method": "action.invoke", "params": {}})
    check(error_code(r) == -32005, "an unknown plugin is -32005", r)
    r = conn.call("runner.invoke", {"plugin": "fake_rs", "method": "action.invoke", "params": [1, 2]})
    check(error_code(r) == -32602, "params that are not an object are -32602", r)
    r = conn.call("runner.invoke", {"method": "action.invoke"})
    check(error_code(r) == -32602, "a missing plugin is -32602", r)

    # A forced confirmation on runner.invoke: approve once, deny once.
    forced = json.loads(json.dumps(invoke))
    forced["params"]["confirm"] = True
    conn.on_confirm = lambda params: {"approved": True}
    before = len(conn.confirm_requests)
    r = conn.call("runner.invoke", forced)
    check(r.get("result", {}).get("ok") is True and len(conn.confirm_requests) == before + 1,
          "runner.invoke with confirm: true asks host.confirm and runs when approved", r)
    conn.on_confirm = lambda params: {"approved": False}
    r = conn.call("runner.invoke", forced)
    data = (r.get("error") or {}).get("data") or {}
    check(
        error_code(r) == -32003 and r["error"]["message"].startswith("confirmation denied")
        and data.get("op") == "open_url" and data.get("args") == {"url": "https://example.com"}
        and data.get("provenance") == "user" and "summary" in data,
        "a denied confirmation is -32003 \"confirmation denied\" with the request as data",
        r,
    )

    # runner.validate_plugin
    r = conn.call("runner.validate_plugin", {"plugin": "fake_rs"})
    v = r.get("result", {})
    check(
        v.get("ok") is True and v.get("negotiated") == {"protocol": "1.0", "abi": 1}
        and isinstance(v.get("unknown_capabilities"), list) and isinstance(v.get("missing_requires"), list)
        and isinstance(v.get("permissions"), list)
        and all(isinstance(p.get("name"), str) and isinstance(p.get("enforced"), bool) for p in v["permissions"]),
        "runner.validate_plugin answers {ok, negotiated, unknown_capabilities, missing_requires, permissions}",
        r,
    )
    r = conn.call("runner.validate_plugin", {"plugin": "no-such-plugin"})
    check(error_code(r) == -32602, "runner.validate_plugin of an unknown plugin is -32602", r)

    # $/cancel of a running request: it is answered -32002.
    hang = conn.request("runner.invoke", {"plugin": "test", "method": "test.hang", "params": {"provenance": "user"}})
    conn.send({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": hang}})
    r = conn.wait_response(hang)
    check(error_code(r) == -32002, "$/cancel of a running request answers it with -32002", r)

    r = conn.call("runner.no_such_method", {})
    check(error_code(r) == -32601, "an unknown method is -32601", r)

    # The connection is still usable after all of the above.
    r = conn.call("runner.status", {})
    check("result" in r, "the connection still works", r)
    conn.close()

    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (WireError, OSError, ValueError) as e:
        print("FAIL wire: %s" % e)
        sys.exit(1)
