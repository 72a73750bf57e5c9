"""The probes eager and replayed from CUDA graphs (harness/measurement/graphed_runs.py), one candidate after the other
in this process, with the full plan: the seconds each took and whether their records are equal.

Usage (on the GPU machine): python3 tools/device/probe_graphs_check.py [--json PATH] OP/CANDIDATE ...
(plain mode, the h3 shape; e.g. timestep_mlp/diffusers norm_modulate/bundled)
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.graphed_runs import GraphedWorkload
from adaln_bench.harness.measurement.probes import probe_batch_invariance
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops import candidates
from adaln_bench.ops.candidates import BuildContext
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import get_operator


def timed(runner, plan) -> tuple[float, object]:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    result = probe_batch_invariance(runner, plan)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, result


def check(op_name: str, name: str) -> dict:
    op, device, shape = get_operator(op_name), torch.device("cuda"), PRESETS["h3"]
    candidate = candidates.get(name, op_name)
    reason = candidate.availability()
    if reason is not None:
        return {"case": f"{op_name}/{name}", "unavailable": reason}
    impl = candidate.build(BuildContext(mode="plain", device=device, shape=shape, op=op_name))
    subject = Subject.of(op, candidate, impl, shape)
    params = draw_params(op, shape, device)
    plan = op.family.plan(False)
    graphed = GraphedWorkload(Workload(subject, params, shape, device))
    graphed_s, replayed = timed(graphed, plan)
    eager_s, eager = timed(Workload(subject, params, shape, device), plan)
    same = replayed.model_dump(exclude={"runs"}) == eager.model_dump(exclude={"runs"})
    return {"case": f"{op_name}/{name}", "eager_s": round(eager_s, 2), "graphed_s": round(graphed_s, 2),
            "same_records": same, "batch_invariant": eager.batch_invariant, **graphed.counts()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", metavar="OP/CANDIDATE")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        op_name, _, name = case.partition("/")
        try:
            rows.append(check(op_name, name))
        except Exception as exc:  # noqa: BLE001 - one case's failure is its row
            rows.append({"case": case, "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(f"{'case':36s} {'eager s':>8s} {'graphed s':>9s} {'x':>5s}  same  replayed/eager/graphs")
    for r in rows:
        if "eager_s" in r:
            print(f"{r['case']:36s} {r['eager_s']:8.1f} {r['graphed_s']:9.1f} {r['eager_s'] / r['graphed_s']:5.1f}  "
                  f"{str(r['same_records']):5s} {r['replayed']}/{r['eager']}/{r['graphs']} {r['graphs_off'] or ''}"
                  f"{r['eager_sizes'] or ''}")
        else:
            print(f"{r['case']:36s} {r.get('unavailable') or r.get('error')}")
    return 0 if all(r.get("same_records", True) and "error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
