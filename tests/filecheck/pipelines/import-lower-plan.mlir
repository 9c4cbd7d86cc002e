// End to end on a real (tiny, random) checkpoint: make it, import it, lower it, plan it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python -c "from ckir.tools.zoo import make_tiny_model; make_tiny_model('qwen2', '%t/qwen2', tied=True)" 2>/dev/null
// RUN: ckir import %t/qwen2 -o %t/graph.mlir
// RUN: filecheck %s --check-prefix=GRAPH < %t/graph.mlir
// Every stage prints identically after a re-parse.
// RUN: ckir-opt %t/graph.mlir > %t/graph2.mlir && diff %t/graph.mlir %t/graph2.mlir
// RUN: ckir-opt %t/graph.mlir --lower-decode{max-context=32} --plan-layout{strategy=bump} -o %t/decode.mlir
// RUN: ckir-opt %t/decode.mlir | diff - %t/decode.mlir
// RUN: ckir-opt %t/decode.mlir --print-op-generic | ckir-opt | diff - %t/decode.mlir
// RUN: filecheck %s --check-prefix=DECODE < %t/decode.mlir
// RUN: ckir-opt %t/graph.mlir --lower-prefill{max-context=32} --plan-layout | filecheck %s --check-prefix=PREFILL

// Qwen2: q/k/v with bias, tied head (no lm_head tensor), RoPE theta from config.
// GRAPH:     graph.model @qwen2 arch "qwen2"
// GRAPH:     graph.weight @lm_head : [V, E] f32 tied_to @embed
// The import writes the tensor table (--annotate-tensors): the tied head is a [N, K] matrix,
// q is read per head.
// GRAPH-SAME: attributes {tensor = {role = "weight", layout = "[N, K]", qbits = 32 : i64}}
// GRAPH:     %tokens = graph.input "tokens" {tensor = {role = "io", layout = "[T]", qbits = 32 : i64}}
// GRAPH:     graph.linear %h {tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}, weights = [@"layers.{i}.attn.wq", @"layers.{i}.attn.bq"]}
// GRAPH:     graph.rope

// DECODE:     lowered.call @gemv_bias_f32(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.bq) -> (@decode.layers.0.q)
// The tied head reads the embedding table.
// DECODE:     lowered.call @gemv_f32(@decode.footer.h, @w.embed) -> (@decode.footer.logits)
// DECODE:     layout.plan @qwen2 strategy "bump" align 64 canaries true
// DECODE-NOT: @w.lm_head
// DECODE:     layout.totals

// PREFILL:   lowered.call @gemm_bias_f32(@prefill.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.bq) -> (@prefill.layers.0.q) {M = #lowered.rt<T>
// The default strategy, as ckir compile's.
// PREFILL:   layout.plan @qwen2 strategy "liveness" align 64 canaries true
// PREFILL:   saved = {{[1-9][0-9]*}} : i64
