#!/usr/bin/env python3
"""bench/cluster_inner.py: bench/cluster's side in the KVM host. A host
agent joins the cluster's API; a one-box kilnd serves beside it; both
built template minimal first (not timed). Then, alternating, a create
of minimal through the cluster's API and one on the one-box kilnd, each
followed by its delete: the client's wall time of each create, p50 and
p90, and the ratio of the medians. The API replica's CPU and placement
time come from its /metrics before and after the cluster's creates."""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

BUILD = os.environ.get("KILN_BUILD") or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build")
KILND = os.path.join(BUILD, "kilnd")
QUIET = ["--no-net", "--no-jail", "--net-pool", "0"]


def call(url, method, path, key, body=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    c.request(method, path, json.dumps(body) if body is not None else None,
              {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def metric(url, name):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise SystemExit("bench/cluster: /metrics has no " + name)


def create_delete(url, key):
    t0 = time.monotonic()
    st, data = call(url, "POST", "/v1/sandboxes", key, {"template": "minimal"})
    took = (time.monotonic() - t0) * 1000
    if st != 201:
        raise SystemExit("bench/cluster: create on %s: %d %s" % (url, st, data[:300]))
    sid = json.loads(data)["id"]
    st, data = call(url, "DELETE", "/v1/sandboxes/" + sid, key)
    if st != 204:
        raise SystemExit("bench/cluster: delete on %s: %d %s" % (url, st, data[:300]))
    return took


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    for a in ("--api", "--key", "--token", "--advertise"):
        ap.add_argument(a, required=True)
    ap.add_argument("--agent-port", type=int, required=True)
    ap.add_argument("--runs", type=int, default=10)
    o = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kbc.", dir="/tmp")
    agent_dir, box_dir = os.path.join(tmp, "a"), os.path.join(tmp, "o")
    procs = []
    try:
        builds = [subprocess.Popen([KILND, "--data", d, "--no-net", "template", "build", "minimal"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT) for d in (agent_dir, box_dir)]
        if any(b.wait() != 0 for b in builds):
            raise SystemExit("bench/cluster: template build failed")
        box_key = subprocess.run([KILND, "--data", box_dir, "keys", "create"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        box_port = 7300
        log = open(os.path.join(tmp, "agent.log"), "w")
        procs.append(subprocess.Popen([KILND, "--role", "agent", "--data", agent_dir, "--listen",
                                       "0.0.0.0:%d" % o.agent_port, "--api", o.api, "--join-token", o.token,
                                       "--advertise", o.advertise, "--name", "bench-a", "--cgroup",
                                       "/sys/fs/cgroup/kiln-bench-a"] + QUIET, stdout=log, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([KILND, "--data", box_dir, "--listen", "127.0.0.1:%d" % box_port,
                                       "--cgroup", "/sys/fs/cgroup/kiln-bench-o"] + QUIET,
                                      stdout=open(os.path.join(tmp, "box.log"), "w"), stderr=subprocess.STDOUT))
        box = "http://127.0.0.1:%d" % box_port
        deadline = time.monotonic() + 90
        while True:
            try:
                if call(o.api, "GET", "/v1/templates", o.key)[1].count(b'"ready"') and \
                        call(box, "GET", "/v1/templates", box_key)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("bench/cluster: the agent or the one-box kilnd did not come up")
            time.sleep(0.5)
        create_delete(o.api, o.key)      # warm both paths (not counted)
        create_delete(box, box_key)
        cpu0, placed0, place_s0 = (metric(o.api, n) for n in (
            "process_cpu_seconds_total", "kiln_cluster_placements_total", "kiln_cluster_placement_seconds_total"))
        cl, one = [], []
        for _ in range(o.runs):
            one.append(create_delete(box, box_key))
            cl.append(create_delete(o.api, o.key))
        cpu1, placed1, place_s1 = (metric(o.api, n) for n in (
            "process_cpu_seconds_total", "kiln_cluster_placements_total", "kiln_cluster_placement_seconds_total"))
        n = placed1 - placed0
        print("bench/cluster: %d creates of minimal each, alternating, each followed by its delete" % o.runs)
        print("  one-box kilnd   create p50 %7.1f ms  p90 %7.1f ms" % (statistics.median(one), pct(one, 90)))
        print("  cluster (API->agent) p50 %7.1f ms  p90 %7.1f ms" % (statistics.median(cl), pct(cl, 90)))
        print("  ratio cluster/one-box (p50): %.2f (goal <= 1.15)" % (statistics.median(cl) / statistics.median(one)))
        print("  API replica: %.1f ms CPU per create+delete (heartbeats included); placement %.2f ms each (%d)"
              % ((cpu1 - cpu0) * 1000 / o.runs, (place_s1 - place_s0) * 1000 / n if n else 0, n))
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
        for d in (agent_dir, box_dir):
            for z in __import__("glob").glob(os.path.join(d, "templates/*/v*/zygote.pid")):
                try:
                    os.kill(int(open(z).read().split()[0]), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        subprocess.run("pkill -9 -f 'kiln-vmm.*%s' ; true" % tmp, shell=True)
        for cg in ("kiln-bench-a", "kiln-bench-o"):
            subprocess.run("for c in /sys/fs/cgroup/%s/*/; do [ -d \"$c\" ] && { echo 1 > \"$c/cgroup.kill\"; sleep 0.2; rmdir \"$c\"; }; done; "
                           "rmdir /sys/fs/cgroup/%s" % (cg, cg), shell=True, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
