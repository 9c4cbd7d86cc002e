// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// Every layout op: a bump plan with canaries and a liveness plan without them.

layout.plan @tiny strategy "bump" align 64 canaries true {
  layout.arena @weights size 65728 {
    layout.slot @"w.embed" offset 0 size 65536 role weight canary 65536
    layout.slot @"w.norm" offset 65600 size 64 role weight canary 65664
  }
  layout.arena @state size 5504 {
    layout.slot @"kv.0.k" offset 0 size 1024 role kv_cache canary 1024
    layout.slot @"prefill.tokens" offset 1088 size 16 role io canary 1152
    layout.slot @"prefill.x" offset 1216 size 1024 role activation canary 2240 live "prefill" 0 5
    layout.slot @"prefill.0.qkv" offset 2304 size 2048 role activation canary 4352 live "prefill" 1 4
    layout.view @"prefill.0.q" of @"prefill.0.qkv" offset 0 size 1024
    layout.view @"prefill.0.k" of @"prefill.0.qkv" offset 1024 size 512
    layout.slot @"decode.x" offset 4416 size 256 role activation canary 4672 live "decode" 0 2
    layout.slot @"prefill.scratch" offset 4736 size 704 role scratch canary 5440 live "prefill" 3 3
  }
  layout.totals {activation = 3328 : i64, io = 16 : i64, kv_cache = 1024 : i64, saved = 0 : i64, scratch = 704 : i64, weight = 65600 : i64}
}

// liveness: prefill.x and prefill.h share bytes (disjoint call ranges); decode.x
// reuses them too (different mode).  Per mode, the arena bytes it uses and the lower
// bound (permanent slots + the most live at one call): prefill 1024 + 1024, decode 1024 + 256.
layout.plan @tiny strategy "liveness" align 64 canaries false {
  layout.arena @weights size 65536 {
    layout.slot @"w.embed" offset 0 size 65536 role weight
  }
  layout.arena @state size 2048 {
    layout.slot @"kv.0.k" offset 0 size 1024 role kv_cache
    layout.slot @"prefill.x" offset 1024 size 1024 role activation live "prefill" 0 2
    layout.slot @"prefill.h" offset 1024 size 1024 role activation live "prefill" 3 7
    layout.slot @"decode.x" offset 1024 size 256 role activation live "decode" 0 9
    layout.view @"decode.x.half" of @"decode.x" offset 128 size 128
  }
  layout.totals {activation = 2304 : i64, arena.decode = 1280 : i64, arena.prefill = 2048 : i64, bound.decode = 1280 : i64, bound.prefill = 2048 : i64, io = 0 : i64, kv_cache = 1024 : i64, saved = 1280 : i64, weight = 65536 : i64}
}

layout.plan @empty strategy "bump" align 8 canaries false {
  layout.totals {}
}

// --plan-views' marks: an inplace view (an elementwise output written over its dying
// input, from offset 0) and the totals of what views and in-place reuse saved.
layout.plan @views strategy "liveness" align 64 canaries false {
  layout.arena @state size 2048 {
    layout.slot @"prefill.o" offset 0 size 1024 role activation live "prefill" 0 4
    layout.view @"prefill.x1" of @"prefill.o" offset 0 size 1024 inplace
    layout.view @"prefill.o.half" of @"prefill.o" offset 512 size 512
  }
  layout.totals {activation = 1024 : i64, copies_removed = 0 : i64, saved = 0 : i64, saved.inplace = 1024 : i64, saved.views = 512 : i64}
}

// The printed form (identical for both RUN lines):
// CHECK: builtin.module {
// CHECK-NEXT: layout.plan @tiny strategy "bump" align 64 canaries true {
// CHECK-NEXT: layout.arena @weights size 65728 {
// CHECK-NEXT: layout.slot @w.embed offset 0 size 65536 role weight canary 65536
// CHECK-NEXT: layout.slot @w.norm offset 65600 size 64 role weight canary 65664
// CHECK-NEXT: }
// CHECK-NEXT: layout.arena @state size 5504 {
// CHECK-NEXT: layout.slot @kv.0.k offset 0 size 1024 role kv_cache canary 1024
// CHECK-NEXT: layout.slot @prefill.tokens offset 1088 size 16 role io canary 1152
// CHECK-NEXT: layout.slot @prefill.x offset 1216 size 1024 role activation canary 2240 live "prefill" 0 5
// CHECK-NEXT: layout.slot @prefill.0.qkv offset 2304 size 2048 role activation canary 4352 live "prefill" 1 4
// CHECK-NEXT: layout.view @prefill.0.q of @prefill.0.qkv offset 0 size 1024
// CHECK-NEXT: layout.view @prefill.0.k of @prefill.0.qkv offset 1024 size 512
// CHECK-NEXT: layout.slot @decode.x offset 4416 size 256 role activation canary 4672 live "decode" 0 2
// CHECK-NEXT: layout.slot @prefill.scratch offset 4736 size 704 role scratch canary 5440 live "prefill" 3 3
// CHECK-NEXT: }
// CHECK-NEXT: layout.totals {activation = 3328 : i64, io = 16 : i64, kv_cache = 1024 : i64, saved = 0 : i64, scratch = 704 : i64, weight = 65600 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: layout.plan @tiny strategy "liveness" align 64 canaries false {
// CHECK-NEXT: layout.arena @weights size 65536 {
// CHECK-NEXT: layout.slot @w.embed offset 0 size 65536 role weight
// CHECK-NEXT: }
// CHECK-NEXT: layout.arena @state size 2048 {
// CHECK-NEXT: layout.slot @kv.0.k offset 0 size 1024 role kv_cache
// CHECK-NEXT: layout.slot @prefill.x offset 1024 size 1024 role activation live "prefill" 0 2
// CHECK-NEXT: layout.slot @prefill.h offset 1024 size 1024 role activation live "prefill" 3 7
// CHECK-NEXT: layout.slot @decode.x offset 1024 size 256 role activation live "decode" 0 9
// CHECK-NEXT: layout.view @decode.x.half of @decode.x offset 128 size 128
// CHECK-NEXT: }
// CHECK-NEXT: layout.totals {activation = 2304 : i64, arena.decode = 1280 : i64, arena.prefill = 2048 : i64, bound.decode = 1280 : i64, bound.prefill = 2048 : i64, io = 0 : i64, kv_cache = 1024 : i64, saved = 1280 : i64, weight = 65536 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: layout.plan @empty strategy "bump" align 8 canaries false {
// CHECK-NEXT: layout.totals {}
// CHECK-NEXT: }
// CHECK-NEXT: layout.plan @views strategy "liveness" align 64 canaries false {
// CHECK-NEXT: layout.arena @state size 2048 {
// CHECK-NEXT: layout.slot @prefill.o offset 0 size 1024 role activation live "prefill" 0 4
// CHECK-NEXT: layout.view @prefill.x1 of @prefill.o offset 0 size 1024 inplace
// CHECK-NEXT: layout.view @prefill.o.half of @prefill.o offset 512 size 512
// CHECK-NEXT: }
// CHECK-NEXT: layout.totals {activation = 1024 : i64, copies_removed = 0 : i64, saved = 0 : i64, saved.inplace = 1024 : i64, saved.views = 512 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: }
