// SPDX-License-Identifier: GPL-2.0
/*
 * zd_memremap: time memremap_pages() of a ZONE_DEVICE range that has no
 * backing device, the way a GPU driver brings up DEVICE_PRIVATE memory.
 *
 * The module does all of its work at load time and stays loaded doing
 * nothing, so a guest script runs "insmod ...; rmmod zd_memremap" once per
 * measurement.  Every iteration maps the range, records how long
 * memremap_pages() took and unmaps it again; the memmap itself is timed by
 * the kernel's own pr_debug() in memmap_init_zone_device().
 *
 * Parameters select the geometry, so the same module also produces the
 * unaligned and compound ranges that the memmap equality test needs.
 */
#include <linux/ioport.h>
#include <linux/ktime.h>
#include <linux/memremap.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/version.h>

static char *type = "private";
module_param(type, charp, 0444);
MODULE_PARM_DESC(type, "pgmap type: private or generic");

static unsigned long size_mb = 1024;
module_param(size_mb, ulong, 0444);
MODULE_PARM_DESC(size_mb, "size of the range in MiB (multiple of 2)");

static unsigned long offset_mb;
module_param(offset_mb, ulong, 0444);
MODULE_PARM_DESC(offset_mb, "start this many MiB past an aligned base (multiple of 2)");

static unsigned int shift;
module_param(shift, uint, 0444);
MODULE_PARM_DESC(shift, "vmemmap_shift: 0 for order-0 pages, 9 for 2M, 18 for 1G");

static bool dump;
module_param(dump, bool, 0444);
MODULE_PARM_DESC(dump, "print the first struct pages of the range, for the lab's test vectors");

static unsigned int iterations = 1;
module_param(iterations, uint, 0444);
MODULE_PARM_DESC(iterations, "memremap_pages()/memunmap_pages() cycles");

/*
 * Nothing to give back: the range has no device memory behind it.  Of the
 * bases zdinit builds, 6.12 frees a page (page_free) and 7.3 a folio
 * (folio_free).
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)
static void zd_page_free(struct folio *folio)
{
}
#else
static void zd_page_free(struct page *page)
{
}
#endif

static vm_fault_t zd_migrate_to_ram(struct vm_fault *vmf)
{
	return VM_FAULT_SIGBUS;
}

static const struct dev_pagemap_ops zd_private_ops = {
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)
	.folio_free = zd_page_free,
#else
	.page_free = zd_page_free,
#endif
	.migrate_to_ram = zd_migrate_to_ram,
};

static struct dev_pagemap zd_pgmap;

/* Bytes of the struct pages a compound head and its first tails occupy. */
#define ZD_DUMP_PAGES	4
#define ZD_DUMP_CHUNK	32

static void zd_dump(void)
{
	struct page *first = pfn_to_page(PHYS_PFN(zd_pgmap.range.start));
	unsigned int i, off;

	pr_info("zd_memremap: dump struct_page_size %zu head %px\n",
		sizeof(struct page), first);
	for (i = 0; i < ZD_DUMP_PAGES; i++)
		for (off = 0; off < sizeof(struct page); off += ZD_DUMP_CHUNK)
			pr_info("zd_memremap: dump page %u +%u %*phN\n", i, off,
				(int)min_t(size_t, ZD_DUMP_CHUNK,
					   sizeof(struct page) - off),
				(u8 *)(first + i) + off);
}

static int __init zd_memremap_init(void)
{
	/* memremap_pages() works in subsections: 2 MiB on x86-64. */
	const unsigned long subsection = 2UL << 20;
	unsigned long size = size_mb << 20, offset = offset_mb << 20;
	unsigned long align = max(subsection, PAGE_SIZE << shift);
	struct resource *res;
	u64 start, t0, dt, total = 0;
	unsigned int i;
	void *addr;
	int ret = 0;

	if (!size || !IS_ALIGNED(size, subsection) ||
	    !IS_ALIGNED(offset, subsection) ||
	    !IS_ALIGNED(size, PAGE_SIZE << shift) || shift > 18 ||
	    !iterations)
		return -EINVAL;

	if (!strcmp(type, "private")) {
		zd_pgmap.type = MEMORY_DEVICE_PRIVATE;
		zd_pgmap.ops = &zd_private_ops;
		zd_pgmap.owner = &zd_pgmap;
	} else if (!strcmp(type, "generic")) {
		zd_pgmap.type = MEMORY_DEVICE_GENERIC;
	} else {
		return -EINVAL;
	}

	res = request_free_mem_region(&iomem_resource, size + offset + align,
				      "zd_memremap");
	if (IS_ERR(res))
		return PTR_ERR(res);

	start = ALIGN(res->start, align) + offset;
	zd_pgmap.range.start = start;
	zd_pgmap.range.end = start + size - 1;
	zd_pgmap.nr_range = 1;
	zd_pgmap.vmemmap_shift = shift;

	for (i = 0; i < iterations; i++) {
		t0 = ktime_get_ns();
		addr = memremap_pages(&zd_pgmap, NUMA_NO_NODE);
		dt = ktime_get_ns() - t0;
		if (IS_ERR(addr)) {
			ret = PTR_ERR(addr);
			pr_err("zd_memremap: memremap_pages failed: %d\n", ret);
			break;
		}
		total += dt;
		if (dump && !i)
			zd_dump();
		pr_info("zd_memremap: %s range %#llx-%#llx shift %u memremap %llu ns\n",
			type, zd_pgmap.range.start, zd_pgmap.range.end, shift,
			dt);
		memunmap_pages(&zd_pgmap);
	}
	if (i)
		pr_info("zd_memremap: avg memremap %llu ns over %u\n",
			div_u64(total, i), i);

	/* Frees @res too: request_free_mem_region() allocated it. */
	release_mem_region(res->start, resource_size(res));
	return ret;
}

static void __exit zd_memremap_exit(void)
{
}

module_init(zd_memremap_init);
module_exit(zd_memremap_exit);
MODULE_DESCRIPTION("Time memremap_pages() of a ZONE_DEVICE range");
MODULE_LICENSE("GPL");
