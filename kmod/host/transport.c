// SPDX-License-Identifier: GPL-2.0
/*
 * The block-device client's UDP socket, its first transport
 * (netblk_host_udp_ops: the request engine reaches it through that table
 * alone): a kernel socket a queue, connected to the instance from a port
 * of its own (the server NIC's RSS spreads the queues), its answers taken in
 * the socket's softirq (encap_rcv, as WireGuard and VXLAN take theirs) and
 * handed up to the function the engine gave at open; its datagrams
 * recorded under its queue's lock and sent after it, a run of them of
 * one size in one UDP GSO send.  A WRITE's data goes out from the request's
 * own pages (MSG_ZEROCOPY: the skb holds the pages, nothing is copied)
 * unless the block layer gave a page the network may not hold (slab
 * memory) or the route's device has no scatter-gather (virtio-net without
 * checksum offload), when the socket copies it.  A READ answer's data is
 * copied once, from the skb into the request's pages.
 *
 * An skb may hold a request's pages long after the send: in a qdisc (netem,
 * a busy link), in the device's ring.  The request must not end before it
 * lets go -- its writer may fill the buffer with other bytes at once, and
 * the WRITE would carry them, to a server whose session is alive and
 * number fresh -- so each send in place carries a ubuf_info (msg_ubuf, as
 * io_uring's send-zc does) that holds the requests whose pages it carries
 * until the last skb holding it is freed.  That is no copy and, on the
 * normal path, no wait: an answer comes after its datagram left the device.
 *
 * The udp_tunnel module's helpers (udp_sock_create, setup_udp_tunnel_sock,
 * udp_tunnel_xmit_skb) are not used: a kernel without a tunnel driver (the
 * debug kernel of ci/debug-kernel.sh) has no udp_tunnel at all, and the core
 * UDP exports do the same in a few lines.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bvec.h>
#include <linux/highmem.h>
#include <linux/net.h>
#include <linux/netdevice.h>
#include <linux/slab.h>
#include <linux/udp.h>
#include <net/ip.h>
#include <net/sock.h>
#include <net/udp.h>
#include <net/udp_tunnel.h>

#include "host.h"

#define NETBLK_HOST_SNDBUF	(4 << 20)	/* a window of 64 KiB requests, and more */
#define NETBLK_HOST_FRAG	64		/* a WRITE header's piece of a page */

/* The frame handed up with an answer (netblk_host_udp_read's): the skb, where its data is. */
struct netblk_host_frame {
	struct sk_buff *skb;
	u32 data_offset;
};

static struct workqueue_struct *netblk_host_wq;

/* ---- recording, under the lock ---- */

/* Let go of the datagram's pages; its hold on its request is the caller's to put. */
static void netblk_host_release_data(struct netblk_host_pending *p)
{
	u16 i;

	/* bvecs[0] is the WRITE header's frag, the rest the request's pages (or copies) */
	for (i = 1; i < p->nr_bvecs; i++)
		put_page(p->bvecs[i].bv_page);
	if (p->header_frag)
		page_frag_free(p->header_frag);
	p->nr_bvecs = 0;
	p->header_frag = NULL;
}

/* Under the lock: a datagram recorded and not sent, let go of. */
static void netblk_host_release_pending(struct netblk_host_queue *q,
					struct netblk_host_pending *p)
{
	netblk_host_release_data(p);
	if (p->rq)
		netblk_host_rq_put_locked(q, p->rq);
	p->rq = NULL;
}

/*
 * The data lies in more pieces of memory than a datagram's bvecs hold
 * (small direct-I/O segments under a jumbo max_io): copy it, once, into
 * pages of its own (order 0: no large atomic allocation), which then go out
 * like the request's.  bvecs[0] is the header's.
 */
static bool netblk_host_bounce_data(struct netblk_host_queue *q, struct netblk_host_pending *p,
				    struct request *rq, u32 at, u32 len)
{
	struct req_iterator iter;
	struct iov_iter to;
	struct bio_vec bv;
	u32 skip = at, done;

