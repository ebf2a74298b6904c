#!/usr/bin/python3
"""netblk benchmark: netblk against nbd-server and the local disk, in one
QEMU guest (ci/guest.py), on the same emulated NVMe partition
(/dev/nvme0n1p1, 256 MiB), driven from the same host.  Standard library only.

    ci/bench.py [--seconds 4] [--sizes 1k,4k] [--windows 1,64]
                [--workloads randread,randwrite]
                [--systems netblk-v1,netblk,netblk-auth-header,netblk-auth-full,nbd-server,local]
                [--rounds 1]
                [--nic virtio|vmxnet3] [--out bench/host/results.json]
    (make bench BENCH_ARGS='--seconds 4'; --nic vmxnet3 writes
    bench/host/results-vmxnet3.json unless --out says otherwise)

Systems:
  netblk-v1   protocol v1's module, netblkctl and netblk-load (main before the
              v2 merge, built by ci/build-v1.sh: make bench-v1), run as netblk
              below: what v2 costs against v1 (ratio netblk/netblk-v1).  The
              v2 module is unloaded while it runs.
  netblk      `modprobe netblk; netblkctl start /dev/nvme0n1p1 7000` in the
              guest; tools/netblk-load on the host at 127.0.0.1:<UDP forward>.
              At MTU 1500 max_io is 1024: a 4 KiB read is one READ answered
              in 4 datagrams; a 4 KiB write is 4 WRITEs of 1 KiB sent at once,
              complete when all 4 are answered (one request, one latency
              sample, 4 slots).
  netblk-auth-header, netblk-auth-full
              the same with a key (`key=FILE auth=header|full`; netblk-load
              --key): what tagging every datagram costs, against netblk
              without a key in the same run.
  nbd-server  nbd-server (Debian) in the guest exporting /dev/nvme0n1p1 on TCP
              10809; fio --ioengine=nbd on the host at nbd://127.0.0.1:<TCP
              forward>.  nbd-server has no O_DIRECT: it goes through the guest's
              page cache, so the cache is dropped before each run and `sync`
              runs (and is counted) before the CPU is read afterwards.
  local       fio --ioengine=io_uring (libaio if io_uring fails) --direct=1 on
              /dev/nvme0n1p1 inside the guest, same size and depth.  fio's own
              start and exit (measured with a one-request run) are subtracted
              from its CPU time.

Guest CPU per request: the `cpu` line of the guest's /proc/stat before and
after a run, user+nice+system+irq+softirq+steal (everything but idle and
iowait; guest/guest_nice are already inside user/nice), in jiffies of
USER_HZ=100 -> 10000 us each, divided by the requests the run completed.

--rounds N runs every system N times over, in turn (v1, v2, v1, v2, ...),
so that a host whose load drifts during the run weighs on each alike; the
ratios are of the medians over the rounds.

Under TCG absolute numbers mean little; the ratios within one run count.
"""

from __future__ import annotations

import argparse
import json
import re
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guest import NIC, NIC_MODELS, ROOT, Guest, GuestError  # noqa: E402

LOAD = ROOT / "tools" / "netblk-load" / "netblk-load"
DEV = "/dev/nvme0n1p1"
DEV_SIZE = 256 << 20
NETBLK_PORT = 7000
NBD_PORT = 10809
USER_HZ = 100
SYSTEMS = ("netblk-v1", "netblk", "netblk-auth-header", "netblk-auth-full", "nbd-server", "local")
# Protocol v1 as it was (ci/build-v1.sh, make bench-v1): its module goes into
# the guest beside v2's, and the two take turns on the same partition.
V1_DIR = ROOT / "build" / "v1" / "src"
V1_KO = V1_DIR / "kmod" / "netblk.ko"
V1_NETBLKCTL = V1_DIR / "tools" / "netblkctl" / "netblkctl"
V1_LOAD = V1_DIR / "tools" / "netblk-load" / "netblk-load"
KEY_HEX = "000102030405060708090a0b0c0d0e0f"  # a bench's key: nothing to protect


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_size(s: str) -> int:
    s = s.strip().lower()
    for suf, shift in (("k", 10), ("m", 20), ("g", 30)):
        if s.endswith(suf):
            return int(s[:-1]) << shift
    return int(s)


def fmt_size(n: int) -> str:
    return f"{n >> 10}k" if n % 1024 == 0 else str(n)


