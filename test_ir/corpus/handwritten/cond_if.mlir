// Hand-written, not generated: jax 0.10.2 lowers lax.cond to stablehlo.case on an
// i32 index and never emits stablehlo.if. Same computation as ../cond.mlir, with
// the i1 predicate feeding stablehlo.if directly (true branch first).
module @cond_if {
  func.func public @main(%x: tensor<16x16xf32> loc("x"), %w: tensor<16x16xf32> loc("w")) -> tensor<16x16xf32> {
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc("test_ir/corpus/handwritten/cond_if.mlir":6:5)
    %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<16x16xf32>, tensor<f32>) -> tensor<f32> loc("test_ir/corpus/handwritten/cond_if.mlir":7:5)
    %pred = stablehlo.compare GT, %sum, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1> loc("test_ir/corpus/handwritten/cond_if.mlir":8:5)
    %r = "stablehlo.if"(%pred) ({
      %mm = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":10:7)
      stablehlo.return %mm : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":11:7)
    }, {
      %s = stablehlo.sine %x : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":13:7)
      %two = stablehlo.constant dense<2.000000e+00> : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":14:7)
      %m = stablehlo.multiply %s, %two : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":15:7)
      stablehlo.return %m : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":16:7)
    }) : (tensor<i1>) -> tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":9:5)
    return %r : tensor<16x16xf32> loc("test_ir/corpus/handwritten/cond_if.mlir":18:5)
  } loc("test_ir/corpus/handwritten/cond_if.mlir":5:3)
} loc("test_ir/corpus/handwritten/cond_if.mlir":4:1)
