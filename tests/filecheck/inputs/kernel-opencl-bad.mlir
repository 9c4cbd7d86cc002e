// an out-of-range hint: refused with one error line (tests/filecheck/tools/kernel-lower-opencl.mlir)
kernel.func @mm {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<unroll = 17>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}
