builtin.module {
  graph.model @llama arch "llama" symbols {C = 128, D = 16, E = 64, H = 4, I = 172, KV = 2, L = 2, V = 256} {
    graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
    graph.weight @final_norm : [E] f32 hf "model.norm.weight"
    graph.weight @lm_head : [V, E] f32 hf "lm_head.weight"
    graph.weight @"layers.{i}.attn_norm" : [E] f32 hf "model.layers.{i}.input_layernorm.weight"
    graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32 hf "model.layers.{i}.self_attn.q_proj.weight"
    graph.weight @"layers.{i}.attn.wk" : [KV*D, E] f32 hf "model.layers.{i}.self_attn.k_proj.weight"
    graph.weight @"layers.{i}.attn.wv" : [KV*D, E] f32 hf "model.layers.{i}.self_attn.v_proj.weight"
    graph.weight @"layers.{i}.attn.wo" : [E, H*D] f32 hf "model.layers.{i}.self_attn.o_proj.weight"
    graph.weight @"layers.{i}.mlp_norm" : [E] f32 hf "model.layers.{i}.post_attention_layernorm.weight"
    graph.weight @"layers.{i}.mlp.gate" : [I, E] f32 hf "model.layers.{i}.mlp.gate_proj.weight"
    graph.weight @"layers.{i}.mlp.up" : [I, E] f32 hf "model.layers.{i}.mlp.up_proj.weight"
    graph.weight @"layers.{i}.mlp.down" : [E, I] f32 hf "model.layers.{i}.mlp.down_proj.weight"
    graph.header {
      %tokens = graph.input "tokens" : !graph.tensor<[T], i32>
      %x = graph.embed %tokens {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
      graph.yield %x : !graph.tensor<[T, E], f32>
    }
    graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
      %h = graph.rmsnorm %x {weights = [@"layers.{i}.attn_norm"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %q = graph.linear %h {weights = [@"layers.{i}.attn.wq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, H*D], f32>
      %k = graph.linear %h {weights = [@"layers.{i}.attn.wk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
      %v = graph.linear %h {weights = [@"layers.{i}.attn.wv"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
      %qr, %kr = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
      %a = graph.attention %qr, %kr, %v heads H kv_heads KV head_dim D {causal} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>, !graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, H*D], f32>
      %o = graph.linear %a {weights = [@"layers.{i}.attn.wo"]} : (!graph.tensor<[T, H*D], f32>) -> !graph.tensor<[T, E], f32>
      %x1 = graph.add %x, %o : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %h2 = graph.rmsnorm %x1 {weights = [@"layers.{i}.mlp_norm"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %gate = graph.linear %h2 {weights = [@"layers.{i}.mlp.gate"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
      %up = graph.linear %h2 {weights = [@"layers.{i}.mlp.up"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
      %m = graph.swiglu %gate, %up : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
      %d = graph.linear %m {weights = [@"layers.{i}.mlp.down"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
      %x2 = graph.add %x1, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      graph.yield %x2 : !graph.tensor<[T, E], f32>
    }
    graph.footer (%x : !graph.tensor<[T, E], f32>) {
      %h = graph.rmsnorm %x {weights = [@final_norm], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
      %logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
      graph.output %logits : !graph.tensor<[T, V], f32>
    }
  }
}
