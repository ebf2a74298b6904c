"""Where a guest's instructions go, by kernel symbol: two tables of the TCG
plugin's pcs=on mode (ci/insn_count.py InsnCounter.blocks) subtracted, each
block's instructions (executions x its length) given to the symbol its
start address falls in, by the guest's own /proc/kallsyms (read as root at
run time: KASLR moves it every boot; modules' symbols carry [module]).

A block starts in one symbol and, straight-line, stays in it: a block that
runs on past a function's end into the next (a tail call compiled as a
fall-through) is counted to the first.  User space is one bucket, [user].
Standard library only.
"""

from __future__ import annotations

import bisect
import re

USER = "[user]"

# Groups, first match wins, tried on "symbol [module]".
GROUPS = (
    # new pages zeroed (init_on_alloc=1, Debian's default): TCG counts each
    # byte of a `rep stosb` as an instruction, 4096 a page
    ("page zeroing", r"^clear_page(_erms|_rep|_orig)?$"),
    ("copy", r"^(memcpy|memmove|__memcpy|copy_page|_copy_(to|from)_iter|copy_(to|from)_user|"
             r"rep_movs|__copy|skb_copy|csum_partial_copy|_copy_|memcpy_orig|"
             r"simple_copy_to_iter|__skb_datagram_iter|skb_copy_datagram_iter)"),
    ("netblk core", r"\[(netblk|nbudp)\]$"),
    ("nvme target (nvmet)", r"\[(nvmet|nvmet_tcp)\]$"),
    ("nvme driver", r"^(nvme_|__nvme)|\[nvme(_core)?\]$"),
    ("tx", r"^(virtnet_xdp_xmit|__virtnet_xdp_xmit|xdp_xmit|bq_xmit|dev_queue_xmit|"
           r"__dev_queue_xmit|dev_hard_start_xmit|sch_direct_xmit|start_xmit|xmit_skb|virtqueue_add_outbuf|free_old_xmit|ip_(finish_)?output|ip_local_out|"
           r"__ip_queue_xmit|ip_queue_xmit|udp_send_skb|neigh_|__dev_xmit|validate_xmit|"
           r"netif_skb_features|skb_network_protocol|qdisc_|pfifo_fast_|__qdisc_run|"
           r"dev_qdisc_enqueue)"),
    ("XDP/driver rx", r"^(virtnet_|receive_|xdp_|bpf_prog_|__xdp|bpf_xdp|napi_|__napi|"
                      r"page_pool|virtqueue_get|virtqueue_add_inbuf|detach_buf|try_fill_recv|"
                      r"add_recvbuf|vring_|virtqueue_)|\[virtio_net\]$"),
    ("bio/blk-mq", r"^(bio_|__bio|blk_|__blk|submit_bio|bvec_|mempool_|bdev_|"
                   r"should_fail_bio|rq_qos|wbt_|dd_|dd_dispatch|blkcg_|blkg_|"
                   r"kyber_|elv_|__submit_bio|iomap_dio|blkdev_)"),
    ("completion", r"(end_io|complete|_endio)"),
    ("tcp/ip/skb (rx, tx)", r"^(tcp_|__tcp|ip_|__ip|inet_|sk_|__sk|skb_|__skb|kfree_skb|consume_skb|"
                      r"__netif|netif_|__netdev|netdev_|udp_|__udp|ipv4_|raw_|dst_|"
                      r"__inet|sock_|release_sock|lock_sock|__release_sock|__dev_|"
                      r"csum_|nf_|eth_|build_skb|__build_skb|napi_build)"),
    ("sched/irq/idle", r"^(schedule|__schedule|pick_|enqueue_|dequeue_|update_|"
                       r"try_to_wake|wake_up|__wake|ttwu|finish_task|context_switch|"
                       r"__switch|switch_|irq|__irq|do_IRQ|common_interrupt|handle_|"
                       r"asm_|__sysvec|sysvec_|tick_|hrtimer|__hrtimer|timerqueue|"
                       r"ktime_|do_idle|cpuidle|default_idle|arch_cpu_idle|rcu_|__rcu|"
                       r"raw_spin|_raw_spin|queued_spin|native_|__do_softirq|do_softirq|"
                       r"irq_exit|__local_bh|local_bh|run_ksoftirqd|kthread|worker_|"
                       r"process_one_work|__queue_work|queue_work|psi_|sched_|"
                       r"set_next|put_prev|check_preempt|resched|x2apic|__x2apic|"
                       r"kvm_|pv_|__pv)"),
    ("alloc", r"^(kmem_cache|__kmem|kmalloc|__kmalloc|kfree|__slab|slab_|___slab|"
              r"alloc_pages|__alloc_pages|get_page_from|free_unref|__free_pages|"
              r"rmqueue|__rmqueue|page_frag|__page_frag|free_pages|put_page|__put_page|"
              r"__folio_put|folio_|mod_objcg|obj_cgroup|refill_obj|__memcg|memcg)"),
)
_GROUPS = [(name, re.compile(rx)) for name, rx in GROUPS]


def group(symbol: str) -> str:
    for name, rx in _GROUPS:
        if rx.search(symbol):
            return name
    return "other"


class Kallsyms:
    """The text symbols of a guest's /proc/kallsyms, to name addresses."""

    def __init__(self, text: str):
        syms = []
        for line in text.splitlines():
            f = line.split()
            if len(f) < 3 or f[1] not in "tTwW":
                continue
            name = f[2] + (f" {f[3]}" if len(f) > 3 else "")
            syms.append((int(f[0], 16), name))
        syms.sort()
        self.addrs = [a for a, _ in syms]
        self.names = [n for _, n in syms]
        if not self.addrs or not any(self.addrs):
            raise ValueError("no addresses in kallsyms: it was not read as root")

    def name(self, addr: int) -> str:
        if addr < 1 << 63:
            return USER
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.names[i] if i >= 0 else "[unknown]"


def delta(before: dict, after: dict) -> dict[tuple[int, int], int]:
    """Each block's executions between two tables."""
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0) > 0}


def by_symbol(blocks: dict[tuple[int, int], int], syms: Kallsyms) -> dict[str, int]:
    """Instructions by symbol of a table or a delta."""
    out: dict[str, int] = {}
    for (vaddr, n_insns), execs in blocks.items():
        name = syms.name(vaddr)
        out[name] = out.get(name, 0) + n_insns * execs
    return out


def per_request(busy: dict[str, int], busy_s: float, idle: dict[str, int], idle_s: float,
                iops: float) -> dict[str, float]:
    """Instructions a request by symbol: the busy window's rate less the
    idle window's, over the requests' rate (as bench_client's rows)."""
    names = set(busy) | set(idle)
    out = {}
    for name in names:
        rate = busy.get(name, 0) / busy_s - idle.get(name, 0) / idle_s
        out[name] = rate / iops
    return out


def groups(per_sym: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, v in per_sym.items():
        g = group(name)
        out[g] = out.get(g, 0.0) + v
    return out
