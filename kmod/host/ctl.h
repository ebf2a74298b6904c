/* SPDX-License-Identifier: GPL-2.0 */
/* The block-device client's netlink commands (host/ctl.c), for genl.c's ops table. */
#ifndef NETBLK_HOST_CTL_H
#define NETBLK_HOST_CTL_H

struct genl_info;
struct netlink_callback;
struct sk_buff;

int netblk_cmd_attach(struct sk_buff *skb, struct genl_info *info);
int netblk_cmd_detach(struct sk_buff *skb, struct genl_info *info);
int netblk_dump_attached(struct sk_buff *skb, struct netlink_callback *cb);

#endif
