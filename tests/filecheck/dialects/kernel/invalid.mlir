// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of the kernel dialect.

// unknown schedule field (parse error)
// CHECK: unknown kernel.schedule field 'tile_x' (expected one of tile_m, tile_n, tile_k, vectorize, unroll, order, mr)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_x = 4>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// duplicate schedule field (parse error)
// CHECK: duplicate kernel.schedule field 'tile_m'
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 4, tile_m = 8>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// a tile must be positive
// CHECK: kernel.schedule: tile_k = 0 must be positive
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_k = 0>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// vector width
// CHECK: kernel.schedule: vectorize = 3 must be one of 1, 2, 4, 8, 16
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<vectorize = 3>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// unroll bound
// CHECK: kernel.schedule: unroll = 17 must be at most 16
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<unroll = 17>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// loop order
// CHECK: kernel.schedule: order = mmk must be a permutation of m, n, k (mnk, mkn, nmk, nkm, kmn, knm)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<order = mmk>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// func name
// CHECK: kernel.func @"my-mm": the name must be a C identifier
kernel.func @"my-mm" {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// no output
// CHECK: kernel.func @k: must end with kernel.output
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
}

// -----

// duplicate input
// CHECK: kernel.func @k: duplicate input "A"
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "A" : !graph.tensor<[M, K], f32>
  kernel.output %a : !graph.tensor<[M, K], f32>
}

// -----

// input name
// CHECK: kernel.input "a b": the name must be a C identifier
kernel.func @k {
  %a = kernel.input "a b" : !graph.tensor<[M, K], f32>
  kernel.output %a : !graph.tensor<[M, K], f32>
}

// -----

// input dtype
// CHECK: kernel.input "A": dtype bf16 is not supported (kernels are f32)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], bf16>
  kernel.output %a : !graph.tensor<[M, K], bf16>
}

// -----

// empty output
// CHECK: kernel.output: returns nothing (give at least one tensor)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  kernel.output
}

// -----

// op dtype
// CHECK: kernel.matmul: dtype i32 is not supported (f32 only)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], i32>
  kernel.output %a : !graph.tensor<[M, K], f32>
}

// -----

// rank
// CHECK: kernel.matmul: expects a [M, K] x b [K, N] -> [M, N], got !graph.tensor<[M, K], f32>, !graph.tensor<[K], f32> -> !graph.tensor<[M, N], f32>
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K], f32>
  %c = kernel.matmul %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// inner dims
// CHECK: kernel.matmul_relu: inner dims differ: K (a) vs J (b)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[J, N], f32>
  %c = kernel.matmul_relu %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[J, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// result shape
// CHECK: kernel.matmul: result shape [N, M], expected [M, N]
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[N, M], f32>
  kernel.output %c : !graph.tensor<[N, M], f32>
}

// -----

// field that does not apply
// CHECK: kernel.relu: schedule field tile_k does not apply (this op takes tile_m, tile_n, vectorize, unroll)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %r = kernel.relu %a {schedule = #kernel.schedule<tile_k = 8>} : (!graph.tensor<[M, K], f32>) -> !graph.tensor<[M, K], f32>
  kernel.output %r : !graph.tensor<[M, K], f32>
}

// -----

// relu shape
// CHECK: kernel.relu: result shape [K, M] differs from the operand's [M, K]
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %r = kernel.relu %a : (!graph.tensor<[M, K], f32>) -> !graph.tensor<[K, M], f32>
  kernel.output %r : !graph.tensor<[K, M], f32>
}

// -----

// activation
// CHECK: kernel.linear: activation = "tanh" must be one of none, relu, silu, gelu
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.linear %a, %b {activation = "tanh"} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// bias shape
// CHECK: kernel.linear: bias shape [M], expected [N]
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %z = kernel.input "z" : !graph.tensor<[M], f32>
  %c = kernel.linear %a, %b, %z : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>, !graph.tensor<[M], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// register block rows bound
// CHECK: kernel.schedule: mr = 17 must be at most 16
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<mr = 17>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %c : !graph.tensor<[M, N], f32>
}

// -----

// mr does not apply to a relu
// CHECK: kernel.relu: schedule field mr does not apply (this op takes tile_m, tile_n, vectorize, unroll)
kernel.func @k {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %r = kernel.relu %a {schedule = #kernel.schedule<mr = 4>} : (!graph.tensor<[M, K], f32>) -> !graph.tensor<[M, K], f32>
  kernel.output %r : !graph.tensor<[M, K], f32>
}
