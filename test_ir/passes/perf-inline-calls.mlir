// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-inline-calls)' | FileCheck %s
// RUN: stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-inline-calls,perf-fusion{target=%inputs/unit.toml})' | FileCheck %s --check-prefix=FUSED

// Every call is inlined as XLA's CallInliner does before fusion; callees are
// flattened first (@scale calls @relu), private functions left unused are erased,
// a public one stays.

// CHECK-LABEL: func.func @main
// CHECK-NOT: call
// CHECK: stablehlo.multiply
// CHECK: stablehlo.maximum
// CHECK: stablehlo.multiply
// CHECK: stablehlo.maximum
// CHECK: return
// CHECK-NOT: func.func private
// CHECK: func.func @kept
// Inlined ops keep their own location inside a callsite location of the call.
// CHECK: loc(callsite(
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %0 = func.call @scale(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %1 = func.call @scale(%0) : (tensor<64xf32>) -> tensor<64xf32>
  return %1 : tensor<64xf32>
}
func.func private @scale(%a: tensor<64xf32>) -> tensor<64xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<64xf32>
  %1 = func.call @relu(%0) : (tensor<64xf32>) -> tensor<64xf32>
  return %1 : tensor<64xf32>
}
func.func private @relu(%a: tensor<64xf32>) -> tensor<64xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<64xf32>
  %0 = stablehlo.maximum %a, %z : tensor<64xf32>
  return %0 : tensor<64xf32>
}
func.func @kept(%a: tensor<64xf32>) -> tensor<64xf32> {
  %0 = func.call @relu(%a) : (tensor<64xf32>) -> tensor<64xf32>
  return %0 : tensor<64xf32>
}

// Inlined, @main's six ops (two constants) are one loop fusion; with the calls kept,
// each call was a fusion barrier and every callee body a group of its own.
// FUSED-LABEL: func.func @main
// FUSED-COUNT-6: perf.fusion = 0 : i64
// FUSED-NEXT: return
