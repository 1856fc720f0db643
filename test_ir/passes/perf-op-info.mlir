// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-op-info)' | FileCheck %s

// FLOPs follow XLA's HloCostAnalysis; bytes are every operand and result once.

// CHECK-LABEL: func.func @dot
func.func @dot(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // 2 * (4*16 outputs) * 8 = 1024 FLOPs; (32 + 128 + 64) * 4 = 896 bytes.
  // CHECK: stablehlo.dot_general {{.*}}{perf.bytes = 896 : i64, perf.flops = 1024 : i64, perf.id = 0 : i64}
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @batched_bf16
func.func @batched_bf16(%a: tensor<3x5x7xbf16>, %b: tensor<3x7x2xbf16>) -> tensor<3x5x2xbf16> {
  // 2 * (3*5*2) * 7 = 420 FLOPs; (105 + 42 + 30) * 2 = 354 bytes.
  // CHECK: stablehlo.dot_general {{.*}}{perf.bytes = 354 : i64, perf.flops = 420 : i64
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<3x5x7xbf16>, tensor<3x7x2xbf16>) -> tensor<3x5x2xbf16>
  return %0 : tensor<3x5x2xbf16>
}

// CHECK-LABEL: func.func @conv_same
func.func @conv_same(%x: tensor<1x4x4x2xf32>, %w: tensor<3x3x2x5xf32>) -> tensor<1x4x4x5xf32> {
  // SAME 3x3 on 4x4, pad 1: per spatial dim the real (output, tap) pairs are
  // 3 + 4 + 3 = 10, so 10*10 = 100 positions; 2 * 2 in-features * 5 out * 100 = 2000.
  // bytes: (32 + 90 + 80) * 4 = 808.
  // CHECK: stablehlo.convolution{{.*}} perf.bytes = 808 : i64, perf.flops = 2000 : i64
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x2xf32>, tensor<3x3x2x5xf32>) -> tensor<1x4x4x5xf32>
  return %0 : tensor<1x4x4x5xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // One FLOP per element for add; transcendentals are not FLOPs; convert is one per element.
  // CHECK: stablehlo.add {{.*}}{perf.bytes = 36 : i64, perf.flops = 6 : i64
  %0 = stablehlo.add %a, %a : tensor<2x3xf16>
  // CHECK: stablehlo.exponential {{.*}}{perf.bytes = 24 : i64, perf.flops = 0 : i64
  %1 = stablehlo.exponential %0 : tensor<2x3xf16>
  // CHECK: stablehlo.convert {{.*}}{perf.bytes = 36 : i64, perf.flops = 6 : i64
  %2 = stablehlo.convert %1 : (tensor<2x3xf16>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reduce_sum
func.func @reduce_sum(%a: tensor<4x6xf32>) -> tensor<4xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  // (24 inputs - 4 outputs) reduction steps of one add each = 20 FLOPs.
  // bytes: (24 + 1 + 4) * 4 = 116.
  // CHECK: stablehlo.reduce{{.*}}perf.bytes = 116 : i64, perf.flops = 20 : i64
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @zero_size
func.func @zero_size(%a: tensor<0x7xf32>) -> tensor<0x7xf32> {
  // CHECK: stablehlo.add {{.*}}{perf.bytes = 0 : i64, perf.flops = 0 : i64
  %0 = stablehlo.add %a, %a : tensor<0x7xf32>
  return %0 : tensor<0x7xf32>
}

// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // CHECK: stablehlo.add {{.*}}{perf.id = {{[0-9]+}} : i64, perf.model = "unknown-shape"}
  %0 = stablehlo.add %a, %a : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// CHECK-LABEL: func.func @huge
func.func @huge(%a: tensor<4294967296x4294967296xf32>) -> tensor<4294967296x4294967296xf32> {
  // 2^64 elements: 2^64 FLOPs and 3 * 2^66 bytes do not fit in i64; the IR gets
  // INT64_MAX and a warning, the report keeps the exact numbers.
  // CHECK: stablehlo.add {{.*}}perf.bytes = 9223372036854775807 : i64, perf.flops = 9223372036854775807 : i64, perf.id = {{[0-9]+}} : i64, perf.warning = "perf.flops = 18446744073709551616 exceeds int64; clamped here, exact in the report; perf.bytes = 221360928884514619392 exceeds int64; clamped here, exact in the report"
  %0 = stablehlo.add %a, %a : tensor<4294967296x4294967296xf32>
  return %0 : tensor<4294967296x4294967296xf32>
}
