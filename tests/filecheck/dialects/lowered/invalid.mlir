// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of the lowered dialect.  The
// lowered.call cases check calls against the lowered.kernel declarations of
// their model (copied from runtime/registry*.yaml where the kernel exists).

// unknown dtype (parse error)
// CHECK: unknown dtype 'f64' (expected one of f32, f32p, bf16, bf16p, f16, i32, i64, q8_0, q8_0p, q4_0, q4_0p, q4_1, q4_1p, q4_k, q5_k, q6_k, q4_kp, q5_kp, q6_kp, q5_0, q5_1, q5_0p, q5_1p)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4], f64>
  }
}

// -----

// dims must be positive (parse error)
// CHECK: lowered.buf: dims must be positive, got [4, 0]
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 0], f32>
  }
}

// -----

// a buffer needs a dim (parse error)
// CHECK: lowered.buf: a buffer needs at least one dim
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[], f32>
  }
}

// -----

// quantized rows hold whole blocks (parse error)
// CHECK: lowered.buf: q8_0 rows must be a multiple of 32 elements, got 48
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[4, 48], q8_0> {source = "w"}
  lowered.program @prefill mode "prefill" max_context 4 {
  }
}

// -----

// unknown run-time symbol (parse error)
// CHECK: unknown run-time symbol 'Q' (expected T, P, PT, step, lr)
lowered.model @m {
  lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @add_f32(@x, @x) -> (@y) {n = #lowered.rt<Q>}
  }
}

// -----

// unknown buffer role (parse error)
// CHECK: unknown buffer role 'temp' (expected one of weight, kv_cache, activation, io, scratch, grad, optimizer_state)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x temp : !lowered.buf<[4, 64], f32>
  }
}

// -----

// two programs for one mode
// CHECK: lowered.model @m: programs @prefill and @prefill2 both have mode "prefill" (at most one program per mode)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
  }
  lowered.program @prefill2 mode "prefill" max_context 4 {
  }
}

// -----

// op not allowed at model level
// CHECK: lowered.model @m: 'lowered.model' is not allowed at model level (only lowered.kernel, lowered.buffer, lowered.view, lowered.program)
lowered.model @m {
  lowered.model @inner {
  }
}

// -----

// unknown mode
// CHECK: lowered.program @train: unknown mode "train" (expected prefill, decode, backward, optimize)
lowered.model @m {
  lowered.program @train mode "train" max_context 4 {
  }
}

// -----

// max_context not positive
// CHECK: lowered.program @prefill: max_context 0 must be positive
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 0 {
  }
}

// -----

// op not allowed in a program
// CHECK: lowered.program @prefill: 'lowered.model' is not allowed in a program (only lowered.buffer, lowered.view, lowered.call)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.model @inner {
    }
  }
}

// -----

// local symbol shadows a model symbol
// CHECK: lowered.program @prefill: local lowered.buffer @w shadows a symbol of lowered.model @m
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @w activation : !lowered.buf<[4, 64], f32>
  }
}

// -----

// unknown role (generic form)
// CHECK: lowered.buffer @x: unknown role 'temp' (expected one of weight, kv_cache, activation, io, scratch, grad, optimizer_state)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    "lowered.buffer"() <{sym_name = "x", buffer_role = "temp", buffer_type = !lowered.buf<[4, 64], f32>}> : () -> ()
  }
}

// -----

// activation at model level
// CHECK: lowered.buffer @x: role activation belongs inside a lowered.program, not at model level
lowered.model @m {
  lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
  lowered.program @prefill mode "prefill" max_context 4 {
  }
}

// -----

// kv_cache inside a program
// CHECK: lowered.buffer @k: role kv_cache belongs at lowered.model level, not inside a program
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @k kv_cache : !lowered.buf<[4, 64], f32>
  }
}

// -----

// weight without a source
// CHECK: lowered.buffer @w: a weight buffer needs a source
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32>
  lowered.program @prefill mode "prefill" max_context 4 {
  }
}

// -----

// negative view offset
// CHECK: lowered.view @v: offset -4 is negative
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.view @v of @x offset -4 : !lowered.buf<[4, 64], f32>
  }
}

// -----

// view root not declared
// CHECK: lowered.view @v: root @nothing is not declared
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.view @v of @nothing offset 0 : !lowered.buf<[4, 64], f32>
  }
}

// -----

