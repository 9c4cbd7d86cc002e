// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --lower-decode{max-context=16} 2>&1 | filecheck %s --check-prefix=TWICE
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=32} 2>&1 | filecheck %s --check-prefix=CACHE
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=129} 2>&1 | filecheck %s --check-prefix=POS
// RUN: not ckir-opt %s --lower-decode 2>&1 | filecheck %s --check-prefix=NOMODEL
// RUN: sed 's/\[H\*D, E\] f32 hf "model.layers.{i}.self_attn.q_proj/[H*D, E] q4_k hf "model.layers.{i}.self_attn.q_proj/' %inputs/tiny_llama.mlir | not ckir-opt --lower-decode 2>&1 | filecheck %s --check-prefix=KQ

// TWICE: error: lower-decode: the module already has a decode program
// CACHE: error: decode layers.{{[01]}} graph.attention: KV cache @kv.layers.{{[01]}}.{{[kv]}} already has shape [16, 32] from another mode; this mode needs [32, 32] (use the same max-context for every mode)
// POS: error: lower-prefill: max-context 129 exceeds the model's maximum positions C = 128
// NOMODEL: error: lower-decode: expected exactly one graph.model at the top of the module, found 0
// KQ: error: graph.weight @layers.{i}.attn.wq (layers.0.attn.wq): q4_k stores rows of whole 256-element blocks, but its rows have 64 elements

builtin.module {
}
