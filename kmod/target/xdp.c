// SPDX-License-Identifier: GPL-2.0
/*
 * The XDP transport, as the core and the instance reach it (target_ops.h):
 * frames arrive on netblk<port> (handoff.c), replies leave by the NIC's
 * ndo_xdp_xmit from the slots' buffers (xmit.c).  Its own file so that
 * neither of those calls the other back.
 */
#include "target.h"

const struct netblk_target_transport_ops netblk_xdp_ops = {
	.slot_buffer = netblk_xdp_slot_buffer,
	.data_page = netblk_xdp_data_page,
	.reply_buffer = netblk_xdp_reply_buffer,
	.reply_done = netblk_xdp_reply_done,
	.transmit = netblk_xdp_transmit,
	.frame_frags = netblk_xdp_frame_frags,
	.free_frame = netblk_xdp_free_frame,
	.init = netblk_buffers_init,
	.exit = netblk_buffers_exit,
	.open = netblk_handoff_create,
	.close = netblk_handoff_destroy,
};
