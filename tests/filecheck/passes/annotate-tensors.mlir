// --annotate-tensors: role, layout and qbits on every tensor; the entries round-trip.
// RUN: ckir-opt %inputs/tiny_llama.mlir --annotate-tensors | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --annotate-tensors > %t.mlir && ckir-opt %t.mlir | diff - %t.mlir
// RUN: ckir-opt %t.mlir --print-op-generic | ckir-opt | diff - %t.mlir
// Idempotent: a second run keeps every entry.
// RUN: ckir-opt %t.mlir --annotate-tensors | diff - %t.mlir
// GPT-2: embedding tables (token and positional), biases, layernorm, gelu.
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --annotate-tensors | filecheck %s --check-prefix=GPT2

// CHECK:      graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight" attributes {tensor = {role = "embedding", layout = "[V, E]", qbits = 32 : i64}}
// CHECK-NEXT: graph.weight @final_norm : [E] f32 {{.*}} attributes {tensor = {role = "weight", layout = "[E]", qbits = 32 : i64}}
// CHECK-NEXT: graph.weight @lm_head : [V, E] f32 {{.*}} attributes {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64}}
// CHECK:      graph.weight @"layers.{i}.attn.wk" : [KV*D, E] f32 {{.*}} attributes {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64}}
// CHECK:      %tokens = graph.input "tokens" {tensor = {role = "io", layout = "[T]", qbits = 32 : i64}}
// CHECK:      %x = graph.embed %tokens {tensor = {role = "activation", layout = "[T, E]", qbits = 32 : i64}, weights = [@embed]}
// Heads split out where rope and attention read per head: q by H, k and v by KV.
// CHECK:      %q = graph.linear %h {tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}
// CHECK:      %k = graph.linear %h {tensor = {role = "activation", layout = "[T, KV, D]", qbits = 32 : i64}
// CHECK:      %v = graph.linear %h {tensor = {role = "activation", layout = "[T, KV, D]", qbits = 32 : i64}
// Two results: one entry each.
// CHECK:      graph.rope %q, %k {{.*}} {tensor = [{role = "activation", layout = "[T, H, D]", qbits = 32 : i64}, {role = "activation", layout = "[T, KV, D]", qbits = 32 : i64}]
// The KV cache the attention writes and reads: [context, kv heads, head dim].
// CHECK:      graph.attention {{.*}} {kv = {role = "kv", layout = "[PT, KV, D]", qbits = 32 : i64}, tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}, causal}
// CHECK:      %gate = graph.linear %h2 {tensor = {role = "activation", layout = "[T, I]", qbits = 32 : i64}
// What graph.output returns is io.
// CHECK:      %logits = graph.lm_head %h {tensor = {role = "io", layout = "[T, V]", qbits = 32 : i64}

// GPT2:      graph.weight @embed : {{.*}} {tensor = {role = "embedding", layout = "[V, E]", qbits = 32 : i64}}
// GPT2-NEXT: graph.weight @pos : {{.*}} {tensor = {role = "embedding", layout = "[C, E]", qbits = 32 : i64}}
// GPT2:      graph.weight @lm_head : [V, E] f32 tied_to @embed attributes {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64}}
// GPT2:      graph.weight @"layers.{i}.attn.bq" : [E] f32 {{.*}} {tensor = {role = "weight", layout = "[E]", qbits = 32 : i64}}
// q is [T, E] with E = H*D: split by value.
// GPT2:      %q = graph.linear {{.*}} {tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}
// GPT2:      graph.gelu {{.*}} {tensor = {role = "activation", layout = "[T, I]", qbits = 32 : i64}
