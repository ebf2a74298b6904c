/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A client's side of a session (docs/protocol.md, "Sessions"), for the
 * block-device client of issue 10: HELLO with a fresh nonce, HELLO again
 * with the cookie its answer brought, the session; and the same again
 * whenever the instance answers ENOTCONN (it was started again).  The
 * HELLOs are resent on the host queue's timeout, backed off; a HELLO is
 * never numbered in a session, so host_queue never sees one.
 *
 * Folded WRITE answers (protocol.h, flag_fold_answers) are taken when the
 * cookie's answer offers them -- never asked of an instance that did not
 * offer, which would refuse the flag -- and are on when the answer that
 * opens the session says so.
 *
 *     closed --open()--> cookie_wanted --cookie--> session_wanted --session--> open
 *        ^                    |  ^                      |                       |
 *        |     EUSERS, EKEYREJECTED, a key mismatch: refused (closed)          |
 *        |                    +--+---- EAGAIN: again after a back-off          |
 *        +--------------------------- lost() (ENOTCONN): open() again <--------+
 *
 * One caller at a time, as for host_queue.
 */
#ifndef NETBLK_CORE_HOST_SESSION_H
#define NETBLK_CORE_HOST_SESSION_H

#include "protocol.h"
#include "rto.h"
#include "types.h"

namespace nb {

class host_session {
public:
	enum class state : u8 { closed, cookie_wanted, session_wanted, open };

	enum class result : u8 {
		ignored,	/* not an answer to this HELLO (a late one, another nonce) */
		send_cookie,	/* the cookie came: send hello() again now */
		opened,		/* the session is open: id(), token() */
		busy,		/* EAGAIN: hello() again at due_ns() */
		refused,	/* closed: refusal() says why (EUSERS, EKEYREJECTED, ...) */
	};

	/*
	 * @keyed, @auth_data: what this client's key is (none: false, false), so
	 * that an instance that wants another is refused with a reason rather
	 * than tried forever.
	 */
	void init(bool keyed, bool auth_data);

	/* Start opening a session with @nonce (random, not 0): send hello() now. */
	void open(u64 nonce, u64 now_ns, u64 timeout_ns);
	/* The instance forgot the session (ENOTCONN): open() again. */
	void lost();

	/* The HELLO to send now: op, session 0, token (0 or the cookie), seq = nonce. */
	header hello() const;
	/* An answer with op HELLO | reply. */
	result answer(const header &h, u64 now_ns);
	/* Silence: when hello() must be sent again (0: nothing to send). */
	u64 due_ns() const { return state_ == state::open || state_ == state::closed ? 0 : due_ns_; }
	/* hello() was sent again at @now_ns; @timeout_ns until the next (the queue's RTO). */
	void resent(u64 now_ns, u64 timeout_ns);

	state current() const { return state_; }
	bool is_open() const { return state_ == state::open; }
	u32 id() const { return id_; }
	u64 token() const { return token_; }
	/* Whether an answer belongs to the session open now (not one of before). */
	bool owns(const header &h) const
	{
		return state_ == state::open && h.session == id_ && h.token == token_;
	}
	u16 refusal() const { return refusal_; }
	/* Set with refusal EKEYREJECTED: what the instance's tags want. */
	bool instance_keyed() const { return instance_keyed_; }
	bool instance_auth_data() const { return instance_auth_data_; }
	/* Whether this session's WRITE answers may answer others in their `reserved` bits. */
	bool folds() const { return state_ == state::open && folds_; }
	u64 opened() const { return opened_; }
	u64 hellos() const { return hellos_; }

private:
	state state_ = state::closed;
	bool keyed_ = false;
	bool auth_data_ = false;
	bool instance_keyed_ = false;
	bool instance_auth_data_ = false;
	bool fold_offered_ = false;	/* the cookie's answer offered folded answers */
	bool folds_ = false;		/* the session's answer says they are on */
	u16 refusal_ = 0;
	u32 busy_ = 0;
	u32 id_ = 0;
	u64 token_ = 0;
	u64 nonce_ = 0;
	u64 cookie_ = 0;
	u64 due_ns_ = 0;
	u64 opened_ = 0;	/* sessions opened */
	u64 hellos_ = 0;	/* HELLOs sent */
};

} /* namespace nb */

#endif
