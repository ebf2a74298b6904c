// SPDX-License-Identifier: GPL-2.0
/*
 * netblk: serve a block device over UDP without the CPU copying the data.
 *
 * Module entry and exit.  Instances are started and stopped over generic
 * netlink (genl.c, target/ctl.c); unloading stops every one first.
 */
#include "target/target.h"
#include "host/host.h"

#include <linux/module.h>
#include <net/genetlink.h>

#include "netblk_version.h"

static int __init netblk_init(void)
{
	int err;

	err = netblk_monitor_init();
	if (err) {
		pr_err("cannot register the network notifiers: %d\n", err);
		return err;
	}
	err = netblk_host_init();
	if (err) {
		pr_err("cannot set up the block-device client: %d\n", err);
		goto monitor;
	}
	err = netblk_genl_register();
	if (err) {
		pr_err("cannot register the generic netlink family: %d\n", err);
		goto host;
	}
	return 0;

host:
	netblk_host_exit();
monitor:
	netblk_monitor_exit();
	return err;
}

static void __exit netblk_exit(void)
{
	/*
	 * Refuse new instances, stop what serves (its listeners hear why),
	 * and only then take the family away.
	 */
	mutex_lock(&netblk_lock);
	netblk_unloading = true;
	mutex_unlock(&netblk_lock);
	netblk_stop_all(NETBLK_REASON_RMMOD);
	netblk_host_exit();	/* detaches every device, failing what it had outstanding */
	netblk_monitor_exit();
	netblk_genl_unregister();
}

module_init(netblk_init);
module_exit(netblk_exit);

MODULE_DESCRIPTION("netblk: serve a block device over UDP without copying the data");
MODULE_AUTHOR("netblk developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(NETBLK_VERSION);
MODULE_ALIAS_GENL_FAMILY(NETBLK_GENL_NAME);