	for (done = 0; done < len; done += PAGE_SIZE) {
		struct page *page = alloc_page(GFP_ATOMIC | __GFP_NOWARN);

		if (!page || p->nr_bvecs == NETBLK_HOST_BVECS) {
			if (page)
				__free_page(page);
			return false;	/* the caller puts the pages taken */
		}
		bvec_set_page(&p->bvecs[p->nr_bvecs++], page, min_t(u32, PAGE_SIZE, len - done), 0);
	}
	iov_iter_bvec(&to, ITER_DEST, &p->bvecs[1], p->nr_bvecs - 1, len);
	p->bounced = true;
	rq_for_each_segment(bv, rq, iter) {
		u32 n;

		if (skip >= bv.bv_len) {
			skip -= bv.bv_len;
			continue;
		}
		n = min(bv.bv_len - skip, (u32)iov_iter_count(&to));
		if (copy_page_to_iter(bv.bv_page, bv.bv_offset + skip, n, &to) != n)
			return false;
		skip = 0;
		if (!iov_iter_count(&to))
			goto copied;	/* out of both loops: break leaves one bio's only */
	}
	return false;
copied:
	p->len = len;
	p->spliced = true;
	return true;
}

/* A piece of a page for a WRITE's header: the skb takes it as its first frag. */
static bool netblk_host_take_header(struct netblk_host_queue *q, struct netblk_host_pending *p)
{
	struct page *page;

	p->header_frag = netblk_page_frag_alloc_align(&q->frags, NETBLK_HOST_FRAG, GFP_ATOMIC,
						      NETBLK_HOST_FRAG);
	if (!p->header_frag)
		return false;
	page = virt_to_head_page(p->header_frag);
	if (page != q->header_page) {
		q->header_page = page;
		q->stats.header_pages++;	/* the last one used up: another */
	}
	memcpy(p->header_frag, p->header, NETBLK_HOST_HEADER_SIZE);
	return true;
}

/*
 * Hold the pages of @len bytes of request @rq's data from byte @at, until
 * the datagram is sent (the skbs take their own) or dropped.
 */
static bool netblk_host_take_data(struct netblk_host_queue *q, struct netblk_host_pending *p,
				  struct request *rq, u32 at, u32 len)
{
	struct req_iterator iter;
	struct bio_vec bv;
	u32 skip = at, left = len;
	bool in_place = true;

	if (!rq || !netblk_host_take_header(q, p))
		return false;
	bvec_set_virt(&p->bvecs[0], p->header_frag, NETBLK_HOST_HEADER_SIZE);
	p->nr_bvecs = 1;
	rq_for_each_segment(bv, rq, iter) {
		u32 n;

		if (skip >= bv.bv_len) {
			skip -= bv.bv_len;
			continue;
		}
		if (p->nr_bvecs == NETBLK_HOST_BVECS) {
			/* give back what was taken, and copy it all */
			while (p->nr_bvecs > 1)
				put_page(p->bvecs[--p->nr_bvecs].bv_page);
			return netblk_host_bounce_data(q, p, rq, at, len);
		}
		n = min(bv.bv_len - skip, left);
		get_page(bv.bv_page);
		bvec_set_page(&p->bvecs[p->nr_bvecs++], bv.bv_page, n, bv.bv_offset + skip);
		in_place &= sendpage_ok(bv.bv_page);
		skip = 0;
		left -= n;
		/*
		 * Out of both loops (rq_for_each_segment is one a bio): a break
		 * would go on to the next bio, adding a bvec of 0 bytes for each.
		 */
		if (!left)
			goto taken;
	}
	return false;
taken:
	p->len = len;
	p->spliced = in_place;
	return true;
}

static void netblk_host_udp_record(struct netblk_host_queue *q, const u8 *header, u32 tag,
				   struct request *rq, u32 at, u32 len)
{
	struct netblk_host_pending *p;

	if (q->pending_count == NETBLK_HOST_PENDING) {
		q->stats.tx_dropped++;	/* its timer sends it again */
		return;
	}
	p = &q->pending[(q->pending_head + q->pending_count) % NETBLK_HOST_PENDING];
	memcpy(p->header, header, NETBLK_HOST_HEADER_SIZE);
	p->tag = tag;
	p->rq = rq;	/* NULL: HELLO, INFO */
	if (p->rq)
		netblk_host_rq_get(p->rq);
	p->purged = false;
	p->header_frag = NULL;
	p->nr_bvecs = 0;
	p->len = 0;
	p->spliced = false;
	p->bounced = false;
	if (len && !netblk_host_take_data(q, p, p->rq, at, len)) {
		netblk_host_release_pending(q, p);
		q->stats.tx_dropped++;
		return;
	}
	q->pending_count++;
}