// view of a view
// CHECK: lowered.view @v2: root @v is a view; views alias a buffer
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.view @v of @x offset 0 : !lowered.buf<[4, 64], f32>
    lowered.view @v2 of @v offset 0 : !lowered.buf<[4, 64], f32>
  }
}

// -----

// view root is not a buffer
// CHECK: lowered.view @v: root @prefill is a lowered.program, not a lowered.buffer
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
  }
  lowered.view @v of @prefill offset 0 : !lowered.buf<[4, 64], f32>
}

// -----

// view exceeds its root
// CHECK: lowered.view @v: bytes [64, 1088) exceed root @x of 1024 bytes
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.view @v of @x offset 64 : !lowered.buf<[4, 64], f32>
  }
}

// -----

// 'origin' as a parameter (generic form)
// CHECK: lowered.call @relu_f32: 'origin' is reserved for the call's origin, not a parameter
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    "lowered.call"() <{kernel = @relu_f32, ins = [@x], outs = [@y], params = {n = 256 : i64, origin = "c"}}> : () -> ()
  }
}

// -----

// parameter of a bad kind
// CHECK: lowered.call @relu_f32: parameter n = "many" must be an integer, a float, an array<f32: ...> or a #lowered.rt<..> run-time symbol
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@x) -> (@y) {n = "many"}
  }
}

// -----

// undeclared buffer
// CHECK: lowered.call @relu_f32: input @nothing is not a buffer or view of lowered.program @prefill or its model
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@nothing) -> (@y) {n = 256 : i64}
  }
}

// -----

// operand is not a buffer
// CHECK: lowered.call @relu_f32: output @prefill is a lowered.program, not a buffer or view
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@x) -> (@prefill) {n = 256 : i64}
  }
}

// -----

// undeclared kernel
// CHECK: lowered.call @relu_f64: the kernel is not declared in lowered.model @m (expected a lowered.kernel declaration)
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f64(@x) -> (@y) {n = 256 : i64}
  }
}

// -----

// wrong number of operands
// CHECK: lowered.call @gemm_bias_f32: takes 3 input(s) and 1 output(s) (x, w, b -> y), got 2 and 1
lowered.model @m {
  lowered.kernel @gemm_bias_f32 op "linear" c "ckir_gemm_bias_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, b: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @gemm_bias_f32(@x, @w) -> (@y) {M = 4 : i64, N = 64 : i64, K = 64 : i64}
  }
}

// -----

// operand dtype differs
// CHECK: lowered.call @relu_f32: operand x = @t has dtype i32, the kernel expects f32
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@t) -> (@y) {n = 4 : i64}
  }
}

// -----

// parameters differ from the declaration
// CHECK: lowered.call @gemm_f32: parameters do not match the declaration (missing K; unknown L); expected M, N, K
lowered.model @m {
  lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @gemm_f32(@x, @w) -> (@y) {M = 4 : i64, N = 64 : i64, L = 64 : i64}
  }
}

// -----

// run-time symbol for a float parameter
// CHECK: lowered.call @rmsnorm_f32: parameter eps is f32, the run-time symbol T is i64
lowered.model @m {
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @rmsnorm_f32(@x, @b) -> (@y) {T = 4 : i64, E = 64 : i64, eps = #lowered.rt<T>}
  }
}

// -----

// float for an integer parameter
// CHECK: lowered.call @relu_f32: parameter n must be an i64 integer
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@x) -> (@y) {n = 2.560000e+02 : f64}
  }
}

// -----

// declared constraint violated
// CHECK: lowered.call @gemm_f32: constraint 'M >= 1' violated (M=0)
lowered.model @m {
  lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @gemm_f32(@x, @w) -> (@y) {M = 0 : i64, N = 64 : i64, K = 64 : i64}
  }
}

// -----

// kernel not available in the program's mode
// CHECK: lowered.call @gemv_f32: kernel is not available in mode "prefill" (modes: decode)
lowered.model @m {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @gemv_f32(@x, @w) -> (@y) {N = 64 : i64, K = 64 : i64}
  }
}

// -----

// call outside a program
// CHECK: 'lowered.call' expects parent op 'lowered.program'
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
  }
  lowered.call @relu_f32(@w) -> (@w) {n = 4 : i64}
}

// -----

// the kernel symbol names a buffer, not a declaration
// CHECK: lowered.call @w: the kernel names a lowered.buffer in lowered.model @m (expected a lowered.kernel declaration)
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.call @w(@x) -> (@x) {}
  }
}

