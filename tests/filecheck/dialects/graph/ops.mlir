// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// Every graph op, type and attribute; custom -> custom and generic -> custom must
// print the same text.

graph.model @tiny arch "llama" symbols {D = 16, E = 64, H = 4, I = 128, K = 32, KV = 2, L = 2, M = 8, N = 16, V = 256} {
  graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
  graph.weight @wpe : [M, E] f32 hf "transformer.wpe.weight"
  graph.weight @"layers.{i}.attn_norm" : [E] f32 hf "model.layers.{i}.input_layernorm.weight" gguf "blk.{i}.attn_norm.weight"
  graph.weight @"layers.{i}.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" [E, 3 * E] slice(1, 0, E) transpose
  graph.weight @"layers.{i}.bq" : [E] f32 hf "transformer.h.{i}.attn.c_attn.bias" [3*E] slice(0, 0, E)
  graph.weight @"layers.{i}.wk" : [KV*D, E] q8_0 gguf "blk.{i}.attn_k.weight"
  graph.weight @"layers.{i}.wv_fused" : [KV*D, E] q8_0 gguf "blk.{i}.attn_qkv.weight" [(H + 2*KV)*D, E] slice(0, (H+KV)*D, (H+2*KV)*D)
  graph.weight @"layers.{i}.wv" : [KV*D, E] bf16 hf "model.layers.{i}.self_attn.v_proj.weight"
  graph.weight @"layers.{i}.wo" : [E, H*D] f32 hf "model.layers.{i}.self_attn.o_proj.weight"
  graph.weight @"layers.{i}.ln_g" : [E] f32 hf "h.{i}.ln.weight"
  graph.weight @"layers.{i}.ln_b" : [E] f32 hf "h.{i}.ln.bias"
  graph.weight @"layers.{i}.w_gate" : [I, E] f32 hf "model.layers.{i}.mlp.gate_proj.weight"
  graph.weight @"layers.{i}.w_up" : [I, E] f32 hf "model.layers.{i}.mlp.up_proj.weight"
  graph.weight @"layers.{i}.w_down" : [E, I] f32 hf "model.layers.{i}.mlp.down_proj.weight"
  graph.weight @norm : [E] f32 hf "model.norm.weight"
  graph.weight @lm_head : [V, E] f32 tied_to @embed
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %e = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    %x = graph.pos_embed %e {weights = [@wpe]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %h = graph.rmsnorm %x {weights = [@"layers.{i}.attn_norm"], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %q = graph.linear %h {weights = [@"layers.{i}.wq", @"layers.{i}.bq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %k = graph.linear %h {weights = [@"layers.{i}.wk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
    %v = graph.linear %h {weights = [@"layers.{i}.wv"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
    %q2, %k2 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>)
    %o = graph.attention %q2, %k2, %v heads H kv_heads KV head_dim D {causal} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>, !graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, E], f32>
    %a = graph.linear %o {weights = [@"layers.{i}.wo"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %x1 = graph.add %x, %a : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %h2 = graph.layernorm %x1 {weights = [@"layers.{i}.ln_g", @"layers.{i}.ln_b"], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %g = graph.linear %h2 {weights = [@"layers.{i}.w_gate"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %u = graph.linear %h2 {weights = [@"layers.{i}.w_up"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %s = graph.swiglu %g, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %sm = graph.mul %s, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %ge = graph.gelu %sm {approximate = "tanh"} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %r = graph.relu %ge {schedule = #graph.schedule<vectorize = 8>} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %d = graph.linear %r {weights = [@"layers.{i}.w_down"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
    %x2 = graph.add %x1, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x2 : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %h = graph.rmsnorm %x {weights = [@norm], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    %p = graph.softmax %logits {when = ["prefill", "decode"]} : (!graph.tensor<[T, V], f32>) -> !graph.tensor<[T, V], f32>
    %tgt = graph.input "targets" : !graph.tensor<[T], i32>
    %loss = graph.cross_entropy %logits, %tgt {when = ["backward"]} : (!graph.tensor<[T, V], f32>, !graph.tensor<[T], i32>) -> !graph.tensor<[1], f32>
    %ma = graph.input "a" : !graph.tensor<[M, K], f32>
    %mb = graph.input "b" : !graph.tensor<[K, N], f32>
    %c = graph.matmul %ma, %mb {schedule = #graph.schedule<tile_m = 8, tile_n = 8, tile_k = 8, vectorize = 8>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
    %cr = graph.fused_matmul_relu %ma, %mb : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
    graph.output %logits, %loss : !graph.tensor<[T, V], f32>, !graph.tensor<[1], f32>
  }
}

// An empty model and a model without sections round-trip too.
graph.model @empty arch "none" symbols {} {
}

// The printed form (identical for both RUN lines):
// CHECK: builtin.module {
// CHECK-NEXT: graph.model @tiny arch "llama" symbols {D = 16, E = 64, H = 4, I = 128, K = 32, KV = 2, L = 2, M = 8, N = 16, V = 256} {
// CHECK-NEXT: graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @wpe : [M, E] f32 hf "transformer.wpe.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32 hf "model.layers.{i}.input_layernorm.weight" gguf "blk.{i}.attn_norm.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" [E, 3*E] slice(1, 0, E) transpose
// CHECK-NEXT: graph.weight @"layers.{i}.bq" : [E] f32 hf "transformer.h.{i}.attn.c_attn.bias" [3*E] slice(0, 0, E)
// CHECK-NEXT: graph.weight @"layers.{i}.wk" : [KV*D, E] q8_0 gguf "blk.{i}.attn_k.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.wv_fused" : [KV*D, E] q8_0 gguf "blk.{i}.attn_qkv.weight" [(H+2*KV)*D, E] slice(0, (H+KV)*D, (H+2*KV)*D)
// CHECK-NEXT: graph.weight @"layers.{i}.wv" : [KV*D, E] bf16 hf "model.layers.{i}.self_attn.v_proj.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.wo" : [E, H*D] f32 hf "model.layers.{i}.self_attn.o_proj.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.ln_g" : [E] f32 hf "h.{i}.ln.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.ln_b" : [E] f32 hf "h.{i}.ln.bias"
// CHECK-NEXT: graph.weight @"layers.{i}.w_gate" : [I, E] f32 hf "model.layers.{i}.mlp.gate_proj.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.w_up" : [I, E] f32 hf "model.layers.{i}.mlp.up_proj.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.w_down" : [E, I] f32 hf "model.layers.{i}.mlp.down_proj.weight"
// CHECK-NEXT: graph.weight @norm : [E] f32 hf "model.norm.weight"
// CHECK-NEXT: graph.weight @lm_head : [V, E] f32 tied_to @embed
// CHECK-NEXT: graph.header {
// CHECK-NEXT: %tok = graph.input "tokens" : !graph.tensor<[T], i32>
// CHECK-NEXT: %e = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %x = graph.pos_embed %e {weights = [@wpe]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: graph.yield %x : !graph.tensor<[T, E], f32>
// CHECK-NEXT: }
// CHECK-NEXT: graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
// CHECK-NEXT: %h = graph.rmsnorm %x {weights = [@"layers.{i}.attn_norm"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %q = graph.linear %h {weights = [@"layers.{i}.wq", @"layers.{i}.bq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %k = graph.linear %h {weights = [@"layers.{i}.wk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
// CHECK-NEXT: %v = graph.linear %h {weights = [@"layers.{i}.wv"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
// CHECK-NEXT: %q2, %k2 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>)
// CHECK-NEXT: %o = graph.attention %q2, %k2, %v heads H kv_heads KV head_dim D {causal} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, KV*D], f32>, !graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %a = graph.linear %o {weights = [@"layers.{i}.wo"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %x1 = graph.add %x, %a : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %h2 = graph.layernorm %x1 {weights = [@"layers.{i}.ln_g", @"layers.{i}.ln_b"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %g = graph.linear %h2 {weights = [@"layers.{i}.w_gate"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %u = graph.linear %h2 {weights = [@"layers.{i}.w_up"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %s = graph.swiglu %g, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %sm = graph.mul %s, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %ge = graph.gelu %sm {approximate = "tanh"} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %r = graph.relu %ge {schedule = #graph.schedule<vectorize = 8>} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
// CHECK-NEXT: %d = graph.linear %r {weights = [@"layers.{i}.w_down"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %x2 = graph.add %x1, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: graph.yield %x2 : !graph.tensor<[T, E], f32>
// CHECK-NEXT: }
// CHECK-NEXT: graph.footer (%x : !graph.tensor<[T, E], f32>) {
// CHECK-NEXT: %h = graph.rmsnorm %x {weights = [@norm], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK-NEXT: %logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
// CHECK-NEXT: %p = graph.softmax %logits {when = ["prefill", "decode"]} : (!graph.tensor<[T, V], f32>) -> !graph.tensor<[T, V], f32>
// CHECK-NEXT: %tgt = graph.input "targets" : !graph.tensor<[T], i32>
// CHECK-NEXT: %loss = graph.cross_entropy %logits, %tgt {when = ["backward"]} : (!graph.tensor<[T, V], f32>, !graph.tensor<[T], i32>) -> !graph.tensor<[1], f32>
// CHECK-NEXT: %ma = graph.input "a" : !graph.tensor<[M, K], f32>
// CHECK-NEXT: %mb = graph.input "b" : !graph.tensor<[K, N], f32>
// CHECK-NEXT: %c = graph.matmul %ma, %mb {schedule = #graph.schedule<tile_m = 8, tile_n = 8, tile_k = 8, vectorize = 8>} : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: %cr = graph.fused_matmul_relu %ma, %mb : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
// CHECK-NEXT: graph.output %logits, %loss : !graph.tensor<[T, V], f32>, !graph.tensor<[1], f32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: graph.model @empty arch "none" symbols {} {
// CHECK-NEXT: }
// CHECK-NEXT: }