# --------------------------------------------------------------------------
# guest CPU
# --------------------------------------------------------------------------
def parse_cpu(stat_text: str) -> int:
    """Busy jiffies (all CPUs) from /proc/stat's `cpu` line."""
    for line in stat_text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            v = [int(x) for x in f[1:]] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            return user + nice + system + irq + softirq + steal
    raise ValueError(f"no cpu line in /proc/stat: {stat_text[:200]!r}")


def host_udp_drops() -> int:
    """This host's UDP RcvbufErrors (/proc/net/snmp): datagrams a full socket
    buffer dropped -- e.g. QEMU user-net's socket for the forwarded port."""
    try:
        lines = [l.split() for l in Path("/proc/net/snmp").read_text().splitlines()
                 if l.startswith("Udp:")]
        return int(lines[1][lines[0].index("RcvbufErrors")])
    except (OSError, ValueError, IndexError):
        return 0


def guest_busy(g: Guest) -> int:
    return parse_cpu(g.check("head -n 1 /proc/stat", timeout=30))


def cpu_us(jiffies: int) -> float:
    return jiffies * 1e6 / USER_HZ


# --------------------------------------------------------------------------
# fio output
# --------------------------------------------------------------------------
def fio_result(doc: dict, writing: bool) -> dict:
    job = doc["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio job error {job['error']}")
    side = job["write" if writing else "read"]
    lat = side.get("lat_ns", {}).get("percentile") or side.get("clat_ns", {}).get("percentile") or {}

    def pct(q: str) -> float:
        for k, v in lat.items():
            if abs(float(k) - float(q)) < 1e-6:
                return round(v / 1000.0, 1)
        return 0.0

    return {"ops": side["total_ios"], "iops": round(side["iops"], 1),
            "p50_us": pct("50"), "p99_us": pct("99"), "p999_us": pct("99.9")}


def fio_args(workload: str, size: int, window: int, seconds: float, extra=()) -> list[str]:
    return ["--name=bench", f"--rw={workload}", f"--bs={size}", f"--iodepth={window}",
            f"--size={DEV_SIZE}", "--offset=0", "--time_based", f"--runtime={seconds:g}",
            "--randrepeat=1", "--lat_percentiles=1", "--thread", "--output-format=json",
            *extra]


def extract_json(text: str) -> dict:
    """fio may print lines before its JSON: take from the first '{'."""
    i = text.find("{")
    if i < 0:
        raise ValueError(f"no JSON in: {text[-500:]!r}")
    return json.loads(text[i:])


