// --annotate-quant: a QConfig (or defaults) finalises the table's qbits and the weights'
// storage, from which lowering picks its kernels; a qbits no kernel serves is named.
// RUN: ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{config="%inputs/qconfig-mixed.yaml"}' 2>%t.err > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: filecheck %s --check-prefix=WARN < %t.err
// The finalised entries round-trip.
// RUN: ckir-opt %t.mlir | diff - %t.mlir
// RUN: ckir-opt %t.mlir --print-op-generic | ckir-opt | diff - %t.mlir
// Lowering reads the storage: q8_0 in layer 0, q4_0 in layer 1 (layers: 1: {weights: 4}).
// RUN: ckir-opt %t.mlir --lower-decode{max-context=16} | filecheck %s --check-prefix=DECODE
// Defaults as options; --dtype's shorthand; strict.
// RUN: ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{weights=16}' 2>&1 | filecheck %s --check-prefix=BF16
// RUN: ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{dtype=q4_1}' 2>&1 | filecheck %s --check-prefix=Q41
// RUN: not ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{weights=4 strict=true}' 2>&1 | filecheck %s --check-prefix=STRICT
// Bad QConfigs: one line naming the file and the key.
// RUN: not ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{config="%inputs/qconfig-bad-key.yaml"}' 2>&1 | filecheck %s --check-prefix=BADKEY
// RUN: not ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{config="%inputs/qconfig-bad-bits.yaml"}' 2>&1 | filecheck %s --check-prefix=BADBITS
// RUN: not ckir-opt %inputs/tiny_llama.mlir '--annotate-quant{config="%inputs/qconfig-bad-yaml.yaml"}' 2>&1 | filecheck %s --check-prefix=BADYAML

// weights: 8 covers the matrices (the embedding table too), not the norms.
// CHECK:      graph.weight @embed : [V, E] q8_0 {{.*}} {tensor = {role = "embedding", layout = "[V, E]", qbits = 8 : i64}}
// CHECK-NEXT: graph.weight @final_norm : [E] f32 {{.*}} {tensor = {role = "weight", layout = "[E]", qbits = 32 : i64}}
// lm_head: {weights: 3}: no format has 3 bits; it stays f32 and says what was asked.
// CHECK-NEXT: graph.weight @lm_head : [V, E] f32 {{.*}} {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64, requested = 3 : i64}}
// Per-layer: layer 1 takes 4 bits.
// CHECK:      graph.weight @"layers.{i}.attn.wq" : [H*D, E] q8_0 {{.*}} {tensor = {role = "weight", layout = "[N, K]", qbits = 8 : i64, layer_qbits = [8 : i64, 4 : i64]}, layer_dtypes = "q8_0,q4_0"}
// A glob on the name: "layers.*.mlp.down": 16.
// CHECK:      graph.weight @"layers.{i}.mlp.down" : [E, I] bf16 {{.*}} {tensor = {role = "weight", layout = "[N, K]", qbits = 16 : i64}}
// activations: 8 covers what a linear reads: int8 where its weight is Q8_0 / Q4.
// CHECK:      %x = graph.embed %tokens {tensor = {role = "activation", layout = "[T, E]", qbits = 32 : i64}
// CHECK:      %h = graph.rmsnorm %x {tensor = {role = "activation", layout = "[T, E]", qbits = 8 : i64}
// CHECK:      graph.attention {{.*}} {kv = {role = "kv", layout = "[PT, KV, D]", qbits = 8 : i64}, tensor = {role = "activation", layout = "[T, H, D]", qbits = 8 : i64}
// CHECK:      %m = graph.swiglu %gate, %up {tensor = {role = "activation", layout = "[T, I]", qbits = 32 : i64, requested = 8 : i64}}

// WARN:      warning: graph.weight lm_head (tensor 'lm_head.weight'): weights: 3 asked, stays 32 (f32): no weight format has 3 bits
// WARN-NEXT: warning: graph.swiglu layers.{i}.m: activations: 8 asked, stays 32: graph.linear reads it with weight layers.{i}.mlp.down in bf16; int8 activations go with q8_0 / q4_0 / q4_1 weights only
// WARN-NEXT: warning: graph.rmsnorm footer.h: activations: 8 asked, stays 32: graph.lm_head reads it with weight lm_head in f32
// WARN-NEXT: warning: --annotate-quant: 3 of 32 tensors keep other qbits than asked (no kernel serves them)

// DECODE: lowered.buffer @w.layers.0.attn.wq weight : !lowered.buf<[64, 64], q8_0>
// DECODE: lowered.buffer @w.layers.1.attn.wq weight : !lowered.buf<[64, 64], q4_0>
// DECODE: lowered.call @gemv_q8_0(@decode.layers.0.h, @w.layers.0.attn.wq)
// DECODE: lowered.call @gemv_bf16(@decode.layers.0.m, @w.layers.0.mlp.down)
// DECODE: lowered.call @gemv_q4_0(@decode.layers.1.h, @w.layers.1.attn.wq)

// BF16-NOT: warning
// BF16: graph.weight @"layers.{i}.mlp.down" : [E, I] bf16 {{.*}} qbits = 16 : i64
// BF16-NOT: warning

// Q41: warning: graph.weight layers.{i}.mlp.down (tensor 'model.layers.{i}.mlp.down_proj.weight'): weights: 4 asked, stays 32 (f32): K = I = 172 is not a multiple of 32 (q4_1's block along K)
// Q41: warning: --annotate-quant: 1 of 32 tensors
// Q41: graph.weight @"layers.{i}.attn.wq" : [H*D, E] q4_1 {{.*}} qbits = 4 : i64

// STRICT: error: --strict: --annotate-quant: 1 of 32 tensors keep other qbits than asked (no kernel serves them): graph.weight layers.{i}.mlp.down
// STRICT-NOT: Traceback

// BADKEY: error: {{.*}}qconfig-bad-key.yaml: key 'layers.1.weigths': unknown (expected weights, activations or kv)
// BADBITS: error: {{.*}}qconfig-bad-bits.yaml: key 'weights': expected a number of bits from 1 to 32, got 'eight'
// BADYAML: error: {{.*}}qconfig-bad-yaml.yaml: not valid YAML (line 2)
