// RUN: ckir kernel lower %s --target opencl 2>&1 | filecheck %s

// `ckir kernel lower --target opencl`: one __kernel per op; the schedule sets the
// work-group (ceil(tile_m / mr) x ceil(tile_n / (vectorize * unroll)) work-items),
// the local tiles, the vector width of the loads and accumulators and their count
// (mr rows x unroll vectors per work-item; mr unset: the largest divisor of tile_m
// up to 4).

kernel.func @mm {
  %a = kernel.input "A" : !graph.tensor<[M, K], f32>
  %b = kernel.input "B" : !graph.tensor<[K, N], f32>
  %c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 8, tile_n = 32, tile_k = 16, vectorize = 4, unroll = 2, order = mnk>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
  %r = kernel.relu %c : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>
  kernel.output %r : !graph.tensor<[M, N], f32>
}

// the matmul + relu are fused; the relu runs on the accumulators
// CHECK:      static inline float4 ckir_load4(__global const float *p, const long n) {
// CHECK-NEXT:   if (n >= 4) return vload4(0, p);
// CHECK:      /* kernel.func @mm: kernel.matmul_relu %r: tile_m=8 tile_n=32 tile_k=16 vectorize=4 unroll=2 order=mnk mr=4 */
// CHECK:      __kernel __attribute__((reqd_work_group_size(4, 2, 1)))
// CHECK-NEXT: void mm_op2(__global const float *restrict A, __global const float *restrict B, __global float *restrict C, const long M, const long N, const long K, const long m_off, const long n_off, const long k_lo, const long k_hi) {
// CHECK-NEXT:   __local float As[128];
// CHECK-NEXT:   __local float Bs[512];
// CHECK:        const long m0 = m_off + (long)get_group_id(1) * 8;
// CHECK-NEXT:   const long n0 = n_off + (long)get_group_id(0) * 32;
// CHECK:        const long row = m0 + ly * 4;
// CHECK:        float4 acc0_0, acc0_1, acc1_0, acc1_1, acc2_0, acc2_1, acc3_0, acc3_1;
// CHECK:        for (long k0 = k_lo; k0 < k_hi; k0 += 16) {
// CHECK:            ckir_stage4(As + i * 16 + j, A + (gr < m1 ? gr : 0) * K + gc,
// CHECK:          barrier(CLK_LOCAL_MEM_FENCE);
// CHECK:          for (int kk = 0; kk < kn; kk++, b += 32) {
// CHECK-NEXT:       /* the 2 B loads of this k, each used for the 4 row(s) */
// CHECK-NEXT:       const float4 b0 = vload4(0, b), b1 = vload4(1, b);
// CHECK-NEXT:       const float4 a0 = (float4)(a[kk]);
// CHECK-NEXT:       acc0_0 = fma(a0, b0, acc0_0);
// CHECK-NEXT:       acc0_1 = fma(a0, b1, acc0_1);
// CHECK-NEXT:       const float4 a1 = (float4)(a[16 + kk]);
// CHECK-NEXT:       acc1_0 = fma(a1, b0, acc1_0);
// CHECK-NEXT:       acc1_1 = fma(a1, b1, acc1_1);
// CHECK:            acc3_1 = fma(a3, b1, acc3_1);
// CHECK-NEXT:     }
// CHECK-NEXT:     barrier(CLK_LOCAL_MEM_FENCE);
// CHECK-NEXT:   }
// CHECK-NEXT:   /* the relu epilogue, in registers */
// CHECK-NEXT:   acc0_0 = select((float4)(0.0f), acc0_0, acc0_0 > 0.0f);
// CHECK:        if (row >= m1) return;
// CHECK-NEXT:   if (col + 0 < n1) ckir_store4(acc0_0, C + row * N + col + 0, n1 - (col + 0));
// CHECK-NEXT:   if (col + 4 < n1) ckir_store4(acc0_1, C + row * N + col + 4, n1 - (col + 4));
// CHECK-NEXT:   if (row + 1 >= m1) return;
// CHECK-NEXT:   if (col + 0 < n1) ckir_store4(acc1_0, C + (row + 1) * N + col + 0, n1 - (col + 0));


// RUN: ckir kernel lower %inputs/kernel-opencl-order.mlir --target opencl | filecheck %s --check-prefix=ORDER

// order = kmn: the host runs the k tile loop, each launch adds one k tile to C, the
// activation is a separate kernel after the nest.
// ORDER:      /* kernel.func @lin: kernel.linear %y: tile_m=2 tile_n=16 tile_k=4 vectorize=1 unroll=3 order=kmn mr=2 */
// ORDER:      /* NDRange dim 1 = m tiles, dim 0 = n tiles; the host runs the tile loops k, one launch each */
// ORDER:        /* the first k tile starts from the bias / 0, the others from C */
// ORDER-NEXT:   if (k_lo == 0) {
// ORDER-NEXT:     acc0_0 = col + 0 < n1 ? bias[col + 0] : 0.0f;
// ORDER:        else {
// ORDER-NEXT:     acc0_0 = (row < m1 && col + 0 < n1) ? C[row * N + col + 0] : 0.0f;
// ORDER:          const float b0 = b[0], b1 = b[1], b2 = b[2];
// ORDER:          acc1_2 = fma(a1, b2, acc1_2);
// ORDER:      __kernel void lin_op3_epilogue(__global float *restrict C, const long MN) {
// ORDER:        C[i] = (x / (1.0f + exp(-x)));


// RUN: not ckir kernel lower %inputs/kernel-opencl-bad.mlir --target opencl 2>&1 | filecheck %s --check-prefix=BAD
// BAD: error: {{.*}}kernel-opencl-bad.mlir:{{[0-9]+}}:{{[0-9]+}}: kernel.schedule: unroll = 17 must be at most 16
