"""A `kernel-bench` output as data: its schema (schema.py), the older layouts read into it (legacy.py), the
targets a candidate is judged by (targets.py), combining processes (combine.py), its Markdown (render.py) and
the comparison of two outputs (diff.py). Pure: no torch, tested on the CPU."""
