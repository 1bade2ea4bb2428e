"""zdinit: measure and speed up ZONE_DEVICE memmap initialisation."""
