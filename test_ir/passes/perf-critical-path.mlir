// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=%inputs/unit.toml},perf-critical-path)' | FileCheck %s

// Target unit.toml (see perf-annotate-cycles.mlir): a 1000-element f32 add or
// multiply costs 220 ns; exp costs max(1000/100, 8000/100) + 100 = 180 ns.

// CHECK-LABEL: func.func @diamond
func.func @diamond(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // a -> {b, c} -> d. Longest path a, c, d = 660 ns; b can slip by 40 ns.
  // CHECK: %[[A:.*]] = stablehlo.add {{.*}}perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 0.000000e+00 : f64
  %a = stablehlo.add %x, %x : tensor<1000xf32>
  // CHECK: stablehlo.exponential %[[A]] {{{.*}}perf.slack_ns = 4.000000e+01 : f64, perf.start_ns = 2.200000e+02 : f64}
  %b = stablehlo.exponential %a : tensor<1000xf32>
  // CHECK: stablehlo.multiply %[[A]], %[[A]] {{{.*}}perf.critical, {{.*}}perf.slack_ns = 0.000000e+00 : f64, perf.start_ns = 2.200000e+02 : f64}
  %c = stablehlo.multiply %a, %a : tensor<1000xf32>
  // CHECK: stablehlo.add {{.*}}perf.critical, {{.*}}perf.start_ns = 4.400000e+02 : f64}
  %d = stablehlo.add %b, %c : tensor<1000xf32>
  return %d : tensor<1000xf32>
}

// CHECK-LABEL: func.func @parallel_chains
func.func @parallel_chains(%x: tensor<1000xf32>, %y: tensor<1000xf32>) -> (tensor<1000xf32>, tensor<1000xf32>) {
  // Two independent chains: x -> add -> add (440 ns) and y -> exp (180 ns).
  // The exp is off the path and can slip 440 - 180 = 260 ns.
  // CHECK: stablehlo.add {{.*}}perf.critical
  %a = stablehlo.add %x, %x : tensor<1000xf32>
  // CHECK: stablehlo.exponential {{.*}}perf.slack_ns = 2.600000e+02 : f64, perf.start_ns = 0.000000e+00 : f64}
  %b = stablehlo.exponential %y : tensor<1000xf32>
  // CHECK: stablehlo.add {{.*}}perf.critical, {{.*}}perf.start_ns = 2.200000e+02 : f64}
  %c = stablehlo.add %a, %a : tensor<1000xf32>
  return %c, %b : tensor<1000xf32>, tensor<1000xf32>
}
