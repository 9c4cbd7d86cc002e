// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --plan-views --plan-layout | filecheck %s
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} --plan-views | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-backward{max-context=16} --plan-views | filecheck %s --check-prefix=BWD
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-views{inplace=false} --plan-layout | filecheck %s --check-prefix=OFF
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-views --plan-layout | sed -e 's/ size 256 inplace$/ size 256/' | ckir-opt --verify-diagnostics | filecheck %s --check-prefix=LIE
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-qkv --fuse-gate-up --fuse-add-rmsnorm --plan-views | filecheck %s --check-prefix=FUSED
// RUN: ckir-opt %s --split-input-file --plan-views | filecheck %s --check-prefix=HAND

// Prefill: the residual adds write over the residual stream (header.x dies at each
// add: the norm before it read it last), so the whole stream lives in one slot;
// swiglu writes over gate.  The plan places them as inplace views of their roots.
// (The KV append views, copies = 4: plan-views-kv.mlir.)
// CHECK:      lowered.program @prefill mode "prefill" max_context 16 attributes {views = {copies = 4 : i64, inplace = 6 : i64}} {
// CHECK:      lowered.view @prefill.layers.0.x1 of @prefill.header.x offset 0 {inplace} : !lowered.buf<[16, 64], f32>
// CHECK:      lowered.view @prefill.layers.0.m of @prefill.layers.0.gate offset 0 {inplace} : !lowered.buf<[16, 172], f32>
// CHECK:      lowered.view @prefill.layers.0.x2 of @prefill.header.x offset 0 {inplace} : !lowered.buf<[16, 64], f32>
// CHECK:      lowered.call @add_f32(@prefill.header.x, @prefill.layers.0.o) -> (@prefill.layers.0.x1)
// CHECK:      lowered.call @swiglu_f32(@prefill.layers.0.gate, @prefill.layers.0.up) -> (@prefill.layers.0.m)
// CHECK:      layout.slot @prefill.header.x offset {{[0-9]+}} size 4096 role activation canary {{[0-9]+}} live "prefill" 0 29
// CHECK:      layout.view @prefill.layers.0.x1 of @prefill.header.x offset 0 size 4096 inplace
// CHECK:      layout.view @prefill.layers.0.m of @prefill.layers.0.gate offset 0 size 11008 inplace
// CHECK:      layout.totals {{{.*}}copies_removed = 4 : i64{{.*}}saved.inplace = 38400 : i64, saved.views = 8192 : i64

// GPT-2 decode: gelu writes over its input too; the logits (io) keep their slot.
// GPT2:      lowered.view @decode.layers.0.g of @decode.layers.0.f offset 0 {inplace} : !lowered.buf<[1, 256], f32>
// GPT2:      lowered.buffer @decode.footer.logits io

// Backward: a forward add whose first input is saved for the backward (header.x is
// read again by rmsnorm_bwd) writes over the second one; gradient sums reuse too.
// BWD:      lowered.program @backward mode "backward" max_context 16 attributes {views = {copies = 0 : i64, inplace = 14 : i64}} {
// BWD:      lowered.view @backward.layers.0.x1 of @backward.layers.0.o offset 0 {inplace}
// BWD:      lowered.view @backward.layers.1.dh2_2 of @backward.layers.1.dh2 offset 0 {inplace}
// BWD:      lowered.program @optimize mode "optimize" max_context 16 attributes {views = {copies = 0 : i64, inplace = 0 : i64}} {

// Fused add+RMSNorm: its residual sum s writes over the dying stream (its norm h
// keeps a buffer of its own: h is no element-by-element function of a or b).
// FUSED:      attributes {fused = {add_rmsnorm = 4 : i64, gate_up = 2 : i64, qkv = 2 : i64}, views = {copies = 4 : i64, inplace = 4 : i64}} {
// FUSED:      lowered.view @decode.layers.0.x1 of @decode.header.x offset 0 {inplace} : !lowered.buf<[1, 64], f32>
// FUSED:      lowered.call @add_rmsnorm_f32(@decode.header.x, @decode.layers.0.o, @w.layers.0.mlp_norm) -> (@decode.layers.0.x1, @decode.layers.0.h2)

// inplace=false: nothing is aliased in place, the counts say so (the KV append still is).
// OFF-NOT:  {inplace}
// OFF:      attributes {views = {copies = 4 : i64, inplace = 0 : i64}}
// OFF:      saved.inplace = 0 : i64

// A plan that drops the inplace mark of a view the program has is rejected.
// LIE: layout.view @decode.layers.0.x1 is not inplace but view @decode.layers.0.x1 of lowered.program @decode is

// Hand-written: the add's first input is read after it (no reuse of it), the second
// one dies there (reused); an output that is io (the manifest hands it out) keeps its
// buffer; an input of another size is never reused (the last add skips e, dying
// there but of 8 floats, and writes over a, which dies there too).
// HAND:      lowered.buffer @p.a activation
// HAND-NEXT: lowered.buffer @p.b activation
// HAND-NEXT: lowered.view @p.c of @p.b offset 0 {inplace} : !lowered.buf<[4], f32>
// HAND-NEXT: lowered.buffer @p.d io : !lowered.buf<[4], f32> {source = "output"}
// HAND-NEXT: lowered.buffer @p.e activation : !lowered.buf<[8], f32>
// HAND-NEXT: lowered.view @p.f of @p.a offset 0 {inplace} : !lowered.buf<[4], f32>
lowered.model @m {
  lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32 extent "n", b: read f32 extent "n", out: write f32 extent "n") params (n: i64) constraints ["n >= 1"]
  lowered.program @p mode "decode" max_context 4 {
    lowered.buffer @p.a activation : !lowered.buf<[4], f32>
    lowered.buffer @p.b activation : !lowered.buf<[4], f32>
    lowered.buffer @p.c activation : !lowered.buf<[4], f32>
    lowered.buffer @p.d io : !lowered.buf<[4], f32> {source = "output"}
    lowered.buffer @p.e activation : !lowered.buf<[8], f32>
    lowered.buffer @p.f activation : !lowered.buf<[4], f32>
    lowered.call @add_f32(@p.a, @p.b) -> (@p.c) {n = 4 : i64}
    lowered.call @add_f32(@p.a, @p.c) -> (@p.d) {n = 4 : i64}
    lowered.call @add_f32(@p.e, @p.a) -> (@p.f) {n = 4 : i64}
  }
}
