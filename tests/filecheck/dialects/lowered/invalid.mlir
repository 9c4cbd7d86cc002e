// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of the lowered dialect.  The
// lowered.call cases check calls against runtime/registry.yaml.

// unknown dtype (parse error)
// CHECK: unknown dtype 'f64' (expected one of f32, bf16, f16, i32, i64, q8_0, q4_0, q4_1, q4_k)
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
// CHECK: unknown run-time symbol 'Q' (expected T, P or PT)
lowered.model @m {
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
// CHECK: lowered.model @m: 'lowered.model' is not allowed at model level (only lowered.buffer, lowered.view, lowered.program)
lowered.model @m {
  lowered.model @inner {
  }
}

// -----

// unknown mode
// CHECK: lowered.program @train: unknown mode "train" (expected prefill, decode, backward)
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

// 'comment' as a parameter (generic form)
// CHECK: lowered.call @relu_f32: 'comment' is reserved for the call's comment, not a parameter
lowered.model @m {
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
    lowered.buffer @x activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @y activation : !lowered.buf<[4, 64], f32>
    lowered.buffer @t io : !lowered.buf<[4], i32>
    "lowered.call"() <{kernel = @relu_f32, ins = [@x], outs = [@y], params = {n = 256 : i64, comment = "c"}}> : () -> ()
  }
}

// -----

// parameter of a bad kind
// CHECK: lowered.call @relu_f32: parameter n = "many" must be an integer, a float or a #lowered.rt<..> run-time symbol
lowered.model @m {
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

// unknown kernel
// CHECK: lowered.call @relu_f64: kernel is not in the kernel registry
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

// parameters differ from the registry
// CHECK: lowered.call @gemm_f32: parameters do not match the registry (missing K; unknown L); expected M, N, K
lowered.model @m {
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
// CHECK: lowered.call @rmsnorm_f32: parameter eps is f32, a run-time symbol is not allowed
lowered.model @m {
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

// registry constraint violated
// CHECK: lowered.call @gemm_f32: constraint 'M >= 1' violated (M=0)
lowered.model @m {
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
  lowered.buffer @w weight : !lowered.buf<[64, 64], f32> {source = "w"}
  lowered.buffer @b weight : !lowered.buf<[64], f32> {source = "b"}
  lowered.program @prefill mode "prefill" max_context 4 {
  }
  lowered.call @relu_f32(@w) -> (@w) {n = 4 : i64}
}