// -----

// the call is checked against its declaration, not the registry: this model
// declares relu_f32 on bf16 buffers, so an f32 buffer is wrong here
// CHECK: lowered.call @relu_f32: operand x = @x has dtype f32, the kernel expects bf16
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "backward"] (x: read bf16, out: write bf16) params (n: i64)
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], bf16>
    lowered.call @relu_f32(@x) -> (@y) {n = 256 : i64}
  }
}

// -----

// an output bound to an operand the kernel only reads
// CHECK: lowered.call @relu_f32: output @y is bound to operand x, which the kernel only reads
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @z activation : !lowered.buf<[4, 64], f32>
    lowered.call @relu_f32() -> (@y, @z) {n = 256 : i64}
  }
}

// -----

// an input bound to an operand the kernel writes
// CHECK: lowered.call @rope_f32: input @q is bound to operand q, which the kernel writes (readwrite); pass it as an output
lowered.model @m {
  lowered.kernel @rope_f32 op "rope" c "ckir_rope_f32" modes ["prefill", "decode", "backward"] (q: readwrite f32, k: readwrite f32) params (T: i64, H: i64, KV: i64, D: i64, P: i64, theta: f32)
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @q activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @k activation : !lowered.buf<[4, 32], f32>
    lowered.call @rope_f32(@q) -> (@k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.0e+04 : f64}
  }
}

// -----

// unknown operand access (parse error)
// CHECK: unknown access 'reads' (expected one of read, write, readwrite)
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: reads f32) params ()
}

// -----

// unknown operand dtype (parse error)
// CHECK: unknown dtype 'f8' (expected one of f32, f32p, bf16, bf16p, f16, i32, i64, q8_0, q8_0p, q4_0, q4_0p, q4_1, q4_1p, q4_k, q5_k, q6_k, q4_kp, q5_kp, q6_kp, q5_0, q5_1, q5_0p, q5_1p)
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f8) params ()
}

// -----

// unknown parameter type (parse error)
// CHECK: unknown parameter type 'f64' (expected i64 or f32)
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f32) params (n: f64)
}

// -----

// a declaration's C name must be a C identifier
// CHECK: lowered.kernel @k: c name 'my-kernel' is not a C identifier
lowered.model @m {
  lowered.kernel @k op "relu" c "my-kernel" modes ["decode"] (x: read f32) params ()
}

// -----

// unknown mode in a declaration
// CHECK: lowered.kernel @k: modes must be distinct and drawn from prefill, decode, backward, optimize, got [decode, train]
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode", "train"] (x: read f32) params ()
}

// -----

// a kernel without buffer operands
// CHECK: lowered.kernel @k: a kernel needs at least one buffer operand
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] () params (n: i64)
}

// -----

// an operand and a parameter share a name
// CHECK: lowered.kernel @k: duplicate operand/parameter name(s) n
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (n: read f32) params (n: i64)
}

// -----

// a constraint over an undeclared name
// CHECK: lowered.kernel @k: bad constraint: unknown name 'm' (params: n)
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f32) params (n: i64) constraints ["m >= 1"]
}

// -----

// declarations live at model level
// CHECK: 'lowered.kernel' expects parent op 'lowered.model'
lowered.model @m {
  lowered.program @decode mode "decode" max_context 4 {
    lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f32) params ()
  }
}

// -----

// a fusion origin lists the origins it replaces
// CHECK: lowered.origin: fusion "fuse-x" lists no replaced origins
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["decode", "backward"] (x: read f32, out: write f32) params (n: i64)
  lowered.program @decode mode "decode" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[1, 64], f32>
    lowered.call @relu_f32(@x) -> (@x) {n = 64 : i64, origin = #lowered.origin<scope "header", fusion "fuse-x", of []>}
  }
}

// -----

// an origin without a scope
// CHECK: lowered.origin: the scope must not be empty
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["decode", "backward"] (x: read f32, out: write f32) params (n: i64)
  lowered.program @decode mode "decode" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[1, 64], f32>
    lowered.call @relu_f32(@x) -> (@x) {n = 64 : i64, origin = #lowered.origin<scope "", op "graph.relu">}
  }
}

// -----

