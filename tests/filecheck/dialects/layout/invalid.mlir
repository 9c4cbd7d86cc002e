// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of the layout dialect (the
// memory-safety proof: alignment, bounds, canaries, overlap of live slots, totals).

// unknown slot role (parse error)
// CHECK: unknown slot role 'temp' (expected one of weight, kv_cache, activation, io, scratch, grad, optimizer_state)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role temp
  }
  layout.totals {}
}

// -----

// canaries must be a boolean (parse error)
// CHECK: Expected boolean literal (canaries true or false)
layout.plan @p strategy "bump" align 64 canaries 1 {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {}
}

// -----

// unknown strategy
// CHECK: layout.plan @p: unknown strategy "greedy" (expected bump or liveness)
layout.plan @p strategy "greedy" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {}
}

// -----

// align not a power of two
// CHECK: layout.plan @p: align 48 must be a power of two >= 8
layout.plan @p strategy "bump" align 48 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {}
}

// -----

// align below 8
// CHECK: layout.plan @p: align 4 must be a power of two >= 8
layout.plan @p strategy "bump" align 4 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {}
}

// -----

// canaries of the wrong type (generic form)
// CHECK: layout.plan @p: canaries must be true or false
"layout.plan"() <{plan_name = "p", strategy = "bump", align = 64 : i64, canaries = 1 : i32}> ({
  layout.totals {}
}) : () -> ()

// -----

// totals not last
// CHECK: layout.plan @p: layout.totals must be the last op
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {}
  layout.arena @more size 0 {
  }
}

// -----

// buffer placed in two arenas
// CHECK: layout.plan @p: @x is placed in both arena @weights and arena @state
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @x offset 0 size 64 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 64 role kv_cache
  }
  layout.totals {kv_cache = 64 : i64, weight = 64 : i64}
}

// -----

// op not allowed in a plan
// CHECK: layout.plan @p: 'layout.plan' is not allowed in a plan (only layout.arena, layout.io, layout.totals)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.plan @inner strategy "bump" align 64 canaries false {
  layout.totals {}
  }
  layout.totals {}
}

// -----

// no totals
// CHECK: layout.plan @p: needs a layout.totals as its last op
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
}

// -----

// totals lack a role
// CHECK: layout.plan @p: totals lack role activation (its slots add up to 1024 bytes)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation live "decode" 0 1
  }
  layout.totals {}
}

// -----

// totals differ from the slots
// CHECK: layout.plan @p: totals say activation = 1536 bytes but its slots add up to 1024
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation live "decode" 0 1
    layout.view @v of @x offset 0 size 512
  }
  layout.totals {activation = 1536 : i64}
}

// -----

// negative arena size
// CHECK: layout.arena @state: size -64 is negative
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size -64 {
  }
  layout.totals {}
}

// -----

// unaligned slot offset
// CHECK: layout.arena @state: slot @x offset 32 is not a multiple of align 64
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 32 size 1024 role activation
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// canary without canaries
// CHECK: layout.arena @state: slot @x has a canary but the plan has canaries false
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation canary 1024
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// unaligned canary
// CHECK: layout.arena @state: slot @x canary offset 1000 is not a multiple of align 64
layout.plan @p strategy "bump" align 64 canaries true {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1000 role activation canary 1000
  }
  layout.totals {activation = 1000 : i64}
}

// -----

// canary inside its slot
// CHECK: layout.arena @state: slot @x canary at 960 starts inside the slot [0, 1024)
layout.plan @p strategy "bump" align 64 canaries true {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation canary 960
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// missing canary
// CHECK: layout.arena @state: slot @x has no canary but the plan has canaries true
layout.plan @p strategy "bump" align 64 canaries true {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// slot beyond the arena
// CHECK: layout.arena @state: slot @x bytes [3072, 4160) (with canary) exceed the arena size 4096
layout.plan @p strategy "bump" align 64 canaries true {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 3072 size 1024 role activation canary 4096
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// op not allowed in an arena
// CHECK: layout.arena @state: 'layout.plan' is not allowed in an arena (only layout.slot, layout.view)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.plan @inner strategy "bump" align 64 canaries false {
    layout.totals {}
    }
  }
  layout.totals {}
}