# --------------------------------------------------------------------------
# the three systems
# --------------------------------------------------------------------------
class Bench:
    def __init__(self, g: Guest, seconds: float, poll_us: int = 0):
        self.g = g
        self.seconds = seconds
        self.poll_us = poll_us
        self.local_engine = "io_uring"
        self.local_overhead_j = None
        self.auth = None
        self.v1 = False

    # ---- netblk
    def netblk_setup(self, auth: str | None = None) -> None:
        self.auth = auth
        self.v1 = False
        opts = ""
        if auth:
            self.g.check(f"echo {KEY_HEX} > /tmp/bench.key && chmod 600 /tmp/bench.key")
            opts = f" key=/tmp/bench.key auth={auth}"
        self.g.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        self.g.check(f"netblkctl start {DEV} {NETBLK_PORT} poll={self.poll_us}{opts}")
        log(self.g.check("netblkctl list"))

    def netblk_v1_setup(self) -> None:
        """v1's module in place of v2's (both are `netblk`): rmmod, insmod."""
        self.auth = None
        self.v1 = True
        self.g.check("! grep -q '^netblk ' /proc/modules || rmmod netblk")
        self.g.check("insmod /root/netblk-v1.ko")
        self.g.check(f"netblkctl-v1 start {DEV} {NETBLK_PORT} poll={self.poll_us}")
        log(self.g.check("netblkctl-v1 list"))

    def netblk_v1_teardown(self) -> None:
        self.g.check(f"netblkctl-v1 stop {NETBLK_PORT} && rmmod netblk")

    def netblk_run(self, workload: str, size: int, window: int) -> dict:
        hp = self.g.host_port(NETBLK_PORT)
        cmd = [str(V1_LOAD if self.v1 else LOAD), "127.0.0.1", str(hp), "--mode", workload,
               "--size", str(size),
               "--window", str(window), "--seconds", f"{self.seconds:g}",
               "--range", f"0:{DEV_SIZE}", "--seed", "1", "--json"]
        if self.auth:
            key = Path(tempfile.gettempdir()) / "netblk-bench.key"
            key.write_text(KEY_HEX + "\n")
            cmd += ["--key", str(key), "--auth", self.auth]
        t0 = time.monotonic()
        d0 = host_udp_drops()
        b0 = guest_busy(self.g)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.seconds + 120)
        b1 = guest_busy(self.g)
        d1 = host_udp_drops()
        wall = time.monotonic() - t0
        if not r.stdout.strip():
            raise RuntimeError(f"netblk-load failed (exit {r.returncode}): {r.stderr.strip()}")
        out = json.loads(r.stdout)
        lat = out["latency_us"]
        return {"ops": out["ops"], "iops": out["iops"], "p50_us": lat["p50"], "p99_us": lat["p99"],
                "busy_j": b1 - b0, "wall_s": round(wall, 2), "window_used": out["window"],
                "datagrams_per_request": out["datagrams_per_request"],
                "retries": out["retries"], "fast_resends": out.get("fast_resends", 0),
                "busy": out["busy"], "errors": out["errors"],
                "host_udp_rcvbuf_errors": d1 - d0,
                "first_error": out["first_error"]}

    def netblk_stats(self) -> dict:
        inst = json.loads(self.g.check("netblkctl list --json"))
        for i in inst:
            if i["port"] == NETBLK_PORT:
                return i["stats"]
        raise RuntimeError(f"no instance on port {NETBLK_PORT} in netblkctl list --json")

    def netblk_teardown(self) -> None:
        self.g.check(f"netblkctl stop {NETBLK_PORT}")

    def netblk_checksum_cost(self) -> dict | None:
        """What verifying the UDP checksums of 1 KiB writes costs: the share of
        the guest's CPU samples (perf record -a) in the core's checksum code
        while netblk-load writes at window 64.  QEMU's user-mode network
        checksums every datagram it hands the guest, so there is no run
        without them to compare with; the profile is the measure.  None
        without perf."""
        if not self.g.run("command -v perf")[0] == 0:
            return None
        hp = self.g.host_port(NETBLK_PORT)
        secs = max(4, int(self.seconds) + 2)
        load = subprocess.Popen([str(LOAD), "127.0.0.1", str(hp), "--mode", "randwrite",
                                 "--size", "1024", "--window", "64", "--seconds", str(secs),
                                 "--range", f"0:{DEV_SIZE}", "--seed", "2", "--json"],
                                stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1)
            out = self.g.check(
                f"cd /tmp && perf record -a -e cpu-clock -F 1000 -o /tmp/cs.data -- sleep "
                f"{secs - 2} >/dev/null 2>&1 && perf report -i /tmp/cs.data --no-children "
                f"--sort sym --stdio 2>/dev/null", timeout=secs + 180)
        finally:
            load.communicate(timeout=secs + 60)
        share = module = 0.0
        samples = None
        for line in out.splitlines():
            m = re.match(r"#\s*Samples:\s*(\d+\S*)", line)
            if m:
                samples = m.group(1)
            m = re.match(r"\s*([\d.]+)%\s+\[k\]\s+(.*)", line)
            if not m:
                continue
            pct, sym = float(m.group(1)), m.group(2)
            if "ones_sum" in sym or "udp_checksum_ok" in sym:
                share += pct
            if "nb::" in sym or "netblk_" in sym:
                module += pct
        return {"workload": "randwrite 1k window 64", "samples": samples,
                "checksum_pct_of_guest_samples": round(share, 2),
                "netblk_pct_of_guest_samples": round(module, 2)}

    # ---- nbd-server
    def nbd_setup(self) -> None:
        self.g.check(f"nbd-server -C /nonexistent -p /run/nbd-server.pid {NBD_PORT} {DEV} "
                     f">/tmp/nbd-server.log 2>&1; sleep 1; kill -0 $(cat /run/nbd-server.pid)"
                     f" || {{ cat /tmp/nbd-server.log; exit 1; }}")

    def nbd_run(self, workload: str, size: int, window: int) -> dict:
        hp = self.g.host_port(NBD_PORT, "tcp")
        with tempfile.TemporaryDirectory(prefix="netblk-bench.") as tmp:
            out_file = Path(tmp) / "fio.json"
            cmd = ["fio", "--ioengine=nbd", f"--uri=nbd://127.0.0.1:{hp}",
                   *fio_args(workload, size, window, self.seconds), f"--output={out_file}"]
            self.g.check("sync; echo 3 > /proc/sys/vm/drop_caches")
            t0 = time.monotonic()
            b0 = guest_busy(self.g)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.seconds + 120)
            t1 = time.monotonic()
            self.g.check("sync", timeout=120)
            b1 = guest_busy(self.g)
            wall = time.monotonic() - t0
            log(f"bench:   fio {t1 - t0:.1f} s, then sync {wall - (t1 - t0):.1f} s")
            text = out_file.read_text() if out_file.exists() else ""
            if r.returncode != 0 or not text.strip():
                raise RuntimeError(f"fio (nbd) failed (exit {r.returncode}): "
                                   f"{(r.stderr + r.stdout).strip()[-1500:]}")
        res = fio_result(extract_json(text), workload.endswith("write"))
        res["busy_j"] = b1 - b0
        res["wall_s"] = round(wall, 2)
        return res

    def nbd_teardown(self) -> None:
        self.g.run("kill $(cat /run/nbd-server.pid) 2>/dev/null; killall nbd-server 2>/dev/null; "
                   "sleep 1; true")

    # ---- local
    def _local_fio(self, args: list[str], timeout: float) -> tuple[dict, int]:
        """Run fio in the guest between two /proc/stat reads, in one command."""
        script = ("head -n 1 /proc/stat; echo @@; "
                  f"fio {' '.join(args)} --output=/tmp/fio.json >/tmp/fio.log 2>&1; rc=$?; "
                  "echo @@; head -n 1 /proc/stat; echo @@; "
                  "if [ $rc -ne 0 ]; then cat /tmp/fio.log; exit $rc; fi; cat /tmp/fio.json")
        t0 = time.monotonic()
        rc, out = self.g.run(script, timeout=int(timeout))
        self.last_wall = round(time.monotonic() - t0, 2)
        parts = out.split("@@\n")
        if rc != 0 or len(parts) < 4:
            raise RuntimeError(f"fio in the guest failed (exit {rc}): {out[-1500:]}")
        return extract_json(parts[3]), parse_cpu(parts[2]) - parse_cpu(parts[0])

    def local_setup(self) -> None:
        # io_uring, or libaio where io_uring is refused; and what fio costs
        # to start and exit (one request), subtracted from every local run.
        base = [f"--filename={DEV}", "--direct=1", "--ioengine=io_uring"]
        try:
            self._local_fio(base + fio_args("randread", 4096, 1, 1, ["--number_ios=1"]), 120)
        except RuntimeError as e:
            log(f"bench: io_uring failed in the guest, using libaio: {e}")
            self.local_engine = "libaio"
        costs = []
        for _ in range(3):
            args = [f"--filename={DEV}", "--direct=1", f"--ioengine={self.local_engine}",
                    *fio_args("randread", 4096, 1, 1, ["--number_ios=1"])]
            _, j = self._local_fio(args, 120)
            costs.append(j)
        self.local_overhead_j = min(costs)
        log(f"bench: local fio ({self.local_engine}) start+exit costs {cpu_us(min(costs)):.0f} us "
            f"of guest CPU (min of {costs} jiffies)")

    def local_run(self, workload: str, size: int, window: int) -> dict:
        args = [f"--filename={DEV}", "--direct=1", f"--ioengine={self.local_engine}",
                *fio_args(workload, size, window, self.seconds)]
        doc, j = self._local_fio(args, self.seconds + 120)
        res = fio_result(doc, workload.endswith("write"))
        res["busy_j"] = max(0, j - (self.local_overhead_j or 0))
        res["busy_j_raw"] = j
        res["wall_s"] = self.last_wall
        res["engine"] = self.local_engine
        return res


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------
def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if a and b else None


