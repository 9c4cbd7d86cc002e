// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --lower-backward{max-context=16} --plan-layout{strategy=bump} --io-manifest --io-manifest | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16 logits=last} --plan-layout --io-manifest | filecheck %s --check-prefix=LAST
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --io-manifest 2>&1 | filecheck %s --check-prefix=NOPLAN

// Every mode's io buffers (inputs, outputs), then the params by their source names,
// then the state (KV cache, gradients, AdamW moments), each at its slot's arena and
// offset; dims name the run-time symbol a dimension follows (T tokens, PT positions).
// A second run replaces the handles of the first (each handle appears once).
// CHECK:      layout.io "prefill.tokens" role "input" mode "prefill" slot @prefill.header.tokens : !lowered.buf<[16], i32> dims ["T"] at @state offset 1497024
// CHECK-NEXT: layout.io "prefill.logits" role "output" mode "prefill" slot @prefill.footer.logits : !lowered.buf<[16, 256], f32> dims ["T", ""] at @state offset 1497152
// CHECK-NEXT: layout.io "decode.tokens" role "input" mode "decode" slot @decode.header.tokens : !lowered.buf<[1], i32> dims [""] at @state offset 1513600
// CHECK-NEXT: layout.io "decode.logits" role "output" mode "decode" slot @decode.footer.logits : !lowered.buf<[1, 256], f32> dims ["", ""] at @state offset 1513728
// CHECK-NEXT: layout.io "backward.tokens" role "input" mode "backward" slot @backward.header.tokens : !lowered.buf<[16], i32> dims ["T"] at @state offset 1514816
// CHECK-NEXT: layout.io "backward.targets" role "input" mode "backward" slot @backward.targets : !lowered.buf<[16], i32> dims ["T"] at @state offset 1514944
// CHECK-NEXT: layout.io "backward.loss" role "output" mode "backward" slot @backward.loss : !lowered.buf<[1], f32> dims [""] at @state offset 1515072
// CHECK-NEXT: layout.io "embed" role "param" slot @w.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @weights offset 0
// CHECK-NEXT: layout.io "final_norm" role "param" slot @w.final_norm : !lowered.buf<[64], f32> dims [""] at @weights offset 65600
// CHECK:      layout.io "kv.layers.0.k" role "state" slot @kv.layers.0.k : !lowered.buf<[16, 32], f32> dims ["PT", ""] at @state offset 0
// CHECK:      layout.io "grad.embed" role "state" slot @grad.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @state offset 8448
// CHECK:      layout.io "adam.m.embed" role "state" slot @adam.m.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @state offset 504640
// CHECK-NEXT: layout.io "adam.v.embed" role "state" slot @adam.v.embed : !lowered.buf<[256, 64], f32> dims ["", ""] at @state offset 570240
// CHECK-NOT:  layout.io "prefill.tokens"
// CHECK:      layout.totals

// logits=last: one row of logits whatever T, so no dim follows T.
// LAST: layout.io "prefill.tokens" role "input" mode "prefill" slot @prefill.header.tokens : !lowered.buf<[16], i32> dims ["T"]
// LAST: layout.io "prefill.logits" role "output" mode "prefill" slot @prefill.footer.logits : !lowered.buf<[1, 256], f32> dims ["", ""]

// NOPLAN: io-manifest: expected one lowered.model and one layout.plan (run a lowering and --plan-layout first), found 1 and 0
