// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout{strategy=liveness} | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout{strategy=liveness canaries=false} | filecheck %s --check-prefix=MODES

// Liveness reuses activation bytes; weights, KV cache and io keep their bump offsets.
// CHECK:      layout.plan @llama strategy "liveness" align 64 canaries true {
// CHECK:        layout.slot @w.embed offset 0 size 65536 role weight canary 65536
// CHECK:        layout.arena @state size {{[0-9]+}} {
// CHECK-NEXT:     layout.slot @kv.layers.0.k offset 0 size 2048 role kv_cache canary 2048
// CHECK:          layout.slot @decode.footer.logits offset 8576 size 1024 role io canary 9600
// The activations start after io (9664) and reuse each other's bytes.
// CHECK:          layout.slot @decode.layers.0.gate offset 9664 size 688 role activation canary 10368 live "decode" 11 13
// layers.1.gate (live 26..28) does not overlap layers.0.gate (live 11..13): same offset.
// CHECK:          layout.slot @decode.layers.1.gate offset 9664 size 688 role activation canary 10368 live "decode" 26 28
// Activation totals are the same bytes as bump; the saving is reported separately.
// The liveness plan reaches the lower bound: its decode arena is the most bytes live at once.
// CHECK:        layout.totals {activation = 9248 : i64, arena.decode = 12288 : i64, bound.decode = 12288 : i64, io = 1028 : i64, kv_cache = 8192 : i64, saved = {{[1-9][0-9]*}} : i64, weight = 494848 : i64}

// Prefill and decode activations may share bytes: the first prefill and decode activations
// are both placed right after the io buffers.
// MODES: layout.slot @prefill.footer.logits offset {{[0-9]+}} size 16384 role io
// MODES: layout.slot @decode.footer.logits offset [[IOEND:[0-9]+]] size 1024 role io
// MODES-DAG: role activation live "prefill"
// MODES-DAG: role activation live "decode"
