func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mydialect.frobnicate %a : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
