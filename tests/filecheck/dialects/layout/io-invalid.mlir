// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message of the I/O manifest (layout.io): a manifest that lies
// about the slot it names (arena, offset, bytes) or, next to the lowered.model, about
// the buffer (dtype, shape) is rejected naming the handle.

// unknown role
// CHECK: layout.io "t": unknown role 'inout' (expected one of input, param, state, output)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "inout" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// unknown mode
// CHECK: layout.io "t": mode "train" is not one of prefill, decode, backward, optimize
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "train" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// one dims entry per dimension
// CHECK: layout.io "t": 2 dims for a shape of rank 1
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T", ""] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// dims are strings
// CHECK: layout.io "t": dims must be strings ("" for a static dim)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims [4] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// a handle naming no slot
// CHECK: layout.plan @p: io handle "t" names @tokens, which is no slot or view of the plan
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tokens : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// the wrong arena
// CHECK: layout.plan @p: io handle "t" says arena @weights but @tok is in arena @state
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @weights offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// the wrong offset
// CHECK: layout.plan @p: io handle "t" says offset 64 but @tok is at offset 0
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 64
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// the wrong offset of a view (its root's offset plus its own)
// CHECK: layout.plan @p: io handle "k" says offset 256 but @k is at offset 320
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "k" role "output" mode "prefill" slot @k : !lowered.buf<[64], f32> dims [""] at @state offset 256
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// a shape larger than the slot
// CHECK: layout.plan @p: io handle "t" ([8] i32, 32 bytes) does not fit in the 16 bytes of @tok
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[8], i32> dims ["T"] at @state offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// a handle declared twice
// CHECK: layout.plan @p: io handle "t" is declared twice
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "t" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
  layout.io "t" role "param" slot @w.e : !lowered.buf<[16, 16], f32> dims ["", ""] at @weights offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// -----

// next to its lowered.model: the wrong dtype (same bytes)
// CHECK: layout.plan @llama: io handle "decode.tokens" says dtype f32 but @decode.header.tokens is i32
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
  }
  layout.io "decode.tokens" role "input" mode "decode" slot @decode.header.tokens : !lowered.buf<[1], f32> dims [""] at @state offset 0
  layout.io "decode.logits" role "output" mode "decode" slot @decode.footer.logits : !lowered.buf<[1, 256], f32> dims ["", ""] at @state offset 128
  layout.io "embed" role "param" slot @w.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @weights offset 0
  layout.io "final_norm" role "param" slot @w.final_norm : !lowered.buf<[64], f32> dims [""] at @weights offset 65600
  layout.io "lm_head" role "param" slot @w.lm_head : !lowered.buf<[256, 64], f32> dims ["", ""] at @weights offset 65920
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}


// -----

// next to its lowered.model: the wrong shape (same bytes)
// CHECK: layout.plan @llama: io handle "decode.logits" says shape [256, 1] but @decode.footer.logits is [1, 256]
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
  }
  layout.io "decode.tokens" role "input" mode "decode" slot @decode.header.tokens : !lowered.buf<[1], i32> dims [""] at @state offset 0
  layout.io "decode.logits" role "output" mode "decode" slot @decode.footer.logits : !lowered.buf<[256, 1], f32> dims ["", ""] at @state offset 128
  layout.io "embed" role "param" slot @w.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @weights offset 0
  layout.io "final_norm" role "param" slot @w.final_norm : !lowered.buf<[64], f32> dims [""] at @weights offset 65600
  layout.io "lm_head" role "param" slot @w.lm_head : !lowered.buf<[256, 64], f32> dims ["", ""] at @weights offset 65920
  layout.totals {activation = 512 : i64, io = 1028 : i64, kv_cache = 0 : i64, saved = 0 : i64, weight = 131328 : i64}
}

