// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=%inputs/unit.toml},perf-critical-path{target=%inputs/unit.toml})' | FileCheck %s --check-prefix=TPU
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=%inputs/unit_cpu.toml},perf-critical-path{target=%inputs/unit_cpu.toml})' | FileCheck %s --check-prefix=CPU

// Targets unit.toml (kind tpu: MXU, VPU and DMA overlap) and unit_cpu.toml
// (kind cpu: one in-order unit) have the same round numbers (see
// perf-annotate-cycles.mlir): a 1000-element f32 add or multiply costs 220 ns,
// exp costs max(1000/100, 8000/100) + 100 = 180 ns, a 64^3 f32 dot 624.288 ns.

// The entry (first public) function's totals: makespan, dataflow bound, work.
// TPU: module attributes {perf.critical_path = array<i64: 0>, perf.critical_path_ns = 6.242880e+02 : f64, perf.total_latency_ns = 6.242880e+02 : f64, perf.work_ns = 1024.288 : f64}
// CPU: module attributes {perf.critical_path = array<i64: 0, 1, 2>, perf.critical_path_ns = 6.242880e+02 : f64, perf.total_latency_ns = 1024.288 : f64, perf.work_ns = 1024.288 : f64}

// TPU-LABEL: func.func @overlap
// CPU-LABEL: func.func @overlap
func.func @overlap(%p: tensor<64x64xf32>, %q: tensor<64x64xf32>, %x: tensor<1000xf32>) -> (tensor<64x64xf32>, tensor<1000xf32>) {
  // On tpu the dot runs on the MXU while exp -> add run on the VPU: makespan 624.288 ns,
  // the VPU chain (400 ns) can slip 224.288 ns.
  // On cpu one unit runs dot, exp, add in order: 624.288 + 180 + 220 = 1024.288 ns, no slack.
  // TPU: stablehlo.dot_general {{.*}}perf.critical, {{.*}}perf.start_ns = 0.000000e+00 : f64}
  // CPU: stablehlo.dot_general {{.*}}perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 0.000000e+00 : f64}
  %m = stablehlo.dot_general %p, %q, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // TPU: stablehlo.exponential {{.*}}perf.slack_ns = 2.242880e+02 : f64, perf.start_ns = 0.000000e+00 : f64}
  // CPU: stablehlo.exponential {{.*}}perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 6.242880e+02 : f64}
  %e = stablehlo.exponential %x : tensor<1000xf32>
  // TPU: stablehlo.add {{.*}}perf.slack_ns = 2.242880e+02 : f64, perf.start_ns = 1.800000e+02 : f64}
  // CPU: stablehlo.add {{.*}}perf.critical, {{.*}}perf.start_ns = 8.042880e+02 : f64}
  %f = stablehlo.add %e, %e : tensor<1000xf32>
  return %m, %f : tensor<64x64xf32>, tensor<1000xf32>
}

// TPU-LABEL: func.func @diamond
func.func @diamond(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // a -> {b, c} -> d, all on the VPU: the dataflow bound is a, c, d = 660 ns,
  // but one VPU runs them in order (a, b, c, d) and every op is critical: 840 ns.
  // TPU: %[[A:.*]] = stablehlo.add {{.*}}perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 0.000000e+00 : f64
  %a = stablehlo.add %x, %x : tensor<1000xf32>
  // TPU: stablehlo.exponential %[[A]] {perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 2.200000e+02 : f64}
  %b = stablehlo.exponential %a : tensor<1000xf32>
  // TPU: stablehlo.multiply %[[A]], %[[A]] {perf.critical, {{.*}}perf.start_ns = 4.000000e+02 : f64}
  %c = stablehlo.multiply %a, %a : tensor<1000xf32>
  // TPU: stablehlo.add {{.*}}perf.critical, {{.*}}perf.start_ns = 6.200000e+02 : f64}
  %d = stablehlo.add %b, %c : tensor<1000xf32>
  return %d : tensor<1000xf32>
}
