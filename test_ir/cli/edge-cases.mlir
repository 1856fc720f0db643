// Modules that are odd but valid get a report with explicit caveats, never a crash.
// RUN: stablehlo-perf-opt %s --report %t.json -o %t.mlir && FileCheck %s < %t.json
// RUN: FileCheck %s --check-prefix=IR < %t.mlir

// The entry function has no ops: nothing to run.
// CHECK: "total_latency_ns": 0.0
// CHECK: "critical_path": []
// CHECK: "caveats": ["func.call at {{.*}}edge-cases.mlir:27:8: recursive call to @rec counted once"]
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// Dead code and unused results are still annotated.
// IR-LABEL: func.func private @dead
// IR: stablehlo.add {{.*}}perf.latency_ns
// IR: stablehlo.multiply {{.*}}perf.latency_ns
func.func private @dead(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.multiply %a, %a : tensor<4xf32>
  return %a : tensor<4xf32>
}

// A recursive call is counted once and said so.
// IR-LABEL: func.func @rec
// IR: call @rec{{.*}}perf.model = "call(@rec)"
func.func @rec(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @rec(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
