// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// Every kernel op and the schedule attribute; custom -> custom and generic -> custom
// print the same text.

kernel.func @mm {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %bias = kernel.input "bias" : !graph.tensor<[N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 32, tile_n = 64, tile_k = 128, vectorize = 16, unroll = 2, order = nmk, mr = 6>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %r = kernel.relu %c {schedule = #kernel.schedule<vectorize = 8>} : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
  %f = kernel.matmul_relu %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %l = kernel.linear %a, %b, %bias {activation = "gelu"} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>, !graph.tensor<[N], f32>) -> !graph.tensor<[M, N], f32>
  %l2 = kernel.linear %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %r, %f, %l, %l2 : !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>
}

kernel.func @plain {
  %x = kernel.input "x" : !graph.tensor<[7], f32>
  %y = kernel.relu %x : (!graph.tensor<[7], f32>) -> !graph.tensor<[7], f32>
  kernel.output %y : !graph.tensor<[7], f32>
}

// CHECK: builtin.module {
// CHECK-NEXT: kernel.func @mm {
// CHECK-NEXT: %a = kernel.input "A" : !graph.tensor<[M, K], f32>
// CHECK-NEXT: %b = kernel.input "B" : !graph.tensor<[K, N], f32>
// CHECK-NEXT: %bias = kernel.input "bias" : !graph.tensor<[N], f32>
// CHECK-NEXT: %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 32, tile_n = 64, tile_k = 128, vectorize = 16, unroll = 2, order = nmk, mr = 6>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: %r = kernel.relu %c {schedule = #kernel.schedule<vectorize = 8>} : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: %f = kernel.matmul_relu %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: %l = kernel.linear %a, %b, %bias {activation = "gelu"} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>, !graph.tensor<[N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: %l2 = kernel.linear %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: kernel.output %r, %f, %l, %l2 : !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>
// CHECK-NEXT: }
// CHECK-NEXT: kernel.func @plain {
// CHECK-NEXT: %x = kernel.input "x" : !graph.tensor<[7], f32>
// CHECK-NEXT: %y = kernel.relu %x : (!graph.tensor<[7], f32>) -> !graph.tensor<[7], f32>
// CHECK-NEXT: kernel.output %y : !graph.tensor<[7], f32>
// CHECK-NEXT: }
// CHECK-NEXT: }
