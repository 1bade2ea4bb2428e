"""Sizes in bytes, as the kernel and QEMU count them."""
MiB = 1 << 20
GiB = 1 << 30
PAGE = 4096                  # the base page of every architecture built
