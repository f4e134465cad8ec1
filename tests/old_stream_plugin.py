#!/usr/bin/env python3
"""A stream plugin written the way plugins of the older runner were: it produces the stream
`old.ticks` and, when told `mode: "reliable"` with a `window`, sends that many frames and then
waits for `stream.ack` *requests* (which it answers) before it sends more; `stream.ack`
notifications mean nothing to it. Its `plugin.describe` does not say `stream_credit`.

`stream.subscribe {stream_id?, method, params: {count}, mode?, window?}` answers
`{"stream_id": ...}` and then sends `count` frames `old.ticks {stream_id, seq, data}`, then
`stream.end`. Everything it is sent is appended as a JSON line to the file named by argv[1].
"""

import json
import sys
import threading

out_lock = threading.Lock()
record = open(sys.argv[1], "a", buffering=1) if len(sys.argv) > 1 else None
credit = threading.Condition()
state = {"credit": None}  # None: no window (send freely)


def send(message):
    body = json.dumps(message).encode()
    with out_lock:
        sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sys.stdout.buffer.flush()


def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))


def produce(stream_id, count):
    for seq in range(1, count + 1):
        with credit:
            while state["credit"] is not None and state["credit"] <= 0:
                credit.wait()
            if state["credit"] is not None:
                state["credit"] -= 1
        send({"jsonrpc": "2.0", "method": "old.ticks",
              "params": {"stream_id": stream_id, "seq": seq, "data": {"n": seq}}})
    send({"jsonrpc": "2.0", "method": "stream.end", "params": {"stream_id": stream_id}})


def main():
    while True:
        message = read()
        if message is None:
            return
        if record:
            record.write(json.dumps(message) + "\n")
        method, params, mid = message.get("method"), message.get("params") or {}, message.get("id")
        if mid is None:
            continue  # notifications (a stream.ack among them) are ignored
        if method == "protocol.hello":
            result = {"protocol": "1.0", "abi": 1, "provides": [], "requires": [],
                      "permissions": [], "plugin": {"name": "old", "version": "0.1.0", "kind": "bundle"}}
        elif method == "plugin.describe":
            result = {"methods": ["stream.subscribe", "stream.stop"], "streams": ["old.ticks"]}
        elif method == "plugin.health":
            result = {"status": "ok", "detail": "older-style stream plugin"}
        elif method == "stream.subscribe":
            stream_id = params.get("stream_id") or "old-1"
            if params.get("mode") == "reliable":
                with credit:
                    state["credit"] = int(params.get("window") or 64)
            count = int((params.get("params") or {}).get("count", 10))
            send({"jsonrpc": "2.0", "id": mid, "result": {"stream_id": stream_id}})
            threading.Thread(target=produce, args=(stream_id, count), daemon=True).start()
            continue
        elif method == "stream.ack":
            with credit:
                if state["credit"] is not None:
                    state["credit"] += 1
                credit.notify_all()
            result = {}
        elif method == "stream.stop":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "method not found: %s" % method}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})


if __name__ == "__main__":
    main()
