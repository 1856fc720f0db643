// The driver's informational options, MLIR's pass timing, stdin/stdout conventions.

// RUN: stablehlo-perf-opt --list-targets | FileCheck %s --check-prefix=TARGETS
// TARGETS: gb10       gpu
// TARGETS: h100       gpu  NVIDIA H100 SXM5 80 GB
// TARGETS: host       cpu  The local CPU through XLA:CPU
// TARGETS: tpu-v4     tpu  Google Cloud TPU v4 chip: 2 TensorCores, 4 MXUs (128x128) each
// TARGETS: tpu-v6e    tpu

// RUN: stablehlo-perf-opt --list-passes | FileCheck %s --check-prefix=PASSES
// PASSES: perf-op-info: Write `perf.id`, `perf.flops` and `perf.bytes`
// PASSES: perf-fusion: Write `perf.fusion`
// PASSES-NEXT: target=str (default: tpu-v5e)
// PASSES: perf-annotate-cache-traffic: Write `perf.dram_bytes` and `perf.l2_hit_rate`
// PASSES: perf-annotate-cycles: Write `perf.cycles`, `perf.latency_ns`
// PASSES: perf-critical-path: Write `perf.start_ns`, `perf.slack_ns`

// MLIR's own pass timing report names each Python pass.
// RUN: stablehlo-perf-opt %s --mlir-timing -o %t.mlir 2>&1 | FileCheck %s --check-prefix=TIMING
// TIMING: Execution time report
// TIMING-DAG: perf-op-info
// TIMING-DAG: perf-fusion
// TIMING-DAG: perf-annotate-cycles
// TIMING-DAG: perf-critical-path

// stdin in, stdout out; the annotated module parses again (fed back through the tool).
// RUN: stablehlo-perf-opt - < %s | stablehlo-perf-opt - --pass-pipeline='builtin.module(perf-op-info)' | FileCheck %s --check-prefix=ROUNDTRIP
// ROUNDTRIP: stablehlo.add {{.*}}perf.critical{{.*}}perf.model = "roofline"

func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
