builtin.module {
  graph.model @gpt2 arch "gpt2" symbols {C = 128, D = 16, E = 64, H = 4, I = 256, L = 2, V = 256} {
    graph.weight @embed : [V, E] f32 hf "transformer.wte.weight"
    graph.weight @pos : [C, E] f32 hf "transformer.wpe.weight"
    graph.weight @final_norm : [E] f32 hf "transformer.ln_f.weight"
    graph.weight @final_norm.bias : [E] f32 hf "transformer.ln_f.bias"
    graph.weight @lm_head : [V, E] f32 tied_to @embed
    graph.weight @"layers.{i}.attn_norm" : [E] f32 hf "transformer.h.{i}.ln_1.weight"
    graph.weight @"layers.{i}.attn_norm.bias" : [E] f32 hf "transformer.h.{i}.ln_1.bias"
    graph.weight @"layers.{i}.attn.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" [E, 3*E] slice(1, 0, E) transpose
    graph.weight @"layers.{i}.attn.wk" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" [E, 3*E] slice(1, E, 2*E) transpose
    graph.weight @"layers.{i}.attn.wv" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" [E, 3*E] slice(1, 2*E, 3*E) transpose
    graph.weight @"layers.{i}.attn.bq" : [E] f32 hf "transformer.h.{i}.attn.c_attn.bias" [3*E] slice(0, 0, E)
    graph.weight @"layers.{i}.attn.bk" : [E] f32 hf "transformer.h.{i}.attn.c_attn.bias" [3*E] slice(0, E, 2*E)
    graph.weight @"layers.{i}.attn.bv" : [E] f32 hf "transformer.h.{i}.attn.c_attn.bias" [3*E] slice(0, 2*E, 3*E)
    graph.weight @"layers.{i}.attn.wo" : [E, E] f32 hf "transformer.h.{i}.attn.c_proj.weight" [E, E] transpose
    graph.weight @"layers.{i}.attn.bo" : [E] f32 hf "transformer.h.{i}.attn.c_proj.bias"
    graph.weight @"layers.{i}.mlp_norm" : [E] f32 hf "transformer.h.{i}.ln_2.weight"
    graph.weight @"layers.{i}.mlp_norm.bias" : [E] f32 hf "transformer.h.{i}.ln_2.bias"
    graph.weight @"layers.{i}.mlp.fc" : [I, E] f32 hf "transformer.h.{i}.mlp.c_fc.weight" [E, I] transpose
    graph.weight @"layers.{i}.mlp.bfc" : [I] f32 hf "transformer.h.{i}.mlp.c_fc.bias"
    graph.weight @"layers.{i}.mlp.proj" : [E, I] f32 hf "transformer.h.{i}.mlp.c_proj.weight" [I, E] transpose
    graph.weight @"layers.{i}.mlp.bproj" : [E] f32 hf "transformer.h.{i}.mlp.c_proj.bias"
    graph.header {
      %tokens = graph.input "tokens" : !graph.tensor<[T], i32>
      %e = graph.embed %tokens {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
      %x = graph.pos_embed %e {weights = [@pos]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      graph.yield %x : !graph.tensor<[T, E], f32>
    }
    graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
      %h = graph.layernorm %x {weights = [@"layers.{i}.attn_norm", @"layers.{i}.attn_norm.bias"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %q = graph.linear %h {weights = [@"layers.{i}.attn.wq", @"layers.{i}.attn.bq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %k = graph.linear %h {weights = [@"layers.{i}.attn.wk", @"layers.{i}.attn.bk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %v = graph.linear %h {weights = [@"layers.{i}.attn.wv", @"layers.{i}.attn.bv"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %a = graph.attention %q, %k, %v heads H kv_heads H head_dim D {causal} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %o = graph.linear %a {weights = [@"layers.{i}.attn.wo", @"layers.{i}.attn.bo"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %x1 = graph.add %x, %o : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %h2 = graph.layernorm %x1 {weights = [@"layers.{i}.mlp_norm", @"layers.{i}.mlp_norm.bias"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %f = graph.linear %h2 {weights = [@"layers.{i}.mlp.fc", @"layers.{i}.mlp.bfc"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
      %g = graph.gelu %f {approximate = "tanh"} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
      %d = graph.linear %g {weights = [@"layers.{i}.mlp.proj", @"layers.{i}.mlp.bproj"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
      %x2 = graph.add %x1, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      graph.yield %x2 : !graph.tensor<[T, E], f32>
    }
    graph.footer (%x : !graph.tensor<[T, E], f32>) {
      %h = graph.layernorm %x {weights = [@final_norm, @final_norm.bias], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
      graph.output %logits : !graph.tensor<[T, V], f32>
    }
  }
}
