// SPDX-License-Identifier: GPL-2.0
/*
 * zd_failonline: refuse MEM_GOING_ONLINE while the parameter "fail" is
 * set, so that a guest script can send online_pages() down its error
 * path (the range moved into its zone, then taken out again) and check
 * what that path leaves behind.  "refused" counts the refusals.
 */
#include <linux/limits.h>
#include <linux/memory.h>
#include <linux/module.h>
#include <linux/notifier.h>

static bool fail = true;
module_param(fail, bool, 0644);
MODULE_PARM_DESC(fail, "refuse to online memory (default: yes)");

static unsigned long refused;
module_param(refused, ulong, 0444);
MODULE_PARM_DESC(refused, "memory blocks refused so far");

static int zd_failonline_notify(struct notifier_block *nb,
				unsigned long action, void *arg)
{
	if (action != MEM_GOING_ONLINE || !READ_ONCE(fail))
		return NOTIFY_OK;
	refused++;
	return notifier_from_errno(-EBUSY);
}

/*
 * Last in the chain: every other notifier has seen MEM_GOING_ONLINE
 * before the MEM_CANCEL_ONLINE that the refusal sends them all.
 */
static struct notifier_block zd_failonline_nb = {
	.notifier_call = zd_failonline_notify,
	.priority = INT_MIN,
};

static int __init zd_failonline_init(void)
{
	return register_memory_notifier(&zd_failonline_nb);
}

static void __exit zd_failonline_exit(void)
{
	unregister_memory_notifier(&zd_failonline_nb);
}

module_init(zd_failonline_init);
module_exit(zd_failonline_exit);
MODULE_DESCRIPTION("zdinit: refuse memory onlining on request");
MODULE_LICENSE("GPL");
