#!/usr/bin/env python3
"""test_metrics.py — kvd with metrics_listen on a free port serves /metrics in the Prometheus text format (parsed strictly here), its request counters, latency histograms, byte counts, connection gauges (per kv+ipc and nng listener) and tenant figures move with puts and gets and agree with `kvctl stats` and `kvctl stats --daemon`, a scrape is served while kvd holds over 1024 descriptors, and other paths get 404, other methods 405.

usage: test_metrics.py KVD KVCTL   (meson passes them)

The page is read over a plain socket (HTTP/1.0). The parser checks what a
Prometheus server would refuse: a sample before its family's # TYPE, a
family in two groups, a malformed line or label set, a sample name that is
not its family's (histograms: _bucket, _sum, _count), buckets that are not
cumulative, a +Inf bucket that is not _count. Exits 0 when every check
holds, 1 (one line per failed check) otherwise.
"""
import json
import os
import resource
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

failures = []

# Connections held open at the end, so that kvd's descriptors pass 1024
# (select()'s FD_SETSIZE): a scrape must still be served.
HELD = 1100


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, method, path):
    """(status, headers, body) of one HTTP/1.0 request."""
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(f"{method} {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        check(False, f"{method} {path}: {e}")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not data or len(lines[0].split()) < 2:
        return 0, {}, ""  # no answer: the connection was closed
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body.decode()


NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")


def parse(text):
    """{family: (type, {(name, frozenset(labels)): value})}; failures noted."""
    families = {}
    done = set()
    current = None
    check(text.endswith("\n"), "the page does not end with a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if not check(len(parts) == 4 and re.fullmatch(NAME, parts[2])
                         and parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"),
                         f"line {n}: bad TYPE line: {line}"):
                continue
            fam = parts[2]
            check(fam not in families, f"line {n}: family {fam} typed twice")
            if current is not None:
                done.add(current)
            families[fam] = (parts[3], {})
            current = fam
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not check(m, f"line {n}: not a sample line: {line!r}"):
            continue
        name, labeltext, value = m.group(1), m.group(2) or "", m.group(m.lastindex)
        try:
            v = float(value)
        except ValueError:
            check(False, f"line {n}: value {value!r} is not a number")
            continue
        labels = frozenset(re.findall(LABEL, labeltext))
        if not check(current is not None, f"line {n}: sample before any TYPE"):
            continue
        ftype = families[current][0]
        allowed = {current}
        if ftype == "histogram":
            allowed = {current + "_bucket", current + "_sum", current + "_count"}
        check(name in allowed, f"line {n}: sample {name} inside family {current}")
        check(current not in done, f"line {n}: family {current} in two groups")
        key = (name, labels)
        check(key not in families[current][1], f"line {n}: sample repeated: {line}")
        families[current][1][key] = v
    for fam, (ftype, samples) in families.items():
        if ftype != "histogram":
            continue
        series = {}
        for (name, labels), v in samples.items():
            rest = frozenset(kv for kv in labels if kv[0] != "le")
            series.setdefault(rest, {})
            if name.endswith("_bucket"):
                le = dict(labels)["le"]
                series[rest][float("inf") if le == "+Inf" else float(le)] = v
            else:
                series[rest][name[len(fam):]] = v
        for rest, s in series.items():
            buckets = sorted((k, v) for k, v in s.items() if isinstance(k, float))
            values = [v for _, v in buckets]
            check(values == sorted(values), f"{fam}{dict(rest)}: buckets not cumulative")
            check(buckets and buckets[-1][0] == float("inf"), f"{fam}{dict(rest)}: no +Inf")
            check(buckets and s.get("_count") == buckets[-1][1],
                  f"{fam}{dict(rest)}: _count is not the +Inf bucket")
            check("_sum" in s, f"{fam}{dict(rest)}: no _sum")
    return families


def value(families, fam, name=None, **labels):
    samples = families.get(fam, (None, {}))[1]
    return samples.get((name or fam, frozenset(labels.items())), 0.0)


def percentile_ns(families, method, pct):
    """The upper bound (ns) of the latency bucket holding the pct-th
    percentile of method, as Stats computes it; None past the last bound."""
    fam = "kvd_request_duration_seconds"
    buckets = sorted((float("inf") if dict(labels)["le"] == "+Inf" else float(dict(labels)["le"]), v)
                     for (name, labels), v in families.get(fam, (None, {}))[1].items()
                     if name == fam + "_bucket" and dict(labels).get("method") == method)
    count = buckets[-1][1] if buckets else 0
    if count == 0:
        return 0
    rank = -(-count * pct // 100)
    for le, cum in buckets:
        if cum >= rank:
            return None if le == float("inf") else round(le * 1e9)
    return None


def compare_daemon_stats(st, page, endpoint, nng_url, nng_idle):
    """`kvctl stats --daemon -o json` (st), taken just before the scrape
    (page) with nothing else sent in between, has the page's figures."""
    check(st.get("counting") is True, f"kvctl stats --daemon: counting is {st.get('counting')}")
    methods = {m["method"]: m for m in st.get("methods", [])}
    for method in ("Put", "Get"):
        m = methods.get(method)
        if not check(m is not None, f"kvctl stats --daemon has no method {method}"):
            continue
        fam = "kvd_requests_total"
        want = {dict(labels)["status"]: int(v) for (name, labels), v in page[fam][1].items()
                if dict(labels)["method"] == method and v != 0}
        check(m["statuses"] == want, f"{method}: statuses {m['statuses']}, the page's {want}")
        check(m["requests"] == sum(want.values()),
              f"{method}: requests {m['requests']}, the page's {sum(want.values())}")
        check(m["errors"] == value(page, "kvd_request_errors_total", method=method),
              f"{method}: errors {m['errors']}")
        hist = "kvd_request_duration_seconds"
        check(m["latency_count"] == value(page, hist, hist + "_count", method=method),
              f"{method}: latency_count {m['latency_count']}, "
              f"_count {value(page, hist, hist + '_count', method=method)}")
        page_sum = value(page, hist, hist + "_sum", method=method)
        check(abs(m["latency_sum_ns"] - page_sum * 1e9) < 2,
              f"{method}: latency_sum_ns {m['latency_sum_ns']}, _sum {page_sum}")
        for pct in (50, 90, 99):
            want = percentile_ns(page, method, pct)
            check(m[f"p{pct}_ns"] == want, f"{method}: p{pct}_ns {m[f'p{pct}_ns']}, the "
                                             f"page's buckets give {want}")
    # the Stats request's own bytes: received before its reply was built,
    # sent after (so the page has them, the reply could not)
    check(st.get("received_bytes") == value(page, "kvd_received_bytes_total"),
          f"received_bytes {st.get('received_bytes')}, "
          f"the page's {value(page, 'kvd_received_bytes_total')}")
    check(0 < st.get("sent_bytes", 0) < value(page, "kvd_sent_bytes_total"),
          f"sent_bytes {st.get('sent_bytes')}, the page's {value(page, 'kvd_sent_bytes_total')}")
    conns = {(c["transport"], c["listen"]): c["open"] for c in st.get("connections", [])}
    check(set(conns) == {("stream", endpoint), ("nng", nng_url), ("nng", nng_idle)},
          f"kvctl stats --daemon lists the listeners {sorted(conns)}")
    check(conns.get(("nng", nng_idle)) == 0,
          f"kvctl stats --daemon: {conns.get(('nng', nng_idle))} connections on {nng_idle}")
    stream = value(page, "kvd_connections", transport="stream", listen=endpoint)
    # kvctl's own connection may be gone by the scrape
    check(stream <= conns.get(("stream", endpoint), -1) <= stream + 1,
          f"stream connections {conns.get(('stream', endpoint))}, the page's {stream}")
    nng = value(page, "kvd_connections", transport="nng", listen=nng_url)
    # kvd's own probe of an ipc:// listener (once a second, a few ms) may be
    # in one of the two
    check(nng >= 1 and abs(conns.get(("nng", nng_url), -9) - nng) <= 1,
          f"nng connections {conns.get(('nng', nng_url))}, the page's {nng}")


def scrape(port):
    status, headers, body = http(port, "GET", "/metrics")
    check(status == 200, f"GET /metrics: status {status} (0: closed without an answer)")
    check(headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
          f"GET /metrics: content type {headers.get('content-type')}")
    return parse(body)


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n")[2])
        return 2
    kvd, kvctl = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="kvtest-metrics-")
    sock = f"{tmp}/kv.sock"
    endpoint = f"kv+ipc://{sock}"
    port = free_port()
    with open(f"{tmp}/kvd.conf", "w") as f:
        f.write(f"[kvd]\nmetrics_listen = 127.0.0.1:{port}\nmax_connections = {HELD + 100}\n")
    log = open(f"{tmp}/kvd.log", "w+")
    nng_sock = f"{tmp}/nng.sock"
    # a second nng listener, which no one connects to: counted apart from the first
    nng_tcp = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([kvd, "--config", f"{tmp}/kvd.conf", "--data-dir", f"{tmp}/data",
                             "--listen", endpoint, "--listen", f"ipc://{nng_sock}",
                             "--listen", nng_tcp], stderr=log)

    def kvctl_run(*args):
        return subprocess.run([kvctl, "-e", endpoint, *args], capture_output=True, text=True,
                              timeout=30)

    try:
        for _ in range(100):
            if kvctl_run("health").returncode == 0:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        else:
            check(False, "kvd did not answer health in 10 s")
        if proc.poll() is not None:
            log.seek(0)
            check(False, f"kvd exited {proc.returncode}: {log.read()}")
            return 1

        before = scrape(port)
        r = kvctl_run("-o", "json", "stats", "--daemon")
        check(r.returncode == 0, f"kvctl stats --daemon: {r.stderr}")
        st_before = json.loads(r.stdout) if r.returncode == 0 else {}
        n = 5
        for i in range(n):
            r = kvctl_run("put", f"k{i}", f"value {i}")
            check(r.returncode == 0, f"put k{i}: {r.stderr}")
            r = kvctl_run("get", f"k{i}")
            check(r.returncode == 0 and r.stdout == f"value {i}", f"get k{i}: {r.stderr}")
        r = kvctl_run("get", "missing")
        check(r.returncode != 0, "get of a missing key succeeded")
        # a connection held open shows in the stream transport's gauge
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.connect(sock)
        held.recv(8)  # the server's hello: the connection is adopted
        # and one on the nng ipc:// listener: the SP connection header of a REQ peer
        # ("\0SP\0", protocol 0x30), answered by REP's; nng then counts a pipe
        held_nng = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held_nng.connect(nng_sock)
        held_nng.sendall(bytes([0, ord("S"), ord("P"), 0, 0, 0x30, 0, 0]))
        held_nng.recv(8)
        time.sleep(0.2)
        r = kvctl_run("-o", "json", "stats", "--daemon")
        after = scrape(port)
        held.close()
        held_nng.close()
        if check(r.returncode == 0, f"kvctl stats --daemon: {r.stderr}"):
            st_after = json.loads(r.stdout)
            compare_daemon_stats(st_after, after, endpoint, f"ipc://{nng_sock}", nng_tcp)
            # and they moved: n puts, n + 1 gets
            for method, want in (("Put", n), ("Get", n + 1)):
                moved = [sum(m["requests"] for m in st.get("methods", [])
                             if m["method"] == method) for st in (st_before, st_after)]
                check(moved[1] - moved[0] == want, f"kvctl stats --daemon: {method} requests "
                                                   f"moved by {moved[1] - moved[0]}, want {want}")
            r = kvctl_run("stats", "--daemon")
            check(r.returncode == 0 and "requests Get: " in r.stdout and
                  "NOT_FOUND 1" in r.stdout and f"connections stream {endpoint}: " in r.stdout
                  and "latency Put: p50 <=" in r.stdout,
                  f"kvctl stats --daemon (text):\n{r.stdout}{r.stderr}")

        for method in ("Put", "Get"):
            d = (value(after, "kvd_requests_total", method=method, status="OK") -
                 value(before, "kvd_requests_total", method=method, status="OK"))
            check(d == n, f"kvd_requests_total{{method={method},status=OK}} moved by {d}, "
                          f"want {n}")
            c = (value(after, "kvd_request_duration_seconds",
                       "kvd_request_duration_seconds_count", method=method) -
                 value(before, "kvd_request_duration_seconds",
                       "kvd_request_duration_seconds_count", method=method))
            want = n + (method == "Get")  # the Get of a missing key too
            check(c == want, f"the {method} latency histogram counted {c} more, want {want}")
            check(value(after, "kvd_request_duration_seconds", "kvd_request_duration_seconds_sum",
                        method=method) > 0, f"the {method} latency sum is 0")
        check(value(after, "kvd_requests_total", method="Get", status="NOT_FOUND") == 1,
              "the Get of a missing key is not counted as NOT_FOUND")
        check(value(after, "kvd_request_errors_total", method="Get") == 1,
              "kvd_request_errors_total{method=Get} is not 1")
        for fam in ("kvd_received_bytes_total", "kvd_sent_bytes_total"):
            check(value(after, fam) > value(before, fam), f"{fam} did not grow")
        check(value(after, "kvd_connections", transport="stream", listen=endpoint) >= 1,
              "kvd_connections of the kv+ipc listener did not count the open connection")
        check(value(after, "kvd_connections", transport="nng", listen=f"ipc://{nng_sock}") >= 1,
              "kvd_connections of the nng ipc:// listener did not count the open connection")
        check(value(after, "kvd_connections", transport="nng", listen=nng_tcp) == 0 and
              ("kvd_connections", frozenset({("transport", "nng"), ("listen", nng_tcp)}))
              in after["kvd_connections"][1],
              f"kvd_connections of the idle {nng_tcp} listener is not 0")
        check(value(after, "kvd_tenant_keys", tenant="default") == n,
              f"kvd_tenant_keys{{tenant=default}} is "
              f"{value(after, 'kvd_tenant_keys', tenant='default')}, want {n}")
        check(value(after, "kvd_tenant_state", tenant="default", state="active") == 1,
              "the tenant default is not active")
        check(value(after, "kvd_tenant_syncs_total", tenant="default") >= 1,
              "no fdatasync counted for the tenant default")
        # the engine's histograms: every fdatasync and every batch in a bucket
        syncs = value(after, "kvd_tenant_syncs_total", tenant="default")
        check(value(after, "kvd_tenant_sync_duration_seconds",
                    "kvd_tenant_sync_duration_seconds_count", tenant="default") == syncs,
              "kvd_tenant_sync_duration_seconds_count is not kvd_tenant_syncs_total")
        check(value(after, "kvd_tenant_sync_duration_seconds",
                    "kvd_tenant_sync_duration_seconds_sum", tenant="default") > 0,
              "the fdatasync durations sum to 0")
        check(value(after, "kvd_tenant_batch_writes", "kvd_tenant_batch_writes_count",
                    tenant="default") == value(after, "kvd_tenant_batches_total",
                                               tenant="default"),
              "kvd_tenant_batch_writes_count is not kvd_tenant_batches_total")
        check(value(after, "kvd_tenant_batch_writes", "kvd_tenant_batch_writes_sum",
                    tenant="default") == value(after, "kvd_tenant_batched_writes_total",
                                               tenant="default"),
              "kvd_tenant_batch_writes_sum is not kvd_tenant_batched_writes_total")
        for fam in ("kvd_uptime_seconds", "kvd_workers", "kvd_tenants", "kvd_merges_total",
                    "kvd_merge_duration_seconds", "kvd_tenant_dead_bytes",
                    "kvd_tenant_activations_total", "kvd_tenant_batches_total"):
            check(fam in after, f"no {fam} on the page")

        # kvctl stats shows the figures the tenant metrics name
        r = kvctl_run("-o", "json", "stats")
        if check(r.returncode == 0, f"kvctl stats: {r.stderr}"):
            st = json.loads(r.stdout)
            now = scrape(port)
            for field in ("keys", "tombstones", "live_bytes", "disk_bytes", "dead_bytes",
                          "segments", "keydir_bytes", "last_version", "activations",
                          "merges", "syncs", "batches", "batched_writes"):
                fam = f"kvd_tenant_{field}"
                if fam not in now:
                    fam += "_total"
                check(st.get(field) == value(now, fam, tenant="default"),
                      f"kvctl stats {field}={st.get(field)}, "
                      f"{fam}={value(now, fam, tenant='default')}")
        r = kvctl_run("-o", "json", "stats", "--daemon")
        if check(r.returncode == 0, f"kvctl stats --daemon: {r.stderr}"):
            st = json.loads(r.stdout)
            now = scrape(port)
            for field, fam in (("tenants", "kvd_tenants"), ("active_tenants",
                                                            "kvd_tenants_active"),
                               ("workers", "kvd_workers"), ("keydir_bytes", "kvd_keydir_bytes")):
                check(st.get(field) == value(now, fam),
                      f"kvctl stats --daemon {field}={st.get(field)}, {fam}={value(now, fam)}")

        # many descriptors: the scrape's socket is numbered past 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < HELD + 200:
            print(f"(the open file limit {hard} is too low to hold {HELD} connections: "
                  "that check is left out)")
        else:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            many = []
            try:
                for _ in range(HELD):
                    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    many.append(c)
                    c.connect(sock)
                    c.recv(8)
                now = scrape(port)
                check(value(now, "kvd_connections", transport="stream", listen=endpoint) >= HELD,
                      f"with {HELD} connections held kvd_connections is "
                      f"{value(now, 'kvd_connections', transport='stream', listen=endpoint)}")
            finally:
                for c in many:
                    c.close()

        status, _, body = http(port, "GET", "/other")
        check(status == 404, f"GET /other: status {status}, want 404")
        status, headers, _ = http(port, "POST", "/metrics")
        check(status == 405 and "GET" in headers.get("allow", ""),
              f"POST /metrics: status {status}, Allow {headers.get('allow')}; want 405, GET")
        status, _, body = http(port, "HEAD", "/metrics")
        check(status == 200 and body == "", f"HEAD /metrics: status {status}, {len(body)} bytes")

        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        check(rc == 0, f"kvd exited {rc} after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if failures:
            log.seek(0)
            print("kvd's log:\n" + log.read())
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