static bool netblk_host_udp_recorded(struct netblk_host_queue *q)
{
	return q->pending_count;
}

static void netblk_host_udp_purge(struct netblk_host_queue *q, u32 tag)
{
	u32 i;

	for (i = 0; i < q->pending_count; i++) {
		struct netblk_host_pending *p =
			&q->pending[(q->pending_head + i) % NETBLK_HOST_PENDING];

		if (p->tag == tag && !p->purged) {
			netblk_host_release_pending(q, p);
			p->purged = true;
		}
	}
}

/* ---- sending, after the lock ---- */

/* A UDP payload's most: a GSO send is one IPv4 datagram until the device segments it. */
#define NETBLK_HOST_GSO_BYTES	(IP_MAX_MTU - sizeof(struct iphdr) - sizeof(struct udphdr))
static_assert(NETBLK_HOST_TX_BATCH <= UDP_MAX_SEGMENTS);
/* a datagram sent in place is its pieces as they are: one skb must take them all */
static_assert(NETBLK_HOST_BVECS <= MAX_SKB_FRAGS);

static u32 netblk_host_datagram_bytes(const struct netblk_host_pending *p)
{
	return NETBLK_HOST_HEADER_SIZE + p->len;
}

/* The skb takes a run's data as page frags: spliced data on a route with scatter-gather. */
static bool netblk_host_run_in_place(const struct netblk_host_tx *tx,
				     const struct netblk_host_pending *p)
{
	return p->len && p->spliced && tx->route_sg;
}

/*
 * How many of @p[0..@n) go out in one send: GSO cuts a payload into
 * datagrams of the first one's size, so a run is datagrams of that size,
 * the last one possibly shorter, all of one kind (headers alone, or data
 * spliced or not).  A run the skb takes in place holds at most
 * MAX_SKB_FRAGS pieces, a datagram's header and its bvecs, none merged
 * with the next (a header stands between): with more the socket fails
 * the send (EMSGSIZE) once it has built most of the skb.
 */
static u32 netblk_host_run_length(const struct netblk_host_tx *tx,
				  const struct netblk_host_pending *p, u32 n)
{
	u32 size = netblk_host_datagram_bytes(p), total = size, frags = p->nr_bvecs, i;
	bool in_place = netblk_host_run_in_place(tx, p);

	if (tx->gso_refused)
		return 1;
	for (i = 1; i < n; i++) {
		u32 bytes = netblk_host_datagram_bytes(&p[i]);

		if (bytes > size || !p[i].len != !p->len || p[i].spliced != p->spliced ||
		    total + bytes > NETBLK_HOST_GSO_BYTES)
			break;
		if (in_place && frags + p[i].nr_bvecs > MAX_SKB_FRAGS)
			break;
		frags += p[i].nr_bvecs;
		total += bytes;
		if (bytes < size)
			return i + 1;
	}
	return i;
}

/* The route's device takes pages in its skbs (else the socket copies spliced data). */
static bool netblk_host_route_sg(struct sock *sk)
{
	struct dst_entry *dst = sk_dst_get(sk);
	bool sg = dst && dst->dev && (dst->dev->features & NETIF_F_SG);

	dst_release(dst);
	return sg;
}

/* The message of @n datagrams from @p: headers alone from a kvec each, data from bvecs. */
static void netblk_host_fill_msg(struct netblk_host_tx *tx, struct msghdr *msg,
				 const struct netblk_host_pending *p, u32 n)
{
	u32 i, nr = 0, bytes = 0;

	if (!p->len) {
		for (i = 0; i < n; i++)
			tx->kvecs[i] = (struct kvec){ (void *)p[i].header, NETBLK_HOST_HEADER_SIZE };
		iov_iter_kvec(&msg->msg_iter, ITER_SOURCE, tx->kvecs, n, n * NETBLK_HOST_HEADER_SIZE);
		return;
	}
	for (i = 0; i < n; i++) {
		memcpy(&tx->bvecs[nr], p[i].bvecs, p[i].nr_bvecs * sizeof(p[i].bvecs[0]));
		nr += p[i].nr_bvecs;
		bytes += netblk_host_datagram_bytes(&p[i]);
	}
	iov_iter_bvec(&msg->msg_iter, ITER_SOURCE, tx->bvecs, nr, bytes);
}

/* ---- sends in place: the requests held until the skbs let go ---- */

