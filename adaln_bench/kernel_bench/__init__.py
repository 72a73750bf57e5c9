"""`adaln-bench kernel-bench`: the bundled kernel's code paths against the plain cuBLAS path, in device time.

floors.py (bytes, FLOPs, the floor at each T), subjects.py (what is timed), child.py (one process's
measurements), bits.py (invariance and bits across libraries), table.py (combining processes, the table).
"""
