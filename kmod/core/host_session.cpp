// SPDX-License-Identifier: GPL-2.0
/* A client's side of a session: see host_session.h. */
#include "host_session.h"

namespace nb {

void host_session::init(bool keyed, bool auth_data)
{
	*this = {};
	keyed_ = keyed;
	auth_data_ = keyed && auth_data;
}

void host_session::open(u64 nonce, u64 now_ns, u64 timeout_ns)
{
	state_ = state::cookie_wanted;
	nonce_ = nonce ? nonce : 1;	/* 0 is no nonce: the instance refuses it */
	cookie_ = 0;
	id_ = 0;
	token_ = 0;
	fold_offered_ = false;
	folds_ = false;
	busy_ = 0;
	refusal_ = 0;
	due_ns_ = now_ns + timeout_ns;
	hellos_++;
}

void host_session::lost()
{
	state_ = state::closed;
	id_ = 0;
	token_ = 0;
}

void host_session::resent(u64 now_ns, u64 timeout_ns)
{
	due_ns_ = now_ns + timeout_ns;
	hellos_++;
}

header host_session::hello() const
{
	header h = {};

	h.magic = proto_magic;
	h.version = proto_version;
	h.op = op_hello;
	h.token = state_ == state::session_wanted ? cookie_ : 0;
	if (state_ == state::session_wanted && fold_offered_)
		h.flags = flag_fold_answers;
	h.seq = nonce_;
	return h;
}

host_session::result host_session::answer(const header &h, u64 now_ns)
{
	if ((state_ != state::cookie_wanted && state_ != state::session_wanted) || h.seq != nonce_)
		return result::ignored;

	if (h.status == status_eagain) {
		/* the instance had no slot for the HELLO */
		busy_++;
		due_ns_ = now_ns + busy_backoff_ns(busy_);
		return result::busy;
	}

	instance_keyed_ = h.flags & flag_auth_key;
	instance_auth_data_ = h.flags & flag_auth_data;
	if (h.status == status_ok && (instance_keyed_ != keyed_ ||
				      (keyed_ && instance_auth_data_ != auth_data_)))
		refusal_ = status_ekeyrejected;	/* it would refuse, or we its answers */
	else
		refusal_ = h.status;
	if (refusal_) {
		state_ = state::closed;
		return result::refused;
	}

	if (!h.session) {
		if (state_ != state::cookie_wanted)
			return result::ignored;	/* the cookie's answer again */
		cookie_ = h.token;
		fold_offered_ = h.flags & flag_fold_answers;
		state_ = state::session_wanted;
		return result::send_cookie;
	}
	if (state_ != state::session_wanted)
		return result::ignored;
	id_ = h.session;
	token_ = h.token;
	folds_ = fold_offered_ && (h.flags & flag_fold_answers);
	state_ = state::open;
	opened_++;
	return result::opened;
}

} /* namespace nb */