/*
 * A send's hold on the requests whose pages its skbs carry.  Its ubuf_info
 * goes with the send (msg_ubuf): each skb that takes the pages in place
 * takes a reference, and the last put -- the sender's own, or the last skb's
 * as it is freed, sent or dropped, in whatever softirq or task frees it --
 * puts the requests' holds.
 */
struct netblk_host_zc {
	struct ubuf_info ubuf;
	bool skb_seen;		/* an skb held it: the data went in place */
	u16 nr;
	struct request *rqs[];	/* each held once */
};

static void netblk_host_zc_complete(struct sk_buff *skb, struct ubuf_info *uarg,
				    bool zerocopy_success)
{
	struct netblk_host_zc *zc = container_of(uarg, struct netblk_host_zc, ubuf);
	u16 i;

	if (skb)
		WRITE_ONCE(zc->skb_seen, true);
	if (!refcount_dec_and_test(&uarg->refcnt))
		return;
	/* the module's text until the end: netblk_host_exit() waits for it */
	rcu_read_lock();
	for (i = 0; i < zc->nr; i++)
		netblk_host_rq_put(zc->rqs[i]);
	kfree(zc);
	rcu_read_unlock();
}

NETBLK_UBUF_OPS(netblk_host_zc_ops, netblk_host_zc_complete);

/*
 * The requests whose own pages @p[0..@n) carry (a bounce copy is ours),
 * each once: how many, and into @rqs, held, when it is given.
 */
static u32 netblk_host_zc_hold(const struct netblk_host_pending *p, u32 n, struct request **rqs)
{
	struct request *last = NULL;
	u32 i, nr = 0;

	for (i = 0; i < n; i++) {
		if (!p[i].rq || p[i].bounced || p[i].rq == last)
			continue;
		last = p[i].rq;
		if (rqs) {
			netblk_host_rq_get(last);
			rqs[nr] = last;
		}
		nr++;
	}
	return nr;
}

/*
 * The hold for a run of @n datagrams in place: NULL when none of them
 * carries a request's own pages (copies of ours only), an ERR_PTR when there
 * is no memory for it (the run is then copied: nothing holds the pages).
 */
static struct netblk_host_zc *netblk_host_zc_new(const struct netblk_host_pending *p, u32 n)
{
	struct netblk_host_zc *zc;
	u32 nr = netblk_host_zc_hold(p, n, NULL);

	if (!nr)
		return NULL;
	zc = kmalloc(struct_size(zc, rqs, nr), GFP_NOWAIT | __GFP_NOWARN);
	if (!zc)
		return ERR_PTR(-ENOMEM);
	netblk_ubuf_init(&zc->ubuf, &netblk_host_zc_ops);
	zc->skb_seen = false;
	zc->nr = netblk_host_zc_hold(p, n, zc->rqs);
	return zc;
}

/*
 * How a run's data goes: in place where the route's device takes pages,
 * the request's own pages with a hold (MSG_ZEROCOPY), our copies without
 * (MSG_SPLICE_PAGES); else the socket copies it.  Returns the hold, if any.
 */
static struct netblk_host_zc *netblk_host_zc_msg(const struct netblk_host_tx *tx,
						 struct msghdr *msg,
						 const struct netblk_host_pending *p, u32 n)
{
	struct netblk_host_zc *zc;

	if (!netblk_host_run_in_place(tx, p))
		return NULL;
	zc = netblk_host_zc_new(p, n);
	if (IS_ERR(zc))
		return NULL;
	if (!zc) {
		msg->msg_flags |= MSG_SPLICE_PAGES;
		return NULL;
	}
	msg->msg_flags |= MSG_ZEROCOPY;
	msg->msg_ubuf = &zc->ubuf;
	return zc;
}

