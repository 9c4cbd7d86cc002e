// RUN: ckir-opt %s --split-input-file --lower-kernel | filecheck %s
// RUN: ckir-opt %s --split-input-file --lower-kernel --fuse-kernel-matmul-relu | filecheck %s --check-prefix=FUSED
// RUN: sed 's/vectorize = 8>} : (!graph.tensor<\[M, N\]/tile_k = 4>} : (!graph.tensor<[M, N]/' %s | not ckir-opt --lower-kernel 2>&1 | filecheck %s --check-prefix=BAD

// graph.matmul / graph.relu / graph.fused_matmul_relu become kernel ops; the
// #graph.schedule fields are carried into #kernel.schedule.

kernel.func @mm {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = graph.matmul %a, %b {schedule = #graph.schedule<tile_m = 8, tile_n = 16, tile_k = 32, vectorize = 8>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %r = graph.relu %c {schedule = #graph.schedule<vectorize = 8>} : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
  %f = graph.fused_matmul_relu %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %r, %f : !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>
}

// CHECK:      kernel.func @mm {
// CHECK:        %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 8, tile_n = 16, tile_k = 32, vectorize = 8>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT:   %r = kernel.relu %c {schedule = #kernel.schedule<vectorize = 8>} : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT:   %f = kernel.matmul_relu %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NOT:    = graph.

// FUSED:      kernel.func @mm attributes {fused = {matmul_relu = 1 : i64}} {
// FUSED:        %r = kernel.matmul_relu %a, %b {schedule = #kernel.schedule<tile_m = 8, tile_n = 16, tile_k = 32, vectorize = 8>}
// FUSED-NEXT:   %f = kernel.matmul_relu %a, %b :
// FUSED-NEXT:   kernel.output %r, %f

// BAD: error: lower-kernel: graph.relu %r: schedule field tile_k does not apply to kernel.relu (it takes tile_m, tile_n, vectorize, unroll)

// -----

// A graph op the kernel dialect has no op for is left alone.
kernel.func @other {
  %x = kernel.input "x" : !graph.tensor<[N], f32>
  %y = graph.gelu %x {approximate = "tanh"} : (!graph.tensor<[N], f32>) -> !graph.tensor<[N], f32>
  kernel.output %y : !graph.tensor<[N], f32>
}

// CHECK:      kernel.func @other {
// CHECK:        %y = graph.gelu %x
