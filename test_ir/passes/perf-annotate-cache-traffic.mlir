// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cache-traffic{target=%inputs/unit_gpu.toml},perf-annotate-cycles{target=%inputs/unit_gpu.toml})' | FileCheck %s
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{target=%inputs/unit_gpu.toml})' | FileCheck %s --check-prefix=NOCACHE
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cache-traffic{target=%inputs/unit.toml})' --report %t.json > /dev/null && FileCheck %s --check-prefix=NOTGPU < %t.json

// unit_gpu.toml: 16 KiB L2 at 1000 B/ns, DRAM 100 B/ns, vector 100 FLOP/ns, 100 ns per kernel.
// Each 1000-element f32 tensor is 4000 B, so four fit in L2.

// CHECK-LABEL: func.func @chain
// NOCACHE-LABEL: func.func @chain
func.func @chain(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // %x comes from outside: read once from DRAM (4000 B) + write 4000 B; no hits.
  // CHECK: stablehlo.add {{.*}}perf.cache_model = "l2-residency", {{.*}}perf.dram_bytes = 8000 : i64, {{.*}}perf.l2_hit_rate = 0.000000e+00 : f64
  %a = stablehlo.add %x, %x : tensor<1000xf32>
  // %a is still in L2: DRAM only for the 4000 B written. Memory term: 4000 B / 100 + 8000 B / 1000
  // = 48 ns, + 100 ns launch = 148 ns (without the cache pass: 12000 B / 100 + 100 = 220 ns).
  // CHECK: stablehlo.multiply {{.*}}perf.dram_bytes = 4000 : i64, {{.*}}perf.l2_hit_rate = 1.000000e+00 : f64, perf.latency_ns = 1.480000e+02 : f64, perf.model = "roofline+l2"
  // NOCACHE: stablehlo.multiply {{.*}}perf.dram_bytes = 12000 : i64, perf.latency_ns = 2.200000e+02 : f64, perf.model = "roofline"
  %b = stablehlo.multiply %a, %a : tensor<1000xf32>
  return %b : tensor<1000xf32>
}

// CHECK-LABEL: func.func @evicted
func.func @evicted(%x: tensor<1000xf32>, %y: tensor<1000xf32>, %z: tensor<1000xf32>) -> tensor<1000xf32> {
  // x, y, a (12000 B) resident; b = y * z brings z and b: 20000 B > 16 KiB evicts x (least recent).
  %a = stablehlo.add %x, %y : tensor<1000xf32>
  %b = stablehlo.multiply %y, %z : tensor<1000xf32>
  // %x was evicted, %a was not: half of the 8000 B read hits.
  // CHECK: stablehlo.subtract {{.*}}perf.dram_bytes = 8000 : i64, {{.*}}perf.l2_hit_rate = 5.000000e-01 : f64
  %c = stablehlo.subtract %a, %x : tensor<1000xf32>
  return %c : tensor<1000xf32>
}

// NOTGPU: "caveats": ["perf-annotate-cache-traffic: target 'unit' is not a GPU; skipped"
