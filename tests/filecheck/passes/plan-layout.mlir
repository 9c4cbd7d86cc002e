// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout{strategy=bump} | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout{strategy=bump canaries=false align=128} | filecheck %s --check-prefix=NOCAN
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout | filecheck %s --check-prefix=DEFAULT
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout{strategy=first-fit} 2>&1 | filecheck %s --check-prefix=STRATEGY
// RUN: not ckir-opt %inputs/tiny_llama.mlir --plan-layout 2>&1 | filecheck %s --check-prefix=NOLOW
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout{align=48} 2>&1 | filecheck %s --check-prefix=ALIGN

// Bump: weights in IR order, 64-byte aligned, a 64-byte canary after each slot.
// embed [256, 64] f32 = 65536 bytes at 0, canary at 65536; next slot at 65536 + 64.
// CHECK:      layout.plan @llama strategy "bump" align 64 canaries true {
// CHECK-NEXT:   layout.arena @weights size 496192 {
// CHECK-NEXT:     layout.slot @w.embed offset 0 size 65536 role weight canary 65536
// final_norm [64] = 256 bytes
// CHECK-NEXT:     layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
// CHECK-NEXT:     layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
// CHECK-NEXT:     layout.slot @w.layers.0.attn_norm offset 131520 size 256 role weight canary 131776
// gate [172, 64] = 44032 bytes
// CHECK:          layout.slot @w.layers.0.mlp.gate offset {{[0-9]+}} size 44032 role weight
// CHECK:          layout.slot @w.layers.1.mlp.down offset 452096 size 44032 role weight canary 496128
// CHECK-NEXT:   }
// State: KV cache (4 x [16, 32] f32 = 2048 bytes each), io, then activations with live ranges.
// CHECK-NEXT:   layout.arena @state size 20800 {
// CHECK-NEXT:     layout.slot @kv.layers.0.k offset 0 size 2048 role kv_cache canary 2048
// CHECK-NEXT:     layout.slot @kv.layers.0.v offset 2112 size 2048 role kv_cache canary 4160
// CHECK-NEXT:     layout.slot @kv.layers.1.k offset 4224 size 2048 role kv_cache canary 6272
// CHECK-NEXT:     layout.slot @kv.layers.1.v offset 6336 size 2048 role kv_cache canary 8384
// CHECK-NEXT:     layout.slot @decode.header.tokens offset 8448 size 4 role io canary 8512
// CHECK-NEXT:     layout.slot @decode.footer.logits offset 8576 size 1024 role io canary 9600
// CHECK-NEXT:     layout.slot @decode.header.x offset 9664 size 256 role activation canary 9920 live "decode" 0 9
// CHECK-NEXT:     layout.slot @decode.layers.0.h offset 9984 size 256 role activation canary 10240 live "decode" 1 4
// Totals by role, hand-computed: weights = 2 x 65536 (embed, lm_head) + 256 (final norm)
//   + 2 layers x (2 x 256 norms + 2 x 16384 (wq, wo) + 2 x 8192 (wk, wv) + 3 x 44032 (gate, up, down))
//   = 131328 + 2 x 181760 = 494848.
// kv_cache = 4 x 2048 = 8192; io = 4 (one token) + 1024 (256 logits) = 1028;
// activation, per layer: 8 x [1, 64] (h, q, a, o, x1, h2, d, x2: 256 bytes; rope updates q
//   and k in place) + 2 x [1, 32] (k, v: 128) + 3 x [1, 172] (gate, up, m: 688) = 4368;
//   2 layers + header x (256) + footer h (256) = 9248.
// Bump's decode arena (every slot its own bytes) against the most bytes live at once.
// CHECK:        layout.totals {activation = 9248 : i64, arena.decode = 20800 : i64, bound.decode = 12288 : i64, io = 1028 : i64, kv_cache = 8192 : i64, saved = 0 : i64, weight = 494848 : i64}

// Without canaries, slots are packed at the alignment.
// NOCAN:      layout.plan @llama strategy "bump" align 128 canaries false {
// NOCAN:        layout.slot @w.embed offset 0 size 65536 role weight
// NOCAN-NEXT:   layout.slot @w.final_norm offset 65536 size 256 role weight
// NOCAN-NEXT:   layout.slot @w.lm_head offset 65792 size 65536 role weight
// NOCAN-NOT:    canary

// NOLOW: error: plan-layout: expected one lowered.model (run --lower-prefill or --lower-decode first), found 0
// ALIGN: error: plan-layout: align must be a power of two >= 8, got 48
// STRATEGY: error: plan-layout: unknown strategy 'first-fit' (bump or liveness)

// Without options, the plan is ckir compile's (a non-debug build): liveness, align 64, canaries.
// DEFAULT: layout.plan @llama strategy "liveness" align 64 canaries true {

// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --plan-layout{strategy=bump} | filecheck %s --check-prefix=PREFILL
// Prefill, max-context 16, hand-computed: weights as above (494848); kv_cache 4 x [16, 32] f32
// = 8192; io = 16 tokens x 4 + [16, 256] logits x 4 = 64 + 16384 = 16448; activations,
// 16 rows each: per layer 8 x [16, 64] (4096) + 2 x [16, 32] (2048: k, v) + 3 x [16, 172]
// (11008: gate, up, m) = 69888, two layers 139776, + header x 4096 + footer h 4096 = 147968.
// PREFILL: layout.totals {activation = 147968 : i64, arena.prefill = {{[0-9]+}} : i64, bound.prefill = {{[0-9]+}} : i64, io = 16448 : i64, kv_cache = 8192 : i64, saved = 0 : i64, weight = 494848 : i64}
