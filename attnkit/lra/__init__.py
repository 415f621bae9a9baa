"""LRA-lite: the efficient-attention variants (``attnkit.nn.variants``) on Long Range Arena's tasks, sized
for a CPU. ``settings`` (sizes per suite), ``tasks`` (data), ``cell`` (train + measure one variant on one
task), ``suite`` (all cells, resumable), ``report`` (table, figure), ``memory`` (peak memory on CPU).
Command line: ``attnkit lra``."""
