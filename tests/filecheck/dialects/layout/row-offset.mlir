// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Views at a run-time row (the KV append of --plan-views): the lowered view and its
// layout.view both say "+ P * <row bytes>" after the constant offset, round-trip
// through the custom and the generic form, and are checked against each other.

// CHECK:      lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
// CHECK-NEXT: lowered.view @decode.v of @kv.v offset 32 + P * 16 : !lowered.buf<[2, 4], f32>
// CHECK:      layout.view @decode.k of @kv.k offset 0 + P * 16 size 16
// CHECK-NEXT: layout.view @decode.v of @kv.v offset 32 + P * 16 size 32
// CHECK:      layout.totals {copies_removed = 2 : i64, kv_cache = 256 : i64, saved.inplace = 0 : i64, saved.views = 48 : i64}
// GENERIC:    "lowered.view"() <{sym_name = "decode.k", root = @kv.k, offset = 0 : i64, rows = ["P", 16 : i64], view_type = !lowered.buf<[1, 4], f32>}> : () -> ()
// GENERIC:    "layout.view"() <{sym_name = "decode.k", root = @kv.k, offset = 0 : i64, rows = ["P", 16 : i64], size = 16 : i64}> : () -> ()
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 attributes {views = {copies = 2 : i64, inplace = 0 : i64}} {
    lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
    lowered.view @decode.v of @kv.v offset 32 + P * 16 : !lowered.buf<[2, 4], f32>
  }
}
layout.plan @m strategy "bump" align 64 canaries false {
  layout.arena @state size 256 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.slot @kv.v offset 128 size 128 role kv_cache
    layout.view @decode.k of @kv.k offset 0 + P * 16 size 16
    layout.view @decode.v of @kv.v offset 32 + P * 16 size 32
  }
  layout.totals {copies_removed = 2 : i64, kv_cache = 256 : i64, saved.inplace = 0 : i64, saved.views = 48 : i64}
}