/* Send @n datagrams from @p in one sendmsg (UDP_SEGMENT when more than one); tally them. */
static int netblk_host_send_run(struct netblk_host_queue *q, struct netblk_host_pending *p,
				u32 n)
{
	struct netblk_host_tx *tx = q->tx;
	union {
		struct cmsghdr hdr;
		u8 buf[CMSG_SPACE(sizeof(u16))];
	} control;
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct netblk_host_zc *zc;
	bool in_place;
	u32 i;
	int err;

	if (!q->sock)
		return -ENOTCONN;
	netblk_host_fill_msg(tx, &msg, p, n);
	if (n > 1) {
		control.hdr.cmsg_level = SOL_UDP;
		control.hdr.cmsg_type = UDP_SEGMENT;
		control.hdr.cmsg_len = CMSG_LEN(sizeof(u16));
		*(u16 *)CMSG_DATA(&control.hdr) = netblk_host_datagram_bytes(p);
		msg.msg_control = &control;
		msg.msg_controllen = sizeof(control);
	}
	zc = netblk_host_zc_msg(tx, &msg, p, n);
	err = sock_sendmsg(q->sock, &msg);
	/* what an skb holds, it holds still or held: else the socket copied it */
	in_place = zc && (refcount_read(&zc->ubuf.refcnt) > 1 || READ_ONCE(zc->skb_seen));
	if (zc)
		net_zcopy_put(&zc->ubuf);	/* the sender's reference */
	if (err < 0)
		return err;
	for (i = 0; i < n; i++) {
		if (in_place && !p[i].bounced)
			tx->in_place += p[i].len;
		else
			tx->copied += p[i].len;
	}
	if (n > 1)
		tx->batched += n;
	return 0;
}

/* Send the @n datagrams of the batch, a run at a time, and let go of their pages. */
static void netblk_host_send_batch(struct netblk_host_queue *q, u32 n)
{
	struct netblk_host_tx *tx = q->tx;
	u32 i, j, run;
	int err;

	tx->route_sg = q->sock && netblk_host_route_sg(q->sock->sk);
	for (i = 0; i < n; i += run) {
		run = netblk_host_run_length(tx, &tx->batch[i], n - i);
		err = netblk_host_send_run(q, &tx->batch[i], run);
		if (err < 0 && run > 1) {
			/*
			 * 6.1 segments only for a device with checksum offload
			 * (-EIO; 6.12 segments in software), an IPsec route
			 * never (-EIO): one datagram a send from now on.
			 */
			if (err == -EIO || err == -EINVAL)
				tx->gso_refused = true;
			run = 1;	/* this one alone; the rest in runs again */
			err = netblk_host_send_run(q, &tx->batch[i], run);
		}
		if (err < 0)
			tx->errors += run;	/* the timer sends them again */
		for (j = i; j < i + run; j++) {
			netblk_host_release_data(&tx->batch[j]);
			if (tx->batch[j].rq)
				netblk_host_rq_put(tx->batch[j].rq);
		}
	}
}

/* Take up to a batch off the ring, and count what the last one did; 0: nothing left. */
static u32 netblk_host_take_batch(struct netblk_host_queue *q)
{
	struct netblk_host_tx *tx = q->tx;
	u32 n;

	spin_lock_bh(&q->lock);
	q->stats.bytes_in_place += tx->in_place;
	q->stats.bytes_copied += tx->copied;
	q->stats.tx_batched += tx->batched;
	q->stats.tx_errors += tx->errors;
	tx->in_place = tx->copied = tx->batched = tx->errors = 0;
	for (n = 0; n < NETBLK_HOST_TX_BATCH && q->pending_count;) {
		struct netblk_host_pending *p = &q->pending[q->pending_head];

		if (!p->purged)
			tx->batch[n++] = *p;	/* its pages and its hold go with it */
		p->nr_bvecs = 0;
		p->header_frag = NULL;
		p->rq = NULL;
		q->pending_head = (q->pending_head + 1) % NETBLK_HOST_PENDING;
		q->pending_count--;
	}
	spin_unlock_bh(&q->lock);
	return n;
}

static bool netblk_host_pending_left(struct netblk_host_queue *q)
{
	bool left;

	spin_lock_bh(&q->lock);
	left = q->pending_count;
	spin_unlock_bh(&q->lock);
	return left;
}

/*
 * Send what is pending, in the order it was numbered: one sender at a time.
 * A caller that finds another sending leaves its datagrams to it rather
 * than wait for it on the mutex (nvme-tcp's queue_request does the same
 * with its send_mutex): the sender looks at the ring again after letting
 * go, and what was added before that look -- under q->lock, as the look
 * is -- is sent by it, or by whoever takes the mutex after it.
 */
static void netblk_host_udp_flush(struct netblk_host_queue *q)
{
	u32 n;

	do {
		if (!mutex_trylock(&q->tx_mutex))
			return;
		while ((n = netblk_host_take_batch(q)))
			netblk_host_send_batch(q, n);
		mutex_unlock(&q->tx_mutex);
	} while (netblk_host_pending_left(q));
}

