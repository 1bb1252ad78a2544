"""`pvefix rehearse`: boot the planned config's firmware with the node's own QEMU, stand-in
devices of the passed GPUs' BAR sizes and sparse RAM, and read where the firmware put each BAR
(docs/rehearse.md)."""
