#!/usr/bin/env python3
"""check_kvbench.py — runs a kvbench smoke run with --json and checks its results, not only its exit status.

usage: check_kvbench.py [--tls] KVBENCH COMMAND [ARGS...]   (runs KVBENCH COMMAND ARGS --json)
       check_kvbench.py --file RESULT.json COMMAND  (checks a saved --json result)

--tls (rpc): makes a CA and a certificate for localhost and 127.0.0.1 with
the openssl command in a temporary directory and passes them (--tls-cert,
--tls-key, --tls-ca, --tls-server-name localhost), so that the run has
tls+tcp and kv+tls cells too.

Checked for every command: kvbench exited 0, the result says ok, and every
row it reports has ops, no errors and no wrong values, and latency
percentiles in order (0 < p50 <= p99 <= p999 <= max). For `rpc`: every kvd
cell of the configuration is there (each transport it names x row x
threads), and kvd
counted at least as many requests as the cells report. For `ycsb`: every
backend that was not skipped has every phase of every workload at every sync
mode, the operations of a phase add up to what was planned, and the
workloads that only read loaded records (A, B, C, F) found every one of them.
For `device`: every put cell of the configuration (value size x sync x
writers) and the get cell are there, each with operations, no errors and no
wrong values; every fio run that was not skipped succeeded with I/O done; and
each target is met, missed or said not measured.
Exits 0 when all hold, 1 with one line per failed check otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def latencies_in_order(row, name):
    p = [row.get(k, 0) for k in ("p50_us", "p99_us", "p999_us", "max_us")]
    check(0 < p[0] <= p[1] <= p[2] <= p[3], "%s: latencies out of order: %s" % (name, p))


def check_rpc(d):
    cfg = d["config"]
    cells = d["cells"]
    check(d["kvd"].get("exit_ok") is True, "kvd did not exit 0")
    for c in cells:
        name = "%s %s %s %s %s x%d" % (c["section"], c["transport"], c["op"], c["sync"],
                                        c["mode"], c["threads"])
        if not check(c["state"] == "ok", "%s: state %s (%s)" % (name, c["state"], c["error"])):
            continue
        check(c["ops"] > 0 and c["ops_per_s"] > 0, "%s: no operations" % name)
        check(c["errors"] == 0, "%s: %d errors" % (name, c["errors"]))
        check(c["wrong"] == 0, "%s: %d wrong values" % (name, c["wrong"]))
        latencies_in_order(c, name)
    have = {(c["transport"], c["op"], c["sync"], c["mode"], c["threads"])
            for c in cells if c["section"] == "kvd"}
    for tr in cfg.get("transports", ["ipc", "tcp", "kv+ipc", "kv+tcp"]):
        want = [("health", "", "blocking", t) for t in cfg["threads"]]
        want += [("get", "none", "blocking", t) for t in cfg["threads"]]
        want += [("put", "none", "blocking", t) for t in cfg["threads"]]
        want += [("get", "none", "pipelined", 1), ("put", "none", "pipelined", 1)]
        want += [("put", "always", "blocking", t) for t in cfg["threads"]]
        for op, sync, mode, t in want:
            check((tr, op, sync, mode, t) in have,
                  "kvd %s %s %s %s x%d: cell missing" % (tr, op, sync, mode, t))
    served = sum(c["ops"] for c in cells if c["section"] == "kvd")
    check(d["kvd"]["requests"] >= served,
          "kvd counted %d requests, the cells report %d" % (d["kvd"]["requests"], served))


YCSB_PHASES = [("load", "a"), ("run", "a"), ("run", "b"), ("run", "c"), ("run", "f"),
               ("run", "d"), ("load", "e"), ("run", "e")]


def check_ycsb(d):
    cfg = d["config"]
    rows = d["results"]
    check(d.get("kvd_exit") == "ok", "kvd did not exit 0: %s" % d.get("kvd_exit"))
    skipped = {s.get("backend") if isinstance(s, dict) else s for s in d["skipped"]}
    for b in ("kvd-ipc", "kvd-tcp", "engine"):
        check(b in cfg["backends"] and b not in skipped, "backend %s did not run" % b)
    index = {}
    for r in rows:
        index[(r["backend"], r["sync"], r["threads"], r["phase"], r["workload"])] = r
    for b in cfg["backends"]:
        if b in skipped:
            continue
        for sync in cfg["sync"]:
            for t in cfg["threads"]:
                for phase, w in YCSB_PHASES:
                    if w not in cfg["workloads"]:
                        continue
                    name = "%s %s x%d %s-%s" % (b, sync, t, phase, w)
                    r = index.get((b, sync, t, phase, w))
                    if not check(r is not None, "%s: row missing" % name):
                        continue
                    if not check(r["state"] == "ok", "%s: state %s (%s)" % (name, r["state"],
                                                                              r["error"])):
                        continue
                    check(r["planned"] > 0 and r["operations"] == r["planned"],
                          "%s: %d of %d operations" % (name, r["operations"], r["planned"]))
                    check(r["errors"] == 0, "%s: %d errors" % (name, r["errors"]))
                    check(sum(o["count"] for o in r["ops"]) >= r["operations"],
                          "%s: the operations' counts do not add up" % name)
                    for o in r["ops"]:
                        oname = "%s %s" % (name, o["op"])
                        check(o["errors"] == 0 and o["wrong"] == 0,
                              "%s: %d errors, %d wrong values" % (oname, o["errors"], o["wrong"]))
                        if w in "abcf" and o["op"] == "READ":
                            check(o["not_found"] == 0,
                                  "%s: %d loaded records not found" % (oname, o["not_found"]))
                        if o["op"] == "SCAN":
                            check(o.get("records", 0) > 0, "%s: scans returned nothing" % oname)
                        if o["count"] > 0:
                            latencies_in_order(o, oname)


def check_device(d):
    cfg = d["config"]
    cells = d["cells"]
    have = set()
    for c in cells:
        if c["op"] == "get":
            name = "get %dB x%d" % (c["value_size"], c["threads"])
            have.add(("get",))
        else:
            name = "put %dB %s x%d" % (c["value_size"], c["sync"], c["threads"])
            have.add(("put", c["value_size"], c["sync"], c["threads"]))
        if not check(c["state"] == "ok", "%s: state %s (%s)" % (name, c["state"], c["error"])):
            continue
        check(c["ops"] > 0 and c["ops_per_s"] > 0, "%s: no operations" % name)
        check(c["errors"] == 0, "%s: %d errors" % (name, c["errors"]))
        check(c["wrong"] == 0, "%s: %d wrong values" % (name, c["wrong"]))
        check(0 < c["p50_us"] <= c["p99_us"] <= c["p999_us"] <= c["max_us"],
              "%s: latencies out of order" % name)
        f = c["fio"]
        if f["state"] != "skipped":
            if check(f["state"] == "ok", "%s: fio %s (%s)" % (name, f["state"], f.get("error"))):
                check(f["iops"] > 0 and f["bw_bytes"] > 0, "%s: fio did no I/O" % name)
    for size in cfg["sizes"]:
        for sync in cfg["sync"]:
            for w in cfg["writers"]:
                check(("put", size, sync, w) in have,
                      "put %dB %s x%d: cell missing" % (size, sync, w))
    check(("get",) in have, "the get cell is missing")
    for t in d["targets"]:
        check(t["state"] in ("met", "missed", "not measured"),
              "target %s: state %s" % (t["target"], t["state"]))


def make_tls(d):
    """A CA and a server certificate for localhost and 127.0.0.1 in d: the
    kvbench options that use them."""
    steps = [
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvbench-ca",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout server.key -out server.csr -subj /CN=localhost",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' >server.ext",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile server.ext",
    ]
    for s in steps:
        subprocess.run(s, shell=True, cwd=d, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return ["--tls-cert", os.path.join(d, "server.pem"), "--tls-key",
            os.path.join(d, "server.key"), "--tls-ca", os.path.join(d, "ca.pem"),
            "--tls-server-name", "localhost"]


def main(argv):
    if len(argv) >= 2 and argv[1] == "--tls":
        with tempfile.TemporaryDirectory(prefix="kvbench-tls-") as d:
            return main([argv[0]] + argv[2:] + make_tls(d))
    if len(argv) >= 4 and argv[1] == "--file":
        with open(argv[2]) as f:
            d = json.load(f)
        command = argv[3]
    elif len(argv) >= 3:
        command = argv[2]
        p = subprocess.run(argv[1:] + ["--json"], stdout=subprocess.PIPE)
        out = p.stdout.decode(errors="replace")
        print(out, end="")
        if p.returncode != 0:
            print("kvbench exited %d" % p.returncode)
            return 1
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if not lines:
            print("kvbench printed no JSON result")
            return 1
        d = json.loads(lines[-1])
    else:
        print(__doc__)
        return 2
    check(d.get("ok") is True, "the result does not say ok")
    if command == "rpc":
        check_rpc(d)
    elif command == "ycsb":
        check_ycsb(d)
    elif command == "device":
        check_device(d)
    else:
        print("no checks for kvbench %s" % command)
        return 2
    for f in failures:
        print("FAILED: " + f)
    print("%s: %s" % (command, "results checked" if not failures else
                      "%d failed checks" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