static void netblk_host_tx_work(struct work_struct *work)
{
	netblk_host_udp_flush(container_of(work, struct netblk_host_queue, tx_work));
}

static void netblk_host_udp_kick(struct netblk_host_queue *q)
{
	queue_work(netblk_host_wq, &q->tx_work);
}

static void netblk_host_udp_drop(struct netblk_host_queue *q)
{
	spin_lock_bh(&q->lock);
	while (q->pending_count) {
		netblk_host_release_pending(q, &q->pending[q->pending_head]);
		q->pending_head = (q->pending_head + 1) % NETBLK_HOST_PENDING;
		q->pending_count--;
	}
	spin_unlock_bh(&q->lock);
}

/* ---- answers, in the socket's softirq ---- */

static void netblk_host_udp_read(struct netblk_host_queue *q, void *frame, struct request *rq,
				 u32 at, u32 len)
{
	struct netblk_host_frame *f = frame;
	struct req_iterator iter;
	struct bio_vec bv;
	u32 skip = at, done = 0;

	rq_for_each_segment(bv, rq, iter) {
		u32 n;
		u8 *dst;

		if (skip >= bv.bv_len) {
			skip -= bv.bv_len;
			continue;
		}
		n = min(bv.bv_len - skip, len - done);
		dst = bvec_kmap_local(&bv);
		if (skb_copy_bits(f->skb, f->data_offset + done, dst + skip, n))
			memset(dst + skip, 0, n);	/* cannot be: the core checked the length */
		kunmap_local(dst);
		flush_dcache_page(bv.bv_page);
		done += n;
		skip = 0;
		if (done == len)
			goto out;	/* out of both loops: break leaves one bio's only */
	}
out:
	q->stats.read_bytes_copied += done;
}

static int netblk_host_encap_rcv(struct sock *sk, struct sk_buff *skb)
{
	struct netblk_host_queue *q = rcu_dereference_sk_user_data(sk);
	struct netblk_host_frame frame = { .skb = skb };
	u32 payload_len, linear;

	if (!q)
		goto drop;	/* detaching */
	if (skb->len < sizeof(struct udphdr) + NETBLK_HOST_HEADER_SIZE)
		goto drop;
	payload_len = skb->len - sizeof(struct udphdr);
	/* the header, and INFO's payload when it is one, in one piece */
	linear = min_t(u32, payload_len, NETBLK_HOST_HEADER_SIZE + NETBLK_HOST_INFO_SIZE);
	if (!pskb_may_pull(skb, sizeof(struct udphdr) + linear))
		goto drop;
	frame.data_offset = sizeof(struct udphdr) + NETBLK_HOST_HEADER_SIZE;
	q->rx(q, skb->data + sizeof(struct udphdr), linear, payload_len, &frame);
	consume_skb(skb);
	return 0;
drop:
	kfree_skb(skb);
	return 0;
}

/* ---- the socket ---- */

static int netblk_host_bind_dev(struct socket *sock, struct net *net, const char *ifname,
				struct netlink_ext_ack *extack)
{
	struct net_device *dev = dev_get_by_name(net, ifname);
	int err;

	if (!dev) {
		NL_SET_ERR_MSG_FMT(extack, "dev=%s: no such network interface here", ifname);
		return -ENODEV;
	}
	err = sock_bindtoindex(sock->sk, dev->ifindex, true);
	dev_put(dev);
	if (err)
		NL_SET_ERR_MSG_FMT(extack, "dev=%s: cannot bind the socket to it (%d)", ifname, err);
	return err;
}

