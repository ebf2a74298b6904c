#!/usr/bin/python3
"""Two runs of one benchmark, before and after a change: what moved.

    ci/bench_compare.py BEFORE.json AFTER.json

ci/bench_client.py's results: per row netblk's own server instructions a
request, and its ratio to the NVMe/TCP row beside it (server and client
instructions, IOPS) before and after.  ci/bench.py's: per comparison
(netblk/nbd-server, ...) the geometric mean of after/before of each ratio.
Either way the spread is printed with the mean, so noise shows as noise.
"""
import json
import math
import sys

PAIRS = {"netblk": "nvme-tcp", "netblk-9000": "nvme-tcp-9000", "md-netblk": "md-nvme-tcp"}


def median(rows, key):
    v = sorted(r[key] for r in rows if r.get(key) is not None)
    return v[len(v) // 2] if v else None


def summary(name, logs):
    if logs:
        print(f"{name}: after/before geometric mean {math.exp(sum(logs) / len(logs)):.3f} over "
              f"{len(logs)} rows, range {math.exp(min(logs)):.3f}..{math.exp(max(logs)):.3f}")


def peers(before, after):
    def rows(d):
        out = {}
        for r in d["rows"]:
            out.setdefault((r["system"], r["workload"], r["bs"], r["depth"]), []).append(r)
        return out

    b, a = rows(before), rows(after)
    logs = {"server ratio": [], "client ratio": [], "iops ratio": [], "netblk's own server": []}
    fmt = lambda x: f"{x:.2f}" if x is not None else "-"
    print(f"{'system':12} {'row':18} {'srv Ki b/a':>15} {'srv ratio b/a':>14} "
          f"{'cli ratio b/a':>14} {'iops ratio b/a':>15}")
    for key in sorted(a):
        system, workload, bs, depth = key
        vs = (PAIRS.get(system), workload, bs, depth)
        if key not in b or vs not in a or vs not in b:
            continue

        def ratio(r, k):
            p, q = median(r[key], k), median(r[vs], k)
            return p / q if p and q else None

        own = (median(b[key], "server_kinsn_per_req"), median(a[key], "server_kinsn_per_req"))
        srv = (ratio(b, "server_kinsn_per_req"), ratio(a, "server_kinsn_per_req"))
        cli = (ratio(b, "client_kinsn_per_req"), ratio(a, "client_kinsn_per_req"))
        iops = (ratio(b, "iops"), ratio(a, "iops"))
        print(f"{system:12} {workload}:{bs // 1024}k:{depth:<7} "
              + " ".join(f"{fmt(p) + '/' + fmt(q):>14}" for p, q in (own, srv, cli, iops)))
        for name, (p, q) in zip(logs, (srv, cli, iops, own)):
            if p and q:
                logs[name].append(math.log(q / p))
    for name, v in logs.items():
        summary(name, v)


def host(before, after):
    def ratios(d):
        return {(r["workload"], r["size"], r["window"], r["what"]): r for r in d["ratios"]}

    b, a = ratios(before), ratios(after)
    by = {}
    for k in a:
        for m in ("iops", "p99", "cpu_per_req"):
            if k in b and a[k].get(m) and b[k].get(m):
                by.setdefault((k[3], m), []).append(math.log(a[k][m] / b[k][m]))
    for (what, m), v in sorted(by.items()):
        summary(f"{what:28} {m:12}", v)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = (json.load(open(p)) for p in sys.argv[1:])
    if before["rows"] and "bs" in before["rows"][0]:
        peers(before, after)
    else:
        host(before, after)


if __name__ == "__main__":
    main()