def medians(rows: list[dict]) -> dict:
    """(system, workload, size, window) -> the median over the rounds of
    iops, p99_us and cpu_us_per_req."""
    runs: dict = {}
    for r in rows:
        runs.setdefault((r["system"], r["workload"], r["size"], r["window"]), []).append(r)
    return {key: {k: statistics.median(r[k] for r in rs)
                  for k in ("iops", "p99_us", "cpu_us_per_req")} | {"rounds": len(rs)}
            for key, rs in runs.items()}


def ratios(rows: list[dict]) -> list[dict]:
    by = medians(rows)
    out = []
    for (system, wl, size, window), r in by.items():
        if system != "netblk":
            continue
        for other in ("netblk-v1", "netblk-auth-header", "netblk-auth-full", "nbd-server",
                      "local"):
            o = by.get((other, wl, size, window))
            if not o:
                continue
            # a key's cost reads best as what it adds (keyed / unkeyed), and
            # v2's as what it costs against v1 (netblk / netblk-v1)
            keyed = other.startswith("netblk-auth")
            a, b = (o, r) if keyed else (r, o)
            out.append({"workload": wl, "size": size, "window": window, "vs": other,
                        "rounds": min(r["rounds"], o["rounds"]),
                        "what": f"{other}/netblk" if a is o else f"netblk/{other}",
                        "iops": ratio(a["iops"], b["iops"]),
                        "p99": ratio(a["p99_us"], b["p99_us"]),
                        "cpu_per_req": ratio(a["cpu_us_per_req"], b["cpu_us_per_req"])})
    return out


