// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of views at a run-time row
// ("offset 0 + P * 16": the KV append of --plan-views), in both dialects.

// only the KV position may move a view
// CHECK: lowered.view @decode.k: row offset symbol 'T' is not one of P (the KV position of the program's call)
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + T * 16 : !lowered.buf<[1, 4], f32>
  }
}

// -----

// the row is the root's row
// CHECK: lowered.view @decode.k: row offset counts rows of 32 bytes but a row of root @kv.k ([8, 4] f32) has 16
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + P * 32 : !lowered.buf<[1, 4], f32>
  }
}

// -----

// whole rows only
// CHECK: lowered.view @decode.k: a view at a run-time row holds whole rows of 16 bytes (offset 0, 8 bytes)
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[2], f32>
  }
}

// -----

// a model-level view has no call, hence no position
// CHECK: lowered.view @k: a run-time row offset belongs to a view of a lowered.program (the position is the program call's)
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.view @k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
}

// -----

// still inside the root at P = 0
// CHECK: lowered.view @decode.k: bytes [0, 144) exceed root @kv.k of 128 bytes
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[9, 4], f32>
  }
}

// -----

// parse error: the row bytes follow a '*'
// CHECK: Expected '*' (then the bytes of one row)
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + P 16 : !lowered.buf<[1, 4], f32>
  }
}

// -----

// layout: row bytes are positive
// CHECK: layout.view @k: row bytes 0 must be positive
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @state size 128 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.view @k of @kv.k offset 0 + P * 0 size 16
  }
  layout.totals {kv_cache = 128 : i64}
}

// -----

// layout: an in-place view has no run-time row
// CHECK: layout.view @k: an inplace view writes over its root from offset 0; it has no run-time row offset
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @state size 128 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.view @k of @kv.k offset 0 + P * 16 size 16 inplace
  }
  layout.totals {kv_cache = 128 : i64}
}

// -----

// layout: whole rows of the root
// CHECK: layout.arena @state: view @k at a run-time row of 48 bytes is no whole rows of its root @kv.k (offset 0, size 48, root 128 bytes)
layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @state size 128 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.view @k of @kv.k offset 0 + P * 48 size 48
  }
  layout.totals {kv_cache = 128 : i64}
}

// -----

// the plan and the program disagree on the row offset
// CHECK: layout.view @decode.k has run-time row offset none but view @decode.k of lowered.program @decode has + P * 16
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 {
    lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
  }
}
layout.plan @m strategy "bump" align 64 canaries false {
  layout.arena @state size 128 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.view @decode.k of @kv.k offset 0 size 16
  }
  layout.totals {kv_cache = 128 : i64}
}

// -----

// copies removed are the program's views at a run-time row
// CHECK: lowered.program @decode records 2 copies removed but has 1 views at a run-time row
lowered.model @m {
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @decode mode "decode" max_context 8 attributes {views = {copies = 2 : i64, inplace = 0 : i64}} {
    lowered.view @decode.k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
  }
}
layout.plan @m strategy "bump" align 64 canaries false {
  layout.arena @state size 128 {
    layout.slot @kv.k offset 0 size 128 role kv_cache
    layout.view @decode.k of @kv.k offset 0 + P * 16 size 16
  }
  layout.totals {copies_removed = 2 : i64, kv_cache = 128 : i64, saved.inplace = 0 : i64, saved.views = 16 : i64}
}
