// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-fusion{target=%inputs/unit.toml},perf-annotate-cycles{target=%inputs/unit.toml})' | FileCheck %s --check-prefix=TPU
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-fusion{target=%inputs/unit_cpu.toml})' | FileCheck %s --check-prefix=CPU

// Group ids are module-wide, numbered block by block in program order.

// TPU-LABEL: func.func @chain
func.func @chain(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  // An elementwise chain is one loop fusion: it reads %x once (4000 B) and
  // writes %c once (4000 B); the intermediates never touch memory.
  // unit.toml roofline: max(2000 FLOPs / 100 = 20 ns, 8000 B / 100 = 80 ns) + 100 ns
  // = 180 ns, shared in proportion to the unfused latencies 220 : 180 : 220.
  // TPU: stablehlo.add {{.*}}perf.fusion = 0 : i64, perf.fusion_kind = "loop", perf.latency_ns = 63.87{{[0-9]*}} : f64, perf.model = "fused-loop:roofline"
  // TPU: stablehlo.exponential {{.*}}perf.fusion = 0 : i64, perf.fusion_kind = "loop", perf.latency_ns = 52.25{{[0-9]*}} : f64
  // TPU: stablehlo.multiply {{.*}}perf.fusion = 0 : i64, perf.fusion_kind = "loop", perf.latency_ns = 63.87{{[0-9]*}} : f64
  %a = stablehlo.add %x, %x : tensor<1000xf32>
  %b = stablehlo.exponential %a : tensor<1000xf32>
  %c = stablehlo.multiply %b, %b : tensor<1000xf32>
  return %c : tensor<1000xf32>
}

// TPU-LABEL: func.func @reduction_root
// CPU-LABEL: func.func @reduction_root
func.func @reduction_root(%x: tensor<8x100xf32>) -> tensor<8xf32> {
  // On TPU the reduce takes its elementwise producer: one input fusion (group 1).
  // XLA:CPU runs a reduction over more than 32 elements as a tree of two kernels
  // and keeps the producer's loop apart (measured on jax 0.10.2).
  // TPU: stablehlo.multiply {{.*}}perf.fusion = 1 : i64, perf.fusion_kind = "input"
  // CPU: stablehlo.multiply {{.*}}perf.fusion = 1 : i64, perf.fusion_kind = "loop"
  %m = stablehlo.multiply %x, %x : tensor<8x100xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  // TPU: stablehlo.reduce{{.*}}perf.fusion = 1 : i64, perf.fusion_kind = "input"
  // CPU: stablehlo.reduce{{.*}}perf.fusion = 2 : i64, perf.fusion_kind = "input"
  %r = stablehlo.reduce(%m init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x100xf32>, tensor<f32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// TPU-LABEL: func.func @dot_epilogue
// CPU-LABEL: func.func @dot_epilogue
func.func @dot_epilogue(%a: tensor<64x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // TPU fuses the bias add and ReLU into the dot (output fusion, group 2); XLA:CPU
  // calls a library dot and fuses the epilogue apart. The fused kernel reads a, w, b
  // and the 64x64 zero constant (65536 B) and writes 16384 B: 819.2 ns at 100 B/ns
  // beats 532480 FLOPs / 1000 = 532.48 ns, so 919.2 ns with the launch, shared
  // 624.288 : 591.52 : 591.52 by the unfused dot, add and maximum.
  // TPU: stablehlo.dot_general {{.*}}perf.fusion = 2 : i64, perf.fusion_kind = "output", perf.latency_ns = 317.51{{[0-9]*}} : f64
  // CPU: stablehlo.dot_general {{.*}}perf.fusion = [[DOT:[0-9]+]] : i64, perf.fusion_kind = "opaque"
  %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // TPU: stablehlo.add {{.*}}perf.fusion = 2 : i64, perf.fusion_kind = "output", perf.latency_ns = 300.84{{[0-9]*}} : f64
  // CPU: stablehlo.add {{.*}}perf.fusion = [[EPI:[0-9]+]] : i64, perf.fusion_kind = "loop"
  %s = stablehlo.add %d, %b : tensor<64x64xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<64x64xf32>
  // TPU: stablehlo.maximum {{.*}}perf.fusion = 2 : i64, perf.fusion_kind = "output"
  // CPU: stablehlo.maximum {{.*}}perf.fusion = [[EPI]] : i64, perf.fusion_kind = "loop"
  %r = stablehlo.maximum %s, %zero : tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