def table(rows: list[dict], rats: list[dict]) -> str:
    lines = [f"{'system':<11} {'workload':<9} {'size':>5} {'win':>4} {'iops':>9} {'p50_us':>9} "
             f"{'p99_us':>9} {'cpu_us/req':>10}"]
    for r in rows:
        lines.append(f"{r['system']:<11} {r['workload']:<9} {fmt_size(r['size']):>5} "
                     f"{r['window']:>4} {r['iops']:>9.1f} {r['p50_us']:>9.1f} {r['p99_us']:>9.1f} "
                     f"{r['cpu_us_per_req']:>10.1f}")
    if rats:
        lines.append("")
        lines.append(f"{'ratio':<18} {'workload':<9} {'size':>5} {'win':>4} {'iops':>7} "
                     f"{'p99':>7} {'cpu/req':>8}")
        for x in rats:
            def f(v):
                return f"{v:>7.2f}" if v is not None else f"{'-':>7}"
            lines.append(f"{x['what']:<18} {x['workload']:<9} {fmt_size(x['size']):>5} "
                         f"{x['window']:>4} {f(x['iops'])} {f(x['p99'])} {f(x['cpu_per_req']):>8}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description="netblk vs nbd-server vs local disk, in the test guest")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_SECONDS", 4)),
                    help="seconds per run (4)")
    ap.add_argument("--sizes", default="1k,4k")
    ap.add_argument("--windows", default="1,64")
    ap.add_argument("--workloads", default="randread,randwrite")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every system this many times over, in turn (1)")
    ap.add_argument("--out", default=None,
                    help="bench/host/results.json (--nic vmxnet3: bench/host/results-vmxnet3.json)")
    ap.add_argument("--nic", default=NIC, choices=sorted(NIC_MODELS),
                    help="the guest's NIC model (NETBLK_NIC, virtio by default)")
    ap.add_argument("--memory", type=int, default=2048, help="guest MiB (2048)")
    ap.add_argument("--host-rmem", type=int, default=0, metavar="BYTES",
                    help="set this host's net.core.rmem_default to BYTES while the guest runs "
                         "(QEMU user-net's UDP socket gets it; restored after); 0: leave it")
    ap.add_argument("--poll", type=int, default=0, metavar="US",
                    help="the netblk instance's poll= (0: the worker sleeps when idle)")
    ap.add_argument("--cmdline", default="", metavar="ARGS",
                    help="more guest kernel arguments, e.g. nvme.poll_queues=1")
    a = ap.parse_args()
    if a.out is None:
        suffix = "" if a.nic == "virtio" else f"-{a.nic}"
        a.out = str(ROOT / "bench" / "host" / f"results{suffix}.json")

    sizes = [parse_size(s) for s in a.sizes.split(",")]
    windows = [int(w) for w in a.windows.split(",")]
    workloads = a.workloads.split(",")
    systems = a.systems.split(",")
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r} (one of {', '.join(SYSTEMS)})")
    for w in workloads:
        if w not in ("randread", "randwrite", "read", "write"):
            ap.error(f"unknown workload {w!r}")

    missing = []
    if any(s.startswith("netblk") for s in systems) and not LOAD.exists():
        missing.append(f"{LOAD.relative_to(ROOT)} (make load)")
    if "netblk-v1" in systems:
        missing += [f"{p.relative_to(ROOT)} (make bench-v1)"
                    for p in (V1_KO, V1_NETBLKCTL, V1_LOAD) if not p.exists()]
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    fio = shutil.which("fio")
    nbd = shutil.which("nbd-server") or ("/usr/bin/nbd-server" if Path("/usr/bin/nbd-server").exists() else None)
    if ({"nbd-server", "local"} & set(systems)) and not fio:
        missing.append("fio (apt-get install fio)")
    if "nbd-server" in systems and not nbd:
        missing.append("nbd-server (apt-get install nbd-server)")
    if missing:
        log("bench: missing: " + ", ".join(missing))
        return 2

    programs = {}
    perf = shutil.which("perf")
    if perf and "netblk" in systems:
        programs["/usr/bin/perf"] = Path(perf)	# the checksum's cost, from a profile
    if fio and "local" in systems:
        programs["/usr/bin/fio"] = Path(fio)
    if nbd and "nbd-server" in systems:
        programs["/usr/bin/nbd-server"] = Path(nbd)
    files = {}
    if "netblk-v1" in systems:
        programs["/usr/sbin/netblkctl-v1"] = V1_NETBLKCTL
        files["/root/netblk-v1.ko"] = V1_KO

    rmem_path = Path("/proc/sys/net/core/rmem_default")
    rmem_old = None
    if a.host_rmem:
        rmem_old = rmem_path.read_text().strip()
        rmem_path.write_text(str(a.host_rmem))
        log(f"bench: net.core.rmem_default {rmem_old} -> {a.host_rmem} while the guest runs")
    try:
        return run_all(a, sizes, windows, workloads, systems, programs, files)
    finally:
        if rmem_old is not None:
            rmem_path.write_text(rmem_old)