static int netblk_host_udp_open(struct netblk_host_queue *q, struct net *net,
				netblk_host_rx_fn rx, struct netlink_ext_ack *extack)
{
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct sockaddr_in peer = {
		.sin_family = AF_INET,
		.sin_port = htons(q->att->params.port),
		.sin_addr.s_addr = q->att->params.addr,
	};
	struct socket *sock;
	struct sock *sk;
	int err;

	/* a kernel socket holds no reference on @net: the family is init_net's only (netnsok false) */
	err = sock_create_kern(net, AF_INET, SOCK_DGRAM, IPPROTO_UDP, &sock);
	if (err) {
		NL_SET_ERR_MSG_FMT(extack, "cannot create a UDP socket (%d)", err);
		return err;
	}
	sk = sock->sk;
	if (q->att->params.ifname[0]) {
		err = netblk_host_bind_dev(sock, net, q->att->params.ifname, extack);
		if (err)
			goto fail;
	}
	err = kernel_bind(sock, (struct sockaddr *)&local, sizeof(local));
	if (err) {
		NL_SET_ERR_MSG_FMT(extack, "cannot bind a UDP port (%d)", err);
		goto fail;
	}
	err = kernel_connect(sock, (struct sockaddr *)&peer, sizeof(peer), 0);
	if (err) {
		NL_SET_ERR_MSG_FMT(extack, "%pI4:%u: no route to it (%d)", &q->att->params.addr,
				   q->att->params.port, err);
		goto fail;
	}
	/* as nbd's: sending must not wait for the memory that writing to this disk frees */
	sk->sk_allocation = GFP_NOIO | __GFP_MEMALLOC;
	sk_set_memalloc(sk);
	lock_sock(sk);		/* what SO_SNDBUF does; the kernel exports no setter */
	sk->sk_userlocks |= SOCK_SNDBUF_LOCK;
	WRITE_ONCE(sk->sk_sndbuf, NETBLK_HOST_SNDBUF);
	release_sock(sk);

	q->sock = sock;
	q->rx = rx;	/* before the answers can come: encap_rcv reads it after sk_user_data */
	rcu_assign_sk_user_data(sk, q);
	WRITE_ONCE(udp_sk(sk)->encap_type, 1);
	WRITE_ONCE(udp_sk(sk)->encap_rcv, netblk_host_encap_rcv);
	udp_tunnel_encap_enable(sk);
	return 0;

fail:
	sock_release(sock);
	return err;
}

/* No answer reaches the queue once this returns. */
static void netblk_host_udp_stop_rx(struct netblk_host_queue *q)
{
	if (!q->sock)
		return;
	rcu_assign_sk_user_data(q->sock->sk, NULL);
	synchronize_rcu();	/* an encap_rcv() that read the old pointer is done */
}

/* After stop_rx and the timer: nothing kicks tx_work any more. */
static void netblk_host_udp_close(struct netblk_host_queue *q)
{
	cancel_work_sync(&q->tx_work);
	mutex_lock(&q->tx_mutex);	/* a queue_rq still sending */
	if (q->sock) {
		sk_clear_memalloc(q->sock->sk);	/* its static key, taken at open */
		kernel_sock_shutdown(q->sock, SHUT_RDWR);
		sock_release(q->sock);
		q->sock = NULL;
	}
	mutex_unlock(&q->tx_mutex);
}

/* The ring of datagrams recorded, the sender's batch; the sender itself. */
static int netblk_host_udp_create(struct netblk_host_queue *q)
{
	INIT_WORK(&q->tx_work, netblk_host_tx_work);
	mutex_init(&q->tx_mutex);
	q->pending = kvcalloc(NETBLK_HOST_PENDING, sizeof(*q->pending), GFP_KERNEL);
	if (!q->pending)
		return -ENOMEM;
	q->tx = kvzalloc(sizeof(*q->tx), GFP_KERNEL);
	if (!q->tx) {
		kvfree(q->pending);
		q->pending = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* After close and drop, or instead of open: nothing is recorded or sent. */
static void netblk_host_udp_destroy(struct netblk_host_queue *q)
{
	page_frag_cache_drain(&q->frags);
	kvfree(q->tx);
	q->tx = NULL;
	kvfree(q->pending);
	q->pending = NULL;
}

const struct netblk_host_transport_ops netblk_host_udp_ops = {
	.create = netblk_host_udp_create,
	.destroy = netblk_host_udp_destroy,
	.open = netblk_host_udp_open,
	.stop_rx = netblk_host_udp_stop_rx,
	.close = netblk_host_udp_close,
	.record = netblk_host_udp_record,
	.recorded = netblk_host_udp_recorded,
	.purge = netblk_host_udp_purge,
	.drop = netblk_host_udp_drop,
	.flush = netblk_host_udp_flush,
	.kick = netblk_host_udp_kick,
	.read = netblk_host_udp_read,
};

int netblk_host_udp_init(void)
{
	/* it sends the datagrams of writes that free memory: it must run under pressure */
	netblk_host_wq = alloc_workqueue("netblk_host", WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	return netblk_host_wq ? 0 : -ENOMEM;
}

void netblk_host_udp_exit(void)
{
	destroy_workqueue(netblk_host_wq);
}
