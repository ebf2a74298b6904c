"""Monitoring, end to end: list's service time, JSON and Prometheus output,
watch's events, and instances that stop on their own when what they stand on
goes away -- driven from the host with the Python client, read in the guest
with netblkctl."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
import time

from guest import NIC_MODELS
from nbtest import ROOT, client, instances, start, wait_for
import netblk as nbc

GUEST_FORWARDS = [7000]
P1 = "/dev/nvme0n1p1"
P2 = "/dev/nvme0n1p2"


def wait_no_instances(g):
    """The instances stop on their own: the module's reaper (a work item) looks
    when the NIC or the disk tells it, and stops them."""
    wait_for("every instance stopped", lambda: instances(g) == {}, detail=lambda: instances(g))


def start_watch(g, name):
    """netblkctl watch --json in the background, its lines in
    /tmp/watch-NAME.out; returns once it printed its first rates line (there
    must be an instance): it joins the events group before its first dump,
    so from then on it misses no event.  stop_watch(g, name) ends it."""
    out = f"/tmp/watch-{name}.out"
    g.check(f"rm -f {out}; (netblkctl watch --json --interval 0.5 > {out} 2>{out}.err & "
            f"echo $! > /tmp/watch-{name}.pid)")
    wait_for(f"watch's first rates line in {out}",
             lambda: [l for l in watch_lines(g, out) if l["type"] == "rates"],
             detail=lambda: g.run(f"cat {out} {out}.err")[1])
    return out


def watch_lines(g, out):
    return [json.loads(l) for l in g.check(f"cat {out}").splitlines() if l.strip()]


def stop_watch(g, name):
    g.run(f"kill $(cat /tmp/watch-{name}.pid) 2>/dev/null; cat /tmp/watch-{name}.out.err")


def wait_events(g, out, pred, what):
    """watch's lines once its events satisfy pred(events)."""
    def events():
        lines = watch_lines(g, out)
        return lines if pred([l for l in lines if l["type"] == "event"]) else None
    return wait_for(f"watch's {what} in {out}", events, detail=lambda: watch_lines(g, out))


def eth0_back(g):
    """eth0 up with its address and the default route again, and its link up."""
    g.run("ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0 2>/dev/null; "
          "ip route add default via 10.0.2.2 2>/dev/null; "
          "for i in $(seq 300); do grep -q up /sys/class/net/eth0/operstate && break; "
          "sleep 0.1; done", timeout=60)


def test_list_shows_service_time_after_traffic(netblk):
    g = netblk
    start(g, P1, 7000)
    text = g.check("netblkctl list")
    assert "service time us (arrival to reply): no samples yet" in text, text

    c = client(g, 7000)
    c.write(0, bytes(range(256)) * 16)
    c.read(0, 64 << 10)
    text = g.check("netblkctl list")
    m = re.search(r"service time us \(arrival to reply\): p50 ([\d.]+), p99 ([\d.]+), "
                  r"p99\.9 ([\d.]+), max ([\d.]+)", text)
    assert m, text
    p50, p99, p999, mx = map(float, m.groups())
    assert 0 < p50 <= p99 <= p999 <= mx, text
    assert re.search(r"data in place [\d.]+ KiB, copied 0 B", text), text


def test_json_latency_agrees_with_its_buckets(netblk):
    g = netblk
    start(g, P1, 7000)
    c = client(g, 7000)
    for i in range(20):
        c.read(i * 4096, 4096)
    e = instances(g)[7000]
    lat = e["latency"]
    s = e["stats"]
    # every datagram of every answer the worker sends is a sample: 20 READs of 4
    # datagrams, one INFO, and the HELLO that opened the session (its first
    # HELLO's cookie is answered by the receive path, and is none)
    assert lat["count"] == sum(n for _, n in lat["buckets"]) == 20 * 4 + 2, lat
    assert lat["linear_limit"] == 128 and lat["sub_buckets"] == 64
    assert 0 < lat["p50_us"] <= lat["p99_us"] <= lat["p999_us"] <= lat["max_ns"] / 1000
    assert s["reads"] == 20 and s["read_bytes"] == 20 * 4096, s
    assert s["bytes_copied"] == 0 and s["bytes_zerocopy"] >= 20 * 4096, s


