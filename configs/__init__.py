"""Shipped configuration: defaults, examples (regions, workloads), deployment recipes."""