// -----

// overlapping permanent slots
// CHECK: layout.arena @state: slots @a and @b overlap in bytes [512, 1024) while both are live (the whole run / the whole run)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @a offset 0 size 1024 role kv_cache
    layout.slot @b offset 512 size 1024 role kv_cache
  }
  layout.totals {kv_cache = 2048 : i64}
}

// -----

// overlapping slots live at the same time
// CHECK: layout.arena @state: slots @b and @a overlap in bytes [0, 512) while both are live ("prefill" 4..9 / "prefill" 0..4)
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @a offset 0 size 1024 role activation live "prefill" 0 4
    layout.slot @b offset 0 size 512 role activation live "prefill" 4 9
  }
  layout.totals {activation = 1536 : i64}
}

// -----

// a canary overlapping a live slot
// CHECK: layout.arena @state: slots @a and @b overlap in bytes [1024, 1088) while both are live ("decode" 0..4 / "decode" 2..3)
layout.plan @p strategy "liveness" align 64 canaries true {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @a offset 0 size 1024 role activation canary 1024 live "decode" 0 4
    layout.slot @b offset 1024 size 512 role activation canary 1536 live "decode" 2 3
  }
  layout.totals {activation = 1536 : i64}
}

// -----

// view of a view
// CHECK: layout.arena @state: view @w root @v is a view
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation
    layout.view @v of @x offset 0 size 512
    layout.view @w of @v offset 0 size 256
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// view root not a slot of the arena
// CHECK: layout.arena @state: view @v root @nothing is not a slot of this arena
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.view @v of @nothing offset 0 size 512
  }
  layout.totals {}
}

// -----

// view beyond its root
// CHECK: layout.arena @state: view @v bytes [768, 1280) exceed its root @x of 1024 bytes
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation
    layout.view @v of @x offset 768 size 512
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// unknown role (generic form)
// CHECK: layout.slot @x: unknown role 'temp' (expected one of weight, kv_cache, activation, io, scratch, grad, optimizer_state)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    "layout.slot"() <{sym_name = "x", offset = 0 : i64, size = 64 : i64, slot_role = "temp"}> : () -> ()
  }
  layout.totals {}
}

// -----

// negative offset
// CHECK: layout.slot @x: offset -64 is negative
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset -64 size 64 role io
  }
  layout.totals {io = 64 : i64}
}

// -----

// negative size
// CHECK: layout.slot @x: size -1 is negative
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size -1 role io
  }
  layout.totals {io = -1 : i64}
}

// -----

// malformed live range (generic form)
// CHECK: layout.slot @x: live must be ["<mode>", first, last]
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    "layout.slot"() <{sym_name = "x", offset = 0 : i64, size = 64 : i64, slot_role = "io", live = ["decode", 1 : i64]}> : () -> ()
  }
  layout.totals {io = 64 : i64}
}

// -----

// unknown live mode
// CHECK: layout.slot @x: live mode "train" is not one of prefill, decode, backward
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 64 role activation live "train" 0 1
  }
  layout.totals {activation = 64 : i64}
}

// -----

// empty live range
// CHECK: layout.slot @x: live range 5..2 is empty or negative
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 64 role activation live "decode" 5 2
  }
  layout.totals {activation = 64 : i64}
}

// -----

// slot outside an arena
// CHECK: 'layout.slot' expects parent op 'layout.arena'
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.slot @x offset 0 size 64 role io
  layout.totals {}
}

// -----

// negative view size
// CHECK: layout.view @v: size -8 is negative
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
    layout.slot @x offset 0 size 1024 role activation
    layout.view @v of @x offset 0 size -8
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// unknown totals key
// CHECK: layout.totals: unknown key 'activations' (expected a role, 'saved', 'arena.<mode>', 'bound.<mode>' or one of copies_removed, saved.views, saved.inplace)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {activations = 0 : i64}
}

