"""``stablehlo-perf-systolic``: a drop-in for SCALE-Sim's command line, backed by the closed-form model.

    stablehlo-perf-systolic -c scale.cfg -t topology.csv [-p OUTDIR] [-i conv|gemm]

Writes SCALE-Sim-format report CSVs to ``OUTDIR/<run_name>/`` as SCALE-Sim does. Bad input
prints one ``error:`` line naming the file and field and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from stablehlo_perf.analysis.scalesim_io import (
    ScaleSimInputError,
    read_config,
    read_topology,
    write_reports,
)

PROG = "stablehlo-perf-systolic"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="SCALE-Sim 3.0.0 reports from a closed-form model."
    )
    p.add_argument("-c", dest="config", required=True, help="SCALE-Sim .cfg file")
    p.add_argument("-t", dest="topology", help="topology CSV (default: the cfg's TopologyCsvLoc)")
    p.add_argument(
        "-p", dest="outdir", default="./results/", help="report folder (default ./results/)"
    )
    p.add_argument(
        "-i", dest="input_type", choices=("conv", "gemm"), default="conv", help="topology kind"
    )
    p.add_argument("-l", dest="layout", help="layout CSV (accepted for compatibility; unused)")
    p.add_argument(
        "-s", dest="save_trace", help="save traces (accepted for compatibility; no traces)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the model over a SCALE-Sim cfg + topology and write the reports; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        run = read_config(args.config)
        topology = args.topology or run.topology
        if not topology:
            raise ScaleSimInputError(
                f"{args.config}: [network_presets] TopologyCsvLoc: missing and no -t given"
            )
        layers = read_topology(topology, gemm=args.input_type == "gemm")
        results = []
        for layer in layers:
            try:
                results.append(layer.simulate(run.array))
            except ValueError as err:
                raise ScaleSimInputError(f"{topology}: layer {layer.name!r}: {err}") from None
        write_reports(Path(args.outdir) / run.run_name, results)
    except (ScaleSimInputError, OSError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
