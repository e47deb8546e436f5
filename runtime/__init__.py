"""Process utilities every job stands on: command lines, progress lines, interrupts,
output folders, locks, worker processes."""