// memory overrun (issue 11): a kv_store whose rows are 96 floats (KVD = 96) into
// a cache of 32-float rows; the extent (P+T)*KVD at P+T = max_context = 8
// needs 768 elements, the cache holds 256
// CHECK: lowered.call @kv_store_f32: operand kcache = @kv.0.k holds 256 elements, but the kernel may access 768 (extent "(P+T)*KVD" at KVD=96, P=0, T=8; run-time values at their largest)
lowered.model @m {
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.buffer @kv.0.k kv_cache : !lowered.buf<[8, 32], f32>
  lowered.buffer @kv.0.v kv_cache : !lowered.buf<[8, 32], f32>
  lowered.program @prefill mode "prefill" max_context 8 {
    lowered.buffer @k activation : !lowered.buf<[8, 96], f32>
    lowered.buffer @v activation : !lowered.buf<[8, 96], f32>
    lowered.call @kv_store_f32(@k, @v) -> (@kv.0.k, @kv.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 96 : i64}
  }
}

// -----

// the same in decode: one token (T = 1) at P <= max_context - 1
// CHECK: lowered.call @kv_store_f32: operand k = @k holds 32 elements, but the kernel may access 96 (extent "T*KVD" at KVD=96, T=1; run-time values at their largest)
lowered.model @m {
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64)
  lowered.buffer @kv.0.k kv_cache : !lowered.buf<[8, 96], f32>
  lowered.buffer @kv.0.v kv_cache : !lowered.buf<[8, 96], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @k activation : !lowered.buf<[1, 32], f32>
    lowered.buffer @v activation : !lowered.buf<[1, 96], f32>
    lowered.call @kv_store_f32(@k, @v) -> (@kv.0.k, @kv.0.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 96 : i64}
  }
}

// -----

// an extent over a float parameter
// CHECK: lowered.kernel @k: operand x: extent 'n*eps' names eps, which is not an i64 parameter
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f32 extent "n*eps") params (n: i64, eps: f32)
}

// -----

// a malformed extent
// CHECK: lowered.arg x: bad extent 'n*'
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: read f32 extent "n*") params (n: i64)
}

// -----

// an extent that does not divide exactly
// CHECK: lowered.call @k: operand x: cannot evaluate extent "n/3"
lowered.model @m {
  lowered.kernel @k op "relu" c "k" modes ["decode"] (x: write f32 extent "n/3") params (n: i64)
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @x activation : !lowered.buf<[1, 64], f32>
    lowered.call @k() -> (@x) {n = 64 : i64}
  }
}

// -----

// f32p (fp32 in 32-row panels) stores [N, K] matrices only
// CHECK: lowered.buf: f32p buffers are [N, K] matrices, got 3 dims
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[2, 4, 8], f32p> {source = "w"}
}

// -----

// an f32p operand states its extent as a product rows*cols
// CHECK: lowered.arg w: f32p operands state their extent as a product rows*cols (like "N*K"), got 'N+K'
lowered.model @m {
  lowered.kernel @k op "linear" c "k" modes ["decode"] (x: read f32 extent "K", w: read f32p extent "N+K", y: write f32 extent "N") params (N: i64, K: i64)
}

// -----

// the extent of an f32p operand counts whole panels: N = 33, K = 9 touches 2 panels
// of 32x9 = 576 floats; @w ([40, 8]: 2 panels of 32x8) stores 512 (its 320 logical
// elements would pass a count of elements, 297)
// CHECK: lowered.call @k: operand w = @w holds 512 values (whole panels), but the kernel may access 576 (extent "N*K" at K=9, N=33; run-time values at their largest)
lowered.model @m {
  lowered.kernel @k op "linear" c "k" modes ["decode"] (x: read f32 extent "K", w: read f32p extent "N*K", y: write f32 extent "N") params (N: i64, K: i64)
  lowered.buffer @w weight : !lowered.buf<[40, 8], f32p> {source = "w"}
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @x activation : !lowered.buf<[1, 9], f32>
    lowered.buffer @y activation : !lowered.buf<[1, 33], f32>
    lowered.call @k(@x, @w) -> (@y) {N = 33 : i64, K = 9 : i64}
  }
}

// -----

// bf16p (bf16 in 32-row panels of k pairs) needs an even K
// CHECK: lowered.buf: bf16p buffers hold K in groups of 2 (pairs of k), got K = 7
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[40, 7], bf16p> {source = "w"}
}

// -----