def system_steps(b: Bench, system: str):
    """setup(), run(workload, size, window) -> dict, teardown() of a system."""
    return {
        "netblk-v1": (b.netblk_v1_setup, b.netblk_run, b.netblk_v1_teardown),
        "netblk": (b.netblk_setup, b.netblk_run, b.netblk_teardown),
        "netblk-auth-header": (lambda: b.netblk_setup("header"), b.netblk_run,
                               b.netblk_teardown),
        "netblk-auth-full": (lambda: b.netblk_setup("full"), b.netblk_run, b.netblk_teardown),
        "nbd-server": (b.nbd_setup, b.nbd_run, b.nbd_teardown),
        "local": (b.local_setup, b.local_run, lambda: None),
    }[system]


def make_row(system: str, wl: str, size: int, window: int, rnd: int, res: dict,
             guest_cpus: int) -> dict:
    """One run's row of results.json, logged as it is made."""
    ops = res["ops"]
    row = {"system": system, "workload": wl, "size": size, "window": window, "round": rnd,
           "iops": res["iops"], "p50_us": res["p50_us"], "p99_us": res["p99_us"],
           "cpu_us_per_req": round(cpu_us(res["busy_j"]) / ops, 1) if ops else 0.0,
           "ops": ops, "guest_busy_jiffies": res["busy_j"]}
    for k in ("wall_s", "datagrams_per_request", "window_used", "retries", "fast_resends",
              "busy", "errors", "first_error", "host_udp_rcvbuf_errors", "engine", "busy_j_raw"):
        if k in res:
            row[k] = res[k]
    if res.get("wall_s"):
        # how busy the guest's CPUs were over the measured interval
        row["guest_cpu_util"] = round(
            cpu_us(res["busy_j"]) / 1e6 / (res["wall_s"] * guest_cpus), 3)
    extra = ""
    if system.startswith("netblk"):
        extra = (f"  retries {res.get('retries')} (fast {res.get('fast_resends')}) "
                 f"busy {res.get('busy')} errors {res.get('errors')} "
                 f"host-udp-drops {res.get('host_udp_rcvbuf_errors')}")
    log(f"bench: {system:<10} {wl:<9} {fmt_size(size):>3} w{window:<3} "
        f"{row['iops']:>9.1f} IOPS  p50 {row['p50_us']:.0f} us  "
        f"p99 {row['p99_us']:.0f} us  {row['cpu_us_per_req']:.1f} us CPU/req" + extra)
    return row


