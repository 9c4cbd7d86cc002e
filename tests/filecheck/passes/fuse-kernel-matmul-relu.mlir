// RUN: ckir-opt %s --split-input-file --fuse-kernel-matmul-relu | filecheck %s

// kernel.matmul whose single use is kernel.relu -> kernel.matmul_relu with the
// matmul's schedule; what fired is counted on the kernel.func.

kernel.func @mm {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 4, unroll = 2, order = nkm>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %r = kernel.relu %c {schedule = #kernel.schedule<vectorize = 4>} : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %r : !graph.tensor<[M, N], f32>
}

// CHECK:      kernel.func @mm attributes {fused = {matmul_relu = 1 : i64}} {
// CHECK-NEXT:   %a = kernel.input "A"
// CHECK-NEXT:   %b = kernel.input "B"
// CHECK-NEXT:   %r = kernel.matmul_relu %a, %b {schedule = #kernel.schedule<tile_m = 4, unroll = 2, order = nkm>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT:   kernel.output %r : !graph.tensor<[M, N], f32>

// -----

// The matmul is also returned: two uses, no fusion (and no fused attribute).
kernel.func @two_uses {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %r = kernel.relu %c : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %r, %c : !graph.tensor<[M, N], f32>, !graph.tensor<[M, N], f32>
}

// CHECK:      kernel.func @two_uses {
// CHECK-NEXT:   %a = kernel.input "A"
// CHECK-NEXT:   %b = kernel.input "B"
// CHECK-NEXT:   %c = kernel.matmul %a, %b
// CHECK-NEXT:   %r = kernel.relu %c

// -----

// A relu of something else than a matmul stays.
kernel.func @relu_only {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %r = kernel.relu %a : (!graph.tensor<[M, K], f32>) -> !graph.tensor<[M, K], f32>
  kernel.output %r : !graph.tensor<[M, K], f32>
}

// CHECK:      kernel.func @relu_only {
// CHECK-NEXT:   %a = kernel.input "A"
// CHECK-NEXT:   %r = kernel.relu %a
