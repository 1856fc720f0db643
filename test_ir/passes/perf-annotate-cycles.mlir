// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-op-info,perf-annotate-cycles{target=%inputs/unit.toml})' | FileCheck %s
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=tpu-v5e})' | FileCheck %s --check-prefix=V5E
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=%inputs/unit.toml branches=mean})' | FileCheck %s --check-prefix=MEAN

// Target unit.toml: matrix 1000 FLOP/ns, vector 100 FLOP/ns, memory 100 B/ns,
// 2 GHz, 100 ns launch overhead. Roofline: max(compute, memory) + 100 ns.

// CHECK-LABEL: func.func @memory_bound
// V5E-LABEL: func.func @memory_bound
func.func @memory_bound(%a: tensor<1000xf32>) -> tensor<1000xf32> {
  // 1000 FLOPs / 100 = 10 ns; 12000 B / 100 = 120 ns -> 220 ns, 440 cycles.
  // CHECK: stablehlo.add {{.*}}perf.cycles = 440 : i64, perf.dram_bytes = 12000 : i64{{.*}}perf.latency_ns = 2.200000e+02 : f64, perf.model = "roofline"
  // tpu-v5e: 12000 B / 819 GB/s = 14.652 ns + 850 ns overhead; 1.5 GHz -> 1297.0 cycles.
  // V5E: stablehlo.add {{.*}}perf.cycles = 1297 : i64{{.*}}perf.latency_ns = 864.652014{{[0-9]*}} : f64
  %0 = stablehlo.add %a, %a : tensor<1000xf32>
  return %0 : tensor<1000xf32>
}

