// RUN: sed 's/approximate = "tanh"/approximate = "none"/' %inputs/tiny_gpt2.mlir | ckir-opt --lower-prefill{max-context=16} | filecheck %s --check-prefix=PRE
// RUN: sed 's/approximate = "tanh"/approximate = "none"/' %inputs/tiny_gpt2.mlir | ckir-opt --lower-decode{max-context=16} | filecheck %s --check-prefix=DEC
// RUN: sed 's/approximate = "tanh"/approximate = "none"/' %inputs/tiny_gpt2.mlir | ckir-opt --lower-backward{max-context=16} | filecheck %s --check-prefix=BWD
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-prefill{max-context=16} | filecheck %s --check-prefix=TANH

// graph.gelu {approximate = "none"} (transformers' erf "gelu") lowers to the
// gelu_erf kernels in every mode; "tanh" keeps the gelu_tanh ones.

// PRE: lowered.kernel @gelu_erf_f32 op "gelu_erf" c "ckir_gelu_erf_f32"
// PRE-NOT: gelu_tanh
// PRE: lowered.call @gelu_erf_f32(@prefill.layers.0.f) -> (@prefill.layers.0.g) {n = #lowered.rt<T*256>
// PRE-NOT: gelu_tanh

// DEC: lowered.kernel @gelu_erf_f32 op "gelu_erf"
// DEC: lowered.call @gelu_erf_f32(@decode.layers.0.f) -> (@decode.layers.0.g) {n = 256 : i64

// BWD: lowered.kernel @gelu_erf_bwd_f32 op "gelu_erf_bwd" c "ckir_gelu_erf_bwd_f32"
// BWD: lowered.call @gelu_erf_f32(@backward.layers.0.f) -> (@backward.layers.0.g)
// BWD: lowered.call @gelu_erf_bwd_f32(@backward.layers.1.f, @backward.layers.1.dg) -> (@backward.layers.1.df) {n = #lowered.rt<T*256>
// BWD-NOT: gelu_tanh

// TANH: lowered.call @gelu_tanh_f32(@prefill.layers.0.f) -> (@prefill.layers.0.g)
