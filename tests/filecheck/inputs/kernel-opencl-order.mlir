// kernel.linear with a bias and silu, order = kmn, scalar (tests/filecheck/tools/kernel-lower-opencl.mlir)
kernel.func @lin {
  %x = kernel.input "X" : !graph.tensor<[M, K], f32>
  %w = kernel.input "W" : !graph.tensor<[K, N], f32>
  %b = kernel.input "bias" : !graph.tensor<[N], f32>
  %y = kernel.linear %x, %w, %b {activation = "silu", schedule = #kernel.schedule<tile_m = 2, tile_n = 16, tile_k = 4, vectorize = 1, unroll = 3, order = kmn>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>, !graph.tensor<[N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %y : !graph.tensor<[M, N], f32>
}
