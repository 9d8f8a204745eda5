"""What one compile is: its frozen spec, kernel-builder's rules and the CUDA capabilities it is
planned by, each unit's cost and memory, its output read back, and the programs that run it."""