// a bf16p extent counts values (bf16), not bytes, in whole panels: N = 33, K = 10
// touches 2 panels of 32x10 = 640 values; @w ([40, 8]: 2 panels of 32x8) stores 512
// CHECK: lowered.call @k: operand w = @w holds 512 values (whole panels), but the kernel may access 640 (extent "N*K" at K=10, N=33; run-time values at their largest)
lowered.model @m {
  lowered.kernel @k op "linear" c "k" modes ["decode"] (x: read f32 extent "K", w: read bf16p extent "N*K", y: write f32 extent "N") params (N: i64, K: i64)
  lowered.buffer @w weight : !lowered.buf<[40, 8], bf16p> {source = "w"}
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @x activation : !lowered.buf<[1, 10], f32>
    lowered.buffer @y activation : !lowered.buf<[1, 33], f32>
    lowered.call @k(@x, @w) -> (@y) {N = 33 : i64, K = 10 : i64}
  }
}

// -----

// q8_0p (Q8_0 blocks in 32-row panels) needs K % 32 == 0
// CHECK: lowered.buf: q8_0p rows must be a multiple of 32 elements, got 48
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[40, 48], q8_0p> {source = "w"}
}

// -----

// q8_0p buffers are [N, K] matrices
// CHECK: lowered.buf: q8_0p buffers are [N, K] matrices, got 3 dims
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[2, 40, 64], q8_0p> {source = "w"}
}

// -----

// a q8_0p extent counts logical values in whole panels: N = 33, K = 64 touches 2 panels
// of 32x64 = 4096 values; @w ([32, 64]: 1 panel) stores 2048
// CHECK: lowered.call @k: operand w = @w holds 2048 values (whole panels), but the kernel may access 4096 (extent "N*K" at K=64, N=33; run-time values at their largest)
lowered.model @m {
  lowered.kernel @k op "linear" c "k" modes ["decode"] (x: read f32 extent "K", w: read q8_0p extent "N*K", y: write f32 extent "N") params (N: i64, K: i64)
  lowered.buffer @w weight : !lowered.buf<[32, 64], q8_0p> {source = "w"}
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[1, 33], f32>
    lowered.call @k(@x, @w) -> (@y) {N = 33 : i64, K = 64 : i64}
  }
}

// -----

// q4_1p (Q4_1 blocks in 32-row panels) needs K % 32 == 0
// CHECK: lowered.buf: q4_1p rows must be a multiple of 32 elements, got 48
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[40, 48], q4_1p> {source = "w"}
}

// -----

// q4_1p buffers are [N, K] matrices
// CHECK: lowered.buf: q4_1p buffers are [N, K] matrices, got 3 dims
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[2, 40, 64], q4_1p> {source = "w"}
}

// -----

// a q4_1p extent counts logical values in whole panels: N = 33, K = 64 touches 2 panels
// of 32x64 = 4096 values; @w ([32, 64]: 1 panel) stores 2048
// CHECK: lowered.call @k: operand w = @w holds 2048 values (whole panels), but the kernel may access 4096 (extent "N*K" at K=64, N=33; run-time values at their largest)
lowered.model @m {
  lowered.kernel @k op "linear" c "k" modes ["decode"] (x: read f32 extent "K", w: read q4_1p extent "N*K", y: write f32 extent "N") params (N: i64, K: i64)
  lowered.buffer @w weight : !lowered.buf<[32, 64], q4_1p> {source = "w"}
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[1, 33], f32>
    lowered.call @k(@x, @w) -> (@y) {N = 33 : i64, K = 64 : i64}
  }
}

// -----

// an unknown phase (parse error)
// CHECK: unknown phase 'middle' (expected one of prologue, steady, epilogue)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4], f32> {phase = #lowered.phase<middle>}
  }
}

// -----

// a steady phase needs its layer (parse error)
// CHECK: Expected integer literal (the layer index)
lowered.model @m {
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4], f32> {phase = #lowered.phase<steady>}
  }
}

// -----

// an f32s table where the kernel takes a scalar
// CHECK: lowered.call @relu_f32: parameter n must be an i64 integer
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@x) -> (@y) {n = array<f32: 1.0, 2.0>}
  }
}

// -----

// a scalar where the kernel takes an f32s table
// CHECK: lowered.call @relu_f32: parameter t is f32s; a scalar does not fit it
lowered.model @m {
  lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64, t: f32s) constraints ["n >= 1"]
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    lowered.call @relu_f32(@x) -> (@y) {n = 256 : i64, t = 1.0 : f32}
  }
}
