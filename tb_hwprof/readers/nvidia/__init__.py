"""NVIDIA readers: Nsight Compute (.ncu-rep, CSV, metric tables) and Nsight Systems (SQLite exports, .nsys-rep,
`nsys stats` output)."""