// -----

// non-integer total
// CHECK: layout.totals: saved must be an integer
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {saved = "none"}
}

// -----

// negative total
// CHECK: layout.totals: saved = -1 must be >= 0
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
  }
  layout.arena @state size 4096 {
  }
  layout.totals {saved = -1 : i64}
}

// -----

// The plan against the lowered.model it places (issue 11). Each case below is the
// planner's output for a small decode model (embed, final rmsnorm, lm_head gemv; made
// with --lower-decode{max-context=16} from inputs/tiny_llama.mlir, the layers dropped,
// then --plan-layout{strategy=liveness}) with one fact changed (and the totals kept
// consistent, so that the case reaches the model cross-check).

// a slot smaller than its buffer (issue 11: 64 bytes for 1024-byte logits; the io total follows)
// CHECK: layout.plan @llama: slot @decode.footer.logits of 64 bytes cannot hold buffer @decode.footer.logits of lowered.program @decode ([1, 256] f32, 1024 bytes)
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 64 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 512 : i64, io = 68 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a buffer without a slot (its slot line deleted, the activation total follows)
// CHECK: layout.plan @llama: buffer @decode.header.x of lowered.program @decode has no slot
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 256 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a buffer placed only as a view
// CHECK: layout.plan @llama: buffer @decode.header.x of lowered.program @decode has no slot (only a layout.view)
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.view @decode.header.x of @decode.footer.h offset 0 size 256
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 256 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a slot whose role is not its buffer's
// CHECK: layout.plan @llama: slot @decode.header.tokens has role scratch but buffer @decode.header.tokens of lowered.program @decode has role io
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role scratch canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 512 : i64, io = 1024 : i64, kv_cache = 0 : i64, saved = 0 : i64, scratch = 4 : i64, weight = 131328 : i64}
}

// -----

// a slot that places no buffer of the model (the activation total follows)
// CHECK: layout.plan @llama: slot @decode.gone places no buffer of lowered.model @llama
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
      layout.slot @decode.gone offset 1536 size 256 role activation canary 1792 live "decode" 2 2
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 768 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a live range cut short: call 2 (the lm_head gemv) still reads the slot
// CHECK: layout.plan @llama: call 2 (@gemv_f32) of lowered.program @decode reads @decode.footer.h, but slot @decode.footer.h is live only for "decode" calls 1..1
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 1
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a live range that starts after the call writing the buffer
// CHECK: layout.plan @llama: call 0 (@embed_f32) of lowered.program @decode writes @decode.header.x, but slot @decode.header.x is live only for "decode" calls 1..1
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 1 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a use in a mode the slot is not live in
// CHECK: layout.plan @llama: call 1 (@rmsnorm_f32) of lowered.program @decode writes @decode.footer.h, but slot @decode.footer.h is live only for "prefill" calls 1..2
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "prefill" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a lowered view without a layout.view
// CHECK: layout.plan @llama: view @decode.footer.h.lo of lowered.program @decode has no layout.view
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a layout.view at another offset than its lowered view
// CHECK: layout.plan @llama: layout.view @decode.footer.h.lo is @decode.footer.h + 128 but view @decode.footer.h.lo of lowered.program @decode is @decode.footer.h + 0
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 128 size 128
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a layout.view smaller than its lowered view
// CHECK: layout.plan @llama: layout.view @decode.footer.h.lo of 64 bytes cannot hold view @decode.footer.h.lo of lowered.program @decode ([1, 32] f32, 128 bytes)
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 64
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a layout.view that places no view of the model
// CHECK: layout.plan @llama: layout.view @decode.footer.h.hi places no view of lowered.model @llama
lowered.model @llama {
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
  lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
  lowered.program @decode mode "decode" max_context 16 {
    lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @decode.footer.h activation : !lowered.buf<[1, 64], f32>
    lowered.view @decode.footer.h.lo of @decode.footer.h offset 0 : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@decode.header.x, @w.final_norm) -> (@decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "footer", op "graph.rmsnorm">}
    lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
  }
}
layout.plan @llama strategy "liveness" align 64 canaries true {
  layout.arena @weights size 131520 {
    layout.slot @w.embed offset 0 size 65536 role weight canary 65536
    layout.slot @w.final_norm offset 65600 size 256 role weight canary 65856
    layout.slot @w.lm_head offset 65920 size 65536 role weight canary 131456
  }
  layout.arena @state size 1856 {
    layout.slot @decode.header.tokens offset 0 size 4 role io canary 64
    layout.slot @decode.footer.logits offset 128 size 1024 role io canary 1152
    layout.slot @decode.footer.h offset 1216 size 256 role activation canary 1472 live "decode" 1 2
    layout.slot @decode.header.x offset 1536 size 256 role activation canary 1792 live "decode" 0 1
    layout.view @decode.footer.h.lo of @decode.footer.h offset 0 size 128
    layout.view @decode.footer.h.hi of @decode.footer.h offset 128 size 128
  }
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

// -----

// a lower bound that is not the most bytes live at once (prefill: 1024 + 1024)
// CHECK: layout.plan @p: totals say bound.prefill = 1024 bytes but the slots give 2048
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @"kv.0.k" offset 0 size 1024 role kv_cache
    layout.slot @"prefill.x" offset 1024 size 1024 role activation live "prefill" 0 2
    layout.slot @"prefill.h" offset 1024 size 1024 role activation live "prefill" 3 7
  }
  layout.totals {activation = 2048 : i64, arena.prefill = 2048 : i64, bound.prefill = 1024 : i64, kv_cache = 1024 : i64}
}

