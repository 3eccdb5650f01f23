#!/usr/bin/env python3
"""tests/cluster/proc_race.py URL KEY SANDBOX ROUNDS: background processes
(docs/api.md "Processes") started and attached back to back, as fast as
one kept-alive HTTP connection goes (the TypeScript SDK's pace): each
round starts a process and at once reads its output (attached: 200
running), signals it and reads it to its end (200, exited by signal 15),
then starts another and follows it at once (200, an "attached" event).
Prints one line: "ok N rounds" or the first answer that was wrong."""
import http.client
import json
import sys
import urllib.parse

url, key, sbx, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
u = urllib.parse.urlsplit(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
H = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
base = f"/v1/sandboxes/{sbx}/processes"


def call(method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=H)
    r = conn.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else None)


def first_event(path):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("GET", path, headers=H)
    r = c.getresponse()
    if r.status != 200:
        out = r.status, r.read()[:300]
        c.close()
        return out
    line = r.readline()
    c.close()  # leaving the stream: the process runs on
    return 200, line


def bad(what, got):
    print(f"round {i}: {what}: {got}")
    sys.exit(1)


CMD = {"cmd": "echo up; while :; do sleep 1; echo tick; done"}
for i in range(1, rounds + 1):
    st, j = call("POST", base, CMD)
    if st != 201:
        bad("start", (st, j))
    pid = j["id"]
    st, j = call("GET", f"{base}/{pid}/output")
    if (st, j.get("status")) != (200, "running"):
        bad("output at once after the start", (st, j))
    st, j = call("POST", f"{base}/{pid}/signal", {"signal": "TERM"})
    if st != 204:
        bad("TERM", (st, j))
    st, j = call("GET", f"{base}/{pid}/output?wait_seconds=30")
    if st != 200 or (j["status"], j["signal"]) != ("exited", 15):
        bad("output after TERM", (st, j))
    st, j = call("POST", base, CMD)
    if st != 201:
        bad("start", (st, j))
    q = j["id"]
    st, line = first_event(f"{base}/{q}/output?follow=true")
    if st != 200 or b"attached" not in line:
        bad("follow at once after the start", (st, line))
    st, j = call("POST", f"{base}/{q}/signal", {"signal": "KILL"})
    if st != 204:
        bad("KILL", (st, j))
print(f"ok {rounds} rounds: attached at once after each start, each exit kept after an output and a TERM, "
      "each follow at once after a start")