def zero_copy_counters(st: dict) -> dict:
    return {k: st.get(k) for k in ("bytes_zerocopy", "bytes_copied", "requests", "busy", "bad",
                                   "refused", "io_errors", "replies_dropped")}


def run_all(a, sizes, windows, workloads, systems, programs, files) -> int:
    t_start = time.monotonic()
    rows: list[dict] = []
    zero_copy = checksum = None
    failures: list[str] = []
    with Guest("bench", checks=False, forwards=[("udp", 0, NETBLK_PORT), ("tcp", 0, NBD_PORT)],
               extra_programs=programs, extra_files=files,
               require_project=any(s.startswith("netblk") for s in systems),
               memory=a.memory, cmdline=a.cmdline, nic=a.nic) as g:
        b = Bench(g, a.seconds, a.poll)
        guest_cpus = int(g.check("grep -c '^processor' /proc/cpuinfo").strip())
        for rnd in range(a.rounds):
            for system in SYSTEMS:
                if system not in systems:
                    continue
                log(f"bench: {system}" + (f" (round {rnd + 1} of {a.rounds})" if a.rounds > 1
                                          else ""))
                setup, run, teardown = system_steps(b, system)
                setup()
                for wl in workloads:
                    for size in sizes:
                        for window in windows:
                            try:
                                res = run(wl, size, window)
                            except (RuntimeError, ValueError, subprocess.TimeoutExpired,
                                    json.JSONDecodeError) as e:
                                msg = f"{system} {wl} {fmt_size(size)} w{window}: {e}"
                                log(f"bench: FAILED {msg}")
                                failures.append(msg)
                                continue
                            rows.append(make_row(system, wl, size, window, rnd, res,
                                                 guest_cpus))
                if system == "netblk" and rnd == 0:
                    checksum = b.netblk_checksum_cost()
                    if checksum:
                        log(f"bench: UDP checksum verification: "
                            f"{checksum['checksum_pct_of_guest_samples']}% of the guest's CPU "
                            f"samples under {checksum['workload']} (all of netblk's code: "
                            f"{checksum['netblk_pct_of_guest_samples']}%)")
                if system == "netblk":
                    zero_copy = zero_copy_counters(b.netblk_stats())
                teardown()

    rats = ratios(rows)
    result = {
        "rows": rows,
        "ratios": rats,
        "zero_copy": zero_copy,
        "checksum_cost": checksum,
        "failures": failures,
        "meta": {
            "seconds_per_run": a.seconds,
            "rounds": a.rounds,
            "netblk_v1": (V1_DIR.parent / ".commit").read_text().strip()
                         if "netblk-v1" in systems else None,
            "netblk_poll_us": a.poll,
            "guest_cmdline": a.cmdline,
            "device": DEV, "device_bytes": DEV_SIZE,
            "guest": f"QEMU TCG, {guest_cpus} vCPUs, {a.memory} MiB",
            "nic": f"{a.nic} ({NIC_MODELS[a.nic][1]})",
            "host": platform.node(), "host_cpus": os.cpu_count(),
            "local_engine": b.local_engine if "local" in systems else None,
            "local_fio_start_exit_jiffies": b.local_overhead_j,
            "user_hz": USER_HZ,
            "host_rmem_default": int(Path("/proc/sys/net/core/rmem_default").read_text()),
            "netblk_4k_write": "4 WRITEs of max_io=1024 bytes sent together; one request, "
                               "complete when all 4 are answered",
            "wall_seconds": round(time.monotonic() - t_start, 1),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(rows, rats))
    if zero_copy:
        print(f"\nnetblk zero copy: bytes_zerocopy {zero_copy['bytes_zerocopy']}  "
              f"bytes_copied {zero_copy['bytes_copied']}")
    if checksum:
        print(f"netblk UDP checksum verification: {checksum['checksum_pct_of_guest_samples']}% of "
              f"the guest's CPU samples under {checksum['workload']}")
    print(f"\nwrote {out} ({result['meta']['wall_seconds']} s)")
    if failures:
        print("FAILED runs:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GuestError as e:
        log(f"bench: {e}")
        sys.exit(1)