// CHECK-LABEL: func.func @compute_bound
func.func @compute_bound(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // 2*64^3 = 524288 FLOPs on the matrix unit: 524.288 ns; 49152 B: 491.52 ns.
  // -> 624.288 ns, 1248.576 -> 1249 cycles.
  // CHECK: stablehlo.dot_general {{.*}}perf.cycles = 1249 : i64, perf.dram_bytes = 49152 : i64{{.*}}perf.latency_ns = 6.242880e+02 : f64, perf.model = "roofline"
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// CHECK-LABEL: func.func @free_and_empty
func.func @free_and_empty(%a: tensor<0xf32>) -> (tensor<0xf32>, tensor<f32>) {
  // CHECK: stablehlo.constant {{.*}}perf.latency_ns = 0.000000e+00 : f64, perf.model = "free"
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  // Zero-size tensors cost nothing.
  // CHECK: stablehlo.add {{.*}}perf.cycles = 0 : i64{{.*}}perf.latency_ns = 0.000000e+00 : f64, perf.model = "roofline"
  %0 = stablehlo.add %a, %a : tensor<0xf32>
  return %0, %c : tensor<0xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @counted_loop
func.func @counted_loop(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // Body: one 220 ns add and one i32 add (12 B -> 0.12 ns; 1 FLOP -> 0.01 ns: 100.12 ns).
  // Cond: one compare (9 B: 100.09 ns), run once more than the body: 8 times.
  // 7 * (220 + 100.12) + 8 * 100.09 = 3041.56 ns; and the copies XLA makes before the loop
  // of its state's read-only initial values, %x (8000 B moved: 180 ns) and %c0 (100.08 ns):
  // 3321.64 ns. The body updates both in place: no copies a trip.
  // CHECK: stablehlo.while{{.*}}perf.latency_ns = 3321.64{{[0-9]*}} : f64, perf.model = "while(x7, copies: 2 before)"{{.*}}perf.trip_count = 7 : i64
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<1000xf32>
  cond {
    %n = stablehlo.constant dense<7> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %i2 = stablehlo.add %i, %one : tensor<i32>
    %v2 = stablehlo.add %v, %v : tensor<1000xf32>
    stablehlo.return %i2, %v2 : tensor<i32>, tensor<1000xf32>
  }
  return %r#1 : tensor<1000xf32>
}

// CHECK-LABEL: func.func @calls
func.func @calls(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // A call costs its callee: two 220 ns adds.
  // CHECK: call @callee{{.*}}perf.latency_ns = 4.400000e+02 : f64, perf.model = "call(@callee)"
  %0 = func.call @callee(%x) : (tensor<1000xf32>) -> tensor<1000xf32>
  return %0 : tensor<1000xf32>
}

func.func private @callee(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = stablehlo.add %x, %x : tensor<1000xf32>
  %1 = stablehlo.add %0, %x : tensor<1000xf32>
  return %1 : tensor<1000xf32>
}

// Branch 0 is one 220 ns add, branch 1 two (440 ns). Unweighted: the costliest branch
// (`mean`: 330 ns); weights 3:1 -> 0.75 * 220 + 0.25 * 440 = 275 ns; one-hot: that branch.
// CHECK-LABEL: func.func @branches
// MEAN-LABEL: func.func @branches
func.func @branches(%i: tensor<i32>, %x: tensor<1000xf32>) -> (tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>) {
  // CHECK: perf.latency_ns = 4.400000e+02 : f64, perf.model = "case(max branch)"
  // MEAN: perf.latency_ns = 3.300000e+02 : f64, perf.model = "case(mean of branches)"
  %0 = "stablehlo.case"(%i) ({
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    stablehlo.return %a : tensor<1000xf32>
  }, {
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    %b = stablehlo.add %a, %x : tensor<1000xf32>
    stablehlo.return %b : tensor<1000xf32>
  }) : (tensor<i32>) -> tensor<1000xf32>
  // CHECK: perf.latency_ns = 2.750000e+02 : f64, perf.model = "case(weighted branches)"
  // MEAN: perf.latency_ns = 2.750000e+02 : f64, perf.model = "case(weighted branches)"
  %1 = "stablehlo.case"(%i) ({
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    stablehlo.return %a : tensor<1000xf32>
  }, {
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    %b = stablehlo.add %a, %x : tensor<1000xf32>
    stablehlo.return %b : tensor<1000xf32>
  }) {perf.branch_weights = array<f64: 3.0, 1.0>} : (tensor<i32>) -> tensor<1000xf32>
  // CHECK: perf.latency_ns = 2.200000e+02 : f64, perf.model = "case(branch 0 taken)"
  %2 = "stablehlo.case"(%i) ({
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    stablehlo.return %a : tensor<1000xf32>
  }, {
    %a = stablehlo.add %x, %x : tensor<1000xf32>
    %b = stablehlo.add %a, %x : tensor<1000xf32>
    stablehlo.return %b : tensor<1000xf32>
  }) {perf.branch_weights = array<f64: 1.0, 0.0>} : (tensor<i32>) -> tensor<1000xf32>
  return %0, %1, %2 : tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>
}

// CHECK-LABEL: func.func @dead_code
func.func @dead_code(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // Nothing reads the loop or the multiply but the loop: XLA removes both, and what the
  // loop would run, before it compiles. Only the live add costs (220 ns).
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // CHECK: stablehlo.multiply {{.*}}perf.latency_ns = 0.000000e+00 : f64, perf.model = "dead-code"
  %m = stablehlo.multiply %x, %x : tensor<1000xf32>
  // CHECK: stablehlo.while{{.*}}perf.latency_ns = 0.000000e+00 : f64, perf.model = "dead-code"
  %r:2 = stablehlo.while(%i = %c0, %v = %m) : tensor<i32>, tensor<1000xf32>
  cond {
    %n = stablehlo.constant dense<7> : tensor<i32>
    // CHECK: stablehlo.compare {{.*}}perf.model = "dead-code"
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %i2 = stablehlo.add %i, %one : tensor<i32>
    // CHECK: stablehlo.add {{.*}}perf.latency_ns = 0.000000e+00 : f64, perf.model = "dead-code"
    %v2 = stablehlo.add %v, %v : tensor<1000xf32>
    stablehlo.return %i2, %v2 : tensor<i32>, tensor<1000xf32>
  }
  // CHECK: stablehlo.add {{.*}}perf.latency_ns = 2.200000e+02 : f64, perf.model = "roofline"
  %0 = stablehlo.add %x, %x : tensor<1000xf32>
  return %0 : tensor<1000xf32>
}
