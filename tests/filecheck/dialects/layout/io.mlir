// RUN: ckir-opt %s | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// The I/O manifest round-trips: layout.io handles with and without a mode, on a slot
// and on a view, with static and symbolic dims.

layout.plan @p strategy "bump" align 64 canaries false {
  layout.arena @weights size 4096 {
    layout.slot @w.e offset 0 size 1024 role weight
  }
  layout.arena @state size 4096 {
    layout.slot @tok offset 0 size 16 role io
    layout.slot @qkv offset 64 size 768 role activation live "prefill" 0 2
    layout.view @k of @qkv offset 256 size 256
  }
  layout.io "prefill.tokens" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
  layout.io "prefill.k" role "output" mode "prefill" slot @k : !lowered.buf<[4, 16], f32> dims ["T", ""] at @state offset 320
  layout.io "e" role "param" slot @w.e : !lowered.buf<[16, 16], f32> dims ["", ""] at @weights offset 0
  layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
}

// CHECK:      layout.view @k of @qkv offset 256 size 256
// CHECK-NEXT:   }
// CHECK-NEXT:   layout.io "prefill.tokens" role "input" mode "prefill" slot @tok : !lowered.buf<[4], i32> dims ["T"] at @state offset 0
// CHECK-NEXT:   layout.io "prefill.k" role "output" mode "prefill" slot @k : !lowered.buf<[4, 16], f32> dims ["T", ""] at @state offset 320
// CHECK-NEXT:   layout.io "e" role "param" slot @w.e : !lowered.buf<[16, 16], f32> dims ["", ""] at @weights offset 0
// CHECK-NEXT:   layout.totals {activation = 768 : i64, io = 16 : i64, weight = 1024 : i64}
