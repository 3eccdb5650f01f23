#!/usr/bin/env python3
"""The end-to-end tests' HTTP client and JSON reader (tests/e2e/lib.sh's
api and jget), one process per test file, spoken to through a coprocess.

Why: in the emulated host every program started costs time (measured
there: curl about 0.35 s, python3 reading a JSON file about 0.39 s, a
bare fork and exec about 0.08 s), and a test file makes hundreds of API
calls, each with a jget or two. One Python that stays up answers each in
a few milliseconds. lib.sh falls back to curl and python3 where this
process cannot be reached (a background job: bash closes a coprocess's
pipes in every subshell but a command substitution).

Requests, one line each, fields separated by tabs (file names and URLs
hold no tab or newline; bodies and expressions travel in files):
  api  ID METHOD URL KEY BODYFILE CTYPE OUTFILE [HEADER...]
       BODYFILE empty: no body. CTYPE: the Content-Type sent with a body.
       Writes the answer's body to OUTFILE; answers "ID STATUS", STATUS
       000 where no answer came (as curl's %{http_code}).
  jget ID EXPRFILE JSONFILE OUTFILE
       print((EXPR)) with j the JSON in JSONFILE, into OUTFILE; answers
       "ID 0", or "ID 1" with OUTFILE empty when it raised (as jget's
       python3 -c with 2>/dev/null).
"""
import http.client
import io
import json
import sys
import urllib.parse


def api(method, url, key, bodyfile, ctype, outfile, headers):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http":
        raise ValueError("client.py speaks plain http, not " + u.scheme)
    body = None
    if bodyfile:
        with open(bodyfile, "rb") as f:
            body = f.read()
    h = {"User-Agent": "kiln-e2e", "Accept": "*/*"}
    if key:
        h["Authorization"] = "Bearer " + key
    if body is not None:
        h["Content-Type"] = ctype
    for line in headers:
        name, _, value = line.partition(":")
        h[name.strip()] = value.strip()
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=300)
    try:
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            status = r.status
        except (OSError, http.client.HTTPException):
            data, status = b"", 0
    finally:
        conn.close()
    with open(outfile, "wb") as f:
        f.write(data)
    return "%03d" % status


def jget(exprfile, jsonfile, outfile):
    with open(exprfile, encoding="utf-8", errors="surrogateescape") as f:
        expr = f.read()
    out = io.StringIO()
    rc = "0"
    try:
        with open(jsonfile) as f:
            j = json.load(f)
        print(eval(expr, {"json": json, "sys": sys, "j": j}), file=out)
    except Exception:
        out, rc = io.StringIO(), "1"
    with open(outfile, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(out.getvalue())
    return rc


def main():
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        op, rid = f[0], f[1] if len(f) > 1 else "?"
        try:
            if op == "api":
                answer = api(f[2], f[3], f[4], f[5], f[6], f[7], f[8:])
            elif op == "jget":
                answer = jget(f[2], f[3], f[4])
            else:
                raise ValueError("unknown request %r" % op)
        except Exception as e:
            print("client.py: %s: %s" % (op, e), file=sys.stderr)
            answer = "err"
        sys.stdout.write("%s\t%s\n" % (rid, answer))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
