// perf.branch_weights with three weights on a two-branch case (an error at the case).
func.func @main(%i: tensor<i32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<4xf32>
  }, {
    stablehlo.return %c : tensor<4xf32>
  }) {perf.branch_weights = array<f64: 1.0, 0.0, 2.0>} : (tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