def promtool_check(text):
    """promtool (Debian's prometheus package) on an exposition: the check is
    Prometheus's own, not a parser of ours."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"promtool check metrics: {r.stdout}{r.stderr}\n{text}"


def sample(text, name, **labels):
    """The value of the one sample of `name` whose labels include `labels`."""
    values = []
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            values.append(float(value))
    assert len(values) == 1, (name, labels, values)
    return values[0]


def test_prometheus_output_passes_promtool_and_joins(netblk):
    """The exposition of a real instance passes promtool, labels the device
    as the kernel names it (node_exporter's device label), counts refusals
    by status and service time by op with an exact sum."""
    g = netblk
    start(g, P1, 7000)
    c = client(g, 7000)
    c.write(8192, b"\x55" * 2048)
    c.read(0, 16384)
    size = c.info().size
    assert c.request(nbc.OP_READ, size, 512).status == errno.ERANGE
    text = g.check("netblkctl stats --prometheus")
    promtool_check(text)
    me = {"port": "7000", "device": "nvme0n1p1"}
    writes = sample(text, "netblk_writes_total", **me)
    assert writes >= 1 and sample(text, "netblk_write_bytes_total", **me) == 2048
    assert sample(text, "netblk_refused_total", status="ERANGE", **me) == 1
    assert sample(text, "netblk_refused_total", status="EAGAIN", **me) == 0
    assert sample(text, "netblk_instance_info", path=P1, read_only="false", **me) == 1
    assert sample(text, "netblk_op_service_time_seconds_count", op="write", **me) == writes
    buckets = [float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith("netblk_service_time_seconds_bucket{")]
    assert buckets == sorted(buckets), "cumulative buckets never go down"
    count = sample(text, "netblk_service_time_seconds_count", **me)
    assert buckets[-1] == count > 0
    # the histogram's sum and the ops' sums are the same samples, each exact
    ops_sum = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                  if l.startswith("netblk_op_service_time_seconds_sum{"))
    assert abs(sample(text, "netblk_service_time_seconds_sum", **me) - ops_sum) < 1e-6


def test_exporter_serves_the_metrics_over_http(netblk):
    g = netblk
    start(g, P1, 7000)
    g.check("(netblkctl exporter --listen 127.0.0.1:9575 > /tmp/exp.out 2>&1 & "
            "echo $! > /tmp/exp.pid)")
    try:
        def scrape():
            rc, out = g.run("wget -q -O - http://127.0.0.1:9575/metrics")
            return out if rc == 0 else None

        body = wait_for("the exporter's /metrics", scrape,
                        detail=lambda: g.run("cat /tmp/exp.out")[1])
        promtool_check(body)
        assert sample(body, "netblk_slots", port="7000", device="nvme0n1p1") > 0
        rc, out = g.run("wget -q -O - http://127.0.0.1:9575/nothing")
        assert rc != 0, out
        # a second exporter on the port says so and fails
        rc, out = g.run("netblkctl exporter --listen 127.0.0.1:9575")
        assert rc == 1 and "cannot listen on 127.0.0.1:9575" in out, out
    finally:
        rc, out = g.run("kill $(cat /tmp/exp.pid); sleep 1; cat /tmp/exp.out; "
                        "kill -0 $(cat /tmp/exp.pid) 2>/dev/null && echo STILL RUNNING")
    assert "serving the metrics at http://127.0.0.1:9575/metrics" in out, out
    assert "STILL RUNNING" not in out, out


def test_watch_reports_rates_and_a_stop(netblk):
    g = netblk
    start(g, P1, 7000)
    out = start_watch(g, "rates")
    try:
        c = client(g, 7000)
        for i in range(30):
            c.read(i * 1024, 1024)

        def reads_seen():
            """Reads the rates lines account for, over their intervals."""
            rates = [l for l in watch_lines(g, out) if l["type"] == "rates" and l["port"] == 7000]
            return sum(r["reads_per_s"] * r["interval_s"] for r in rates), rates

        # every one of the 30 READs (all after watch's first dump) is in some
        # interval's rate, however many intervals they took
        wait_for("rates lines that account for 30 reads", lambda: reads_seen()[0] > 29.5,
                 detail=reads_seen)
        total, rates = reads_seen()
        assert any(r["reads_per_s"] > 0 for r in rates), rates
        assert abs(total - 30) < 0.5, (total, rates)
        g.check("netblkctl stop 7000")
        lines = wait_events(g, out, lambda ev: any(e["event"] == "stopped" for e in ev),
                            "stopped event")
    finally:
        stop_watch(g, "rates")
    stops = [l for l in lines if l["type"] == "event" and l["event"] == "stopped"]
    assert stops and stops[0]["port"] == 7000 and stops[0]["reason"] == "asked", lines


def test_nic_down_stops_the_instance_and_says_why(netblk):
    g = netblk
    start(g, P1, 7000, "nic-loss=stop")
    start(g, P2, 7001, "ro", "nic-loss=stop")
    out = start_watch(g, "nic")
    try:
        g.check("ip link set eth0 down")
        wait_no_instances(g)
        events = wait_events(g, out, lambda ev: {e["port"] for e in ev
                                                 if e["event"] == "stopped"} >= {7000, 7001},
                             "stopped events of 7000 and 7001")
        stops = {e["port"]: e for e in events if e["type"] == "event" and e["event"] == "stopped"}
        assert set(stops) == {7000, 7001}, events
        for e in stops.values():
            assert e["reason"] == "nic_gone" and "eth0 went down" in e["message"], e
        assert "stopped serving /dev/nvme0n1p1 on port 7000: eth0 went down" in g.dmesg()
    finally:
        stop_watch(g, "nic")
        eth0_back(g)
    # and it serves again once the NIC is back
    start(g, P1, 7000)
    assert client(g, 7000).info().size == 256 << 20


def test_removed_device_stops_the_instance(netblk):
    g = netblk
    d = "/sys/kernel/config/nullb/nbmon"
    g.check("modprobe null_blk nr_devices=0 && "
            "(grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config) && "
            f"mkdir {d} && echo 16 > {d}/size && echo 1 > {d}/memory_backed && echo 1 > {d}/power")
    try:
        start(g, "/dev/nbmon", 7000)
        out = start_watch(g, "dev")
        try:
            g.check(f"echo 0 > {d}/power")
            wait_no_instances(g)
            events = wait_events(g, out, lambda ev: any(e["event"] == "stopped" for e in ev),
                                 "stopped event")
        finally:
            stop_watch(g, "dev")
        stops = [e for e in events if e["type"] == "event" and e["event"] == "stopped"]
        assert stops and stops[0]["reason"] == "device_gone", events
        assert "/dev/nbmon was removed" in stops[0]["message"]
    finally:
        remove_nullb(g, d)


def remove_nullb(g, d):
    """Stop what serves the null_blk device at configfs dir d, then remove it
    and null_blk (retried: a stopped instance lets go of its disk a moment
    after it is gone from the list)."""
    g.run("netblkctl stop all >/dev/null 2>&1; "
          f"for i in $(seq 150); do echo 0 > {d}/power 2>/dev/null; rmdir {d} 2>/dev/null && break; "
          "sleep 0.2; done; "
          "for i in $(seq 50); do rmmod null_blk 2>/dev/null && break; sleep 0.2; done", timeout=90)


def test_client_bench_reports_percentiles(netblk):
    g = netblk
    start(g, P1, 7000, "ro")
    import os
    import subprocess
    # --timeout: 20 s of silence before a request fails, however busy the host;
    # timeout=: only against a hang
    out = subprocess.run([sys.executable, "-m", "netblk", "127.0.0.1",
                          str(g.host_port(7000)), "bench", "--mode", "randread", "--size", "1k",
                          "--window", "8", "--seconds", "2", "--timeout", "1", "--json"],
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "client")),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["ops"] > 0 and r["errors"] == 0, r
    lat = r["latency_us"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"], r
    assert instances(g)[7000]["stats"]["reads"] >= r["ops"]


def test_disk_errors_are_answered_counted_and_announced(netblk):
    """null_blk's bad blocks fail reads of sectors 0-7: the chunk is answered
    EIO, the rest of the READ is served, io_errors counts it, and watch gets
    I/O error events, rate limited to one a second: one for 12 errors within
    a second, at most one a second however long they took."""
    g = netblk
    d = "/sys/kernel/config/nullb/nberr"
    g.check("modprobe null_blk nr_devices=0 && "
            "(grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config) && "
            f"mkdir {d} && echo 16 > {d}/size && echo 1 > {d}/memory_backed && "
            f"echo 1 > {d}/power && echo '+0-7' > {d}/badblocks")
    try:
        start(g, "/dev/nberr", 7000, "ro")
        out = start_watch(g, "err")
        try:
            c = client(g, 7000)
            t0 = time.monotonic()
            r = c.request(nbc.OP_READ, 0, 2048)
            by_offset = {ch.offset: ch for ch in r.chunks}
            assert by_offset[0].status == 5 and by_offset[0].data == b"", r.chunks
            assert by_offset[1024].status == 5
            ok = c.request(nbc.OP_READ, 4096, 1024)
            assert ok.status == 0 and len(ok.data) == 1024
            more = 10
            for _ in range(more):
                c.request(nbc.OP_READ, 0, 512)
            s = instances(g)[7000]["stats"]
            assert s["io_errors"] == 2 + more, s
            # the reaper looks once a second: what it would announce of these is
            # announced after this (a longer wait only loosens the bound below)
            g.check("sleep 2")
            events = wait_events(g, out, lambda ev: any(e["event"] == "io_error" for e in ev),
                                 "io_error event")
            elapsed = time.monotonic() - t0
        finally:
            stop_watch(g, "err")
        errors = [e for e in events if e["type"] == "event" and e["event"] == "io_error"]
        # announced at most once a second from the first error on: at most one
        # more than the seconds between the first error and the last look
        assert 1 <= len(errors) <= 2 + elapsed, (f"{len(errors)} io_error events for "
                                                 f"{2 + more} errors in {elapsed:.1f} s", events)
        assert errors[0]["port"] == 7000 and "/dev/nberr" in errors[0]["message"], errors
    finally:
        remove_nullb(g, d)


def test_nic_removed_under_the_instance(netblk):
    """The NIC's driver goes (rmmod virtio_net, or vmxnet3): the instances on
    it stop, releasing the NIC so that its unregistration completes, and say
    why."""
    g = netblk
    driver = NIC_MODELS[g.nic][1]
    start(g, P1, 7000)
    start(g, P2, 7001, "ro")
    try:
        g.check(f"rmmod {driver}", timeout=60)
        assert instances(g) == {}
        d = g.dmesg()
        assert "stopped serving /dev/nvme0n1p1 on port 7000: eth0" in d, d[-2000:]
        assert g.check("cat /sys/module/netblk/parameters/leaked_slots").strip() == "0"
    finally:
        g.run(f"modprobe {driver}; "
              "for i in $(seq 300); do test -e /sys/class/net/eth0 && break; sleep 0.1; done",
              timeout=60)
        eth0_back(g)
    start(g, P1, 7000)
    assert client(g, 7000).info().size == 256 << 20