// -----

// an arena size for a mode no slot is live in
// CHECK: layout.plan @p: totals give arena.decode but no slot is live in that mode
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @"prefill.x" offset 0 size 1024 role activation live "prefill" 0 2
  }
  layout.totals {activation = 1024 : i64, arena.decode = 1024 : i64}
}

// -----

// a per-mode key of an unknown mode
// CHECK: layout.totals: unknown key 'bound.sample' (expected a role, 'saved', 'arena.<mode>', 'bound.<mode>' or one of copies_removed, saved.views, saved.inplace)
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @"prefill.x" offset 0 size 1024 role activation live "prefill" 0 2
  }
  layout.totals {activation = 1024 : i64, bound.sample = 1024 : i64}
}

// -----

// an inplace view (--plan-views) writes over its root from offset 0
// CHECK: layout.view @x1: an inplace view writes over its root from offset 0, not 64
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @o offset 0 size 1024 role activation live "prefill" 0 4
    layout.view @x1 of @o offset 64 size 512 inplace
  }
  layout.totals {activation = 1024 : i64}
}

// -----

// saved.inplace is the bytes of the inplace views
// CHECK: layout.plan @p: totals say saved.inplace = 4096 bytes but the views give 1024
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @o offset 0 size 1024 role activation live "prefill" 0 4
    layout.view @x1 of @o offset 0 size 1024 inplace
  }
  layout.totals {activation = 1024 : i64, saved.inplace = 4096 : i64, saved.views = 0 : i64}
}

// -----

// saved.views is the bytes of the other views
// CHECK: layout.plan @p: totals say saved.views = 0 bytes but the views give 512
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @o offset 0 size 1024 role activation live "prefill" 0 4
    layout.view @h of @o offset 512 size 512
  }
  layout.totals {activation = 1024 : i64, saved.views = 0 : i64}
}

// -----

// an unknown totals key names the known ones
// CHECK: layout.totals: unknown key 'saved.copies' (expected a role, 'saved', 'arena.<mode>', 'bound.<mode>' or one of copies_removed, saved.views, saved.inplace)
layout.plan @p strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
  }
  layout.totals {saved.copies = 0 : i64}
}

