// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=last} | filecheck %s --check-prefix=LAST
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-prefill{max-context=16 logits=last} | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=all} | filecheck %s --check-prefix=ALL
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=last} --lower-decode{max-context=16} --plan-layout | filecheck %s --check-prefix=PLAN-LAST
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout | filecheck %s --check-prefix=PLAN-ALL
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=last} --plan-layout --emit-c | filecheck %s --check-prefix=C
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=last} --fuse-add-rmsnorm | filecheck %s --check-prefix=FUSED
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-prefill{logits=first} 2>&1 | filecheck %s --check-prefix=BAD

// logits=last: the body's output keeps max-context rows; the footer's buffers have one row.
// LAST:      lowered.kernel @copy_last_row_f32 op "copy_last_row" c "ckir_copy_last_row_f32" modes ["prefill"]
// LAST:      lowered.buffer @prefill.layers.1.x2 activation : !lowered.buf<[16, 64], f32>
// LAST-NEXT: lowered.buffer @prefill.footer.x2_last activation : !lowered.buf<[1, 64], f32>
// LAST-NEXT: lowered.buffer @prefill.footer.h activation : !lowered.buf<[1, 64], f32>
// LAST-NEXT: lowered.buffer @prefill.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
// The body still runs on the T run-time rows.
// LAST:      lowered.call @add_f32(@prefill.layers.1.x1, @prefill.layers.1.d) -> (@prefill.layers.1.x2) {n = #lowered.rt<T*64>
// Row T-1 of the body's output, then the footer on that one row: lm_head is an M = 1 GEMM.
// LAST-NEXT: lowered.call @copy_last_row_f32(@prefill.layers.1.x2) -> (@prefill.footer.x2_last) {T = #lowered.rt<T>, cols = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.footer">}
// LAST-NEXT: lowered.call @rmsnorm_f32(@prefill.footer.x2_last, @w.final_norm) -> (@prefill.footer.h) {T = 1 : i64, E = 64 : i64
// LAST-NEXT: lowered.call @gemm_f32(@prefill.footer.h, @w.lm_head) -> (@prefill.footer.logits) {M = 1 : i64, N = 256 : i64, K = 64 : i64
// LAST-NEXT: }

// GPT2:      lowered.buffer @prefill.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
// GPT2:      lowered.call @copy_last_row_f32(@prefill.layers.1.x2) -> (@prefill.footer.x2_last) {T = #lowered.rt<T>, cols = 64 : i64
// GPT2-NEXT: lowered.call @layernorm_f32(@prefill.footer.x2_last, @w.final_norm, @w.final_norm.bias) -> (@prefill.footer.h) {T = 1 : i64, E = 64 : i64
// GPT2-NEXT: lowered.call @gemm_f32(@prefill.footer.h, @w.embed) -> (@prefill.footer.logits) {M = 1 : i64, N = 256 : i64, K = 64 : i64

// logits=all (the default): every row, no copy.
// ALL-NOT:   copy_last_row
// ALL:       lowered.buffer @prefill.footer.logits io : !lowered.buf<[16, 256], f32> {source = "output"}
// ALL:       lowered.call @gemm_f32(@prefill.footer.h, @w.lm_head) -> (@prefill.footer.logits) {M = #lowered.rt<T>, N = 256 : i64, K = 64 : i64
// ALL-NOT:   copy_last_row

// The state arena: 16 x 256 floats of prefill logits become 256.
// PLAN-LAST: layout.slot @prefill.footer.logits offset {{[0-9]+}} size 1024 role io
// PLAN-LAST: layout.totals {activation = 153632 : i64, {{.*}}io = 2116 : i64
// PLAN-ALL:  layout.slot @prefill.footer.logits offset {{[0-9]+}} size 16384 role io
// PLAN-ALL:  layout.totals {activation = 157216 : i64, {{.*}}io = 17476 : i64

// The mode descriptor: 16 token rows, 1 logits row.
// C: ckir_copy_last_row_f32((const float *)(S + CKIR_OFF_PREFILL_LAYERS_1_X2), (float *)(S + CKIR_OFF_PREFILL_FOOTER_X2_LAST), T, 64);
// C: .prefill = {"prefill", ckir_run_prefill, CKIR_OFF_PREFILL_HEADER_TOKENS, 16, CKIR_OFF_PREFILL_FOOTER_LOGITS, 1, 256},

// The last layer's add is read by the copy, not by the final norm: it stays unfused.
// FUSED:      lowered.call @add_f32(@prefill.layers.1.x1, @prefill.layers.1.d) -> (@prefill.layers.1.x2)
// FUSED-NEXT: lowered.call @copy_last_row_f32(@prefill.layers.1.x2) -> (@prefill.footer.x2_last)
// FUSED-NEXT: lowered.call @rmsnorm_f32(@prefill.footer.x2_last, @w.final_norm) -> (@prefill.footer.h) {T = 1 : i64

// BAD: error: lower-prefill: logits must be 'all' or 'last', got 'first'
