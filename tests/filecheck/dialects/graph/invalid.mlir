// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One case per verifier message and parse error of the graph dialect.

// bad dim expression (parse error)
// CHECK: bad dim expression 'E+': unexpected end of expression
%0 = "graph.input"() <{input_name = "a"}> : () -> !graph.tensor<[E+], f32>

// -----

// bad dim expression: unbalanced parenthesis
// CHECK: bad dim expression '(E+1': expected ')'
%0 = "graph.input"() <{input_name = "a"}> : () -> !graph.tensor<[(E+1], f32>

// -----

// unknown dtype (parse error)
// CHECK: unknown dtype 'f33' (expected one of f32, f32p, bf16, bf16p, f16, i32, i64, q8_0, q8_0p, q4_0, q4_0p, q4_1, q4_1p, q4_k, q5_k, q6_k, q4_kp, q5_kp, q6_kp, q5_0, q5_1, q5_0p, q5_1p)
%0 = "graph.input"() <{input_name = "a"}> : () -> !graph.tensor<[T, E], f33>

// -----

// unknown weight dtype (parse error)
// CHECK: unknown dtype 'float'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] float hf "w"
}

// -----

// unknown schedule field (parse error)
// CHECK: unknown graph.schedule field 'tile_x' (expected one of tile_m, tile_n, tile_k, vectorize)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {schedule = #graph.schedule<tile_x = 8>} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// duplicate schedule field (parse error)
// CHECK: duplicate graph.schedule field 'tile_m'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {schedule = #graph.schedule<tile_m = 8, tile_m = 4>} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// schedule tile not positive (parse error)
// CHECK: graph.schedule: tile_k = 0 must be positive
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {schedule = #graph.schedule<tile_k = 0>} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// schedule vectorize width (parse error)
// CHECK: graph.schedule: vectorize = 3 must be one of 1, 2, 4, 8, 16
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {schedule = #graph.schedule<vectorize = 3>} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// symbol bound twice (parse error)
// CHECK: symbol E is bound twice
graph.model @m arch "test" symbols {E = 4, E = 8} {
}

// -----

// symbol name is not an identifier
// CHECK: graph.model @m: symbol name 'E.x' is not an identifier
"graph.model"() <{sym_name = "m", arch = "test", symbols = {"E.x" = 4 : i64}}> ({
^bb0:
}) : () -> ()

// -----

// T cannot be bound
// CHECK: graph.model @m: symbol T is reserved for the runtime token count and cannot be bound
graph.model @m arch "test" symbols {T = 4} {
}

// -----

// symbol value must be an integer
// CHECK: graph.model @m: symbol E must be bound to an integer
"graph.model"() <{sym_name = "m", arch = "test", symbols = {E = "four"}}> ({
^bb0:
}) : () -> ()

// -----

// symbol value must be positive
// CHECK: graph.model @m: symbol E = 0 must be positive
graph.model @m arch "test" symbols {E = 0} {
}

// -----

// compute op at model level
// CHECK: graph.model @m: 'graph.model' is not allowed at model level (only graph.weight, graph.header, graph.body, graph.footer)
graph.model @m arch "test" symbols {E = 4} {
  graph.model @inner arch "test" symbols {} {
  }
}

// -----

// weight after a section
// CHECK: graph.model @m: 'graph.weight' must come before the sections (order: graph.weight*, graph.header, graph.body, graph.footer)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.weight @late : [E] f32 hf "late"
}

// -----

// sections out of order
// CHECK: graph.model @m: 'graph.header' is out of order (order: graph.weight*, graph.header, graph.body, graph.footer)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    graph.output %x : !graph.tensor<[T, E], f32>
  }
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// two headers
// CHECK: graph.model @m: more than one 'graph.header'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// input declared twice
// CHECK: graph.model @m: graph.input "tokens" is declared twice
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %t2 = graph.input "tokens" : !graph.tensor<[T], i32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// per-layer weight without a body
// CHECK: graph.weight @"layers.{i}.w": per-layer weight ({i} in its name) but graph.model @m has no graph.body
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @"layers.{i}.w" : [E] f32 hf "h.{i}.w"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// weight dtype (generic form)
// CHECK: graph.weight @w: unknown dtype 'f99'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<E>], dtype = "f99", hf = "w"}> : () -> ()
}

// -----

// weight dim malformed (generic form): a parse error of the one dim grammar
// CHECK: bad dim expression 'E*': unexpected end of expression
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<E*>], dtype = "f32", hf = "w"}> : () -> ()
}

// -----

// tied_to and hf
// CHECK: graph.weight @w: tied_to excludes an hf/gguf source
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<V>, #graph.dim<E>], dtype = "f32", hf = "w", tied_to = @emb}> : () -> ()
}

// -----

// no source
// CHECK: graph.weight @w: has no source (hf, gguf or tied_to)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32
}

// -----

// transpose without hf
// CHECK: graph.weight @w: transpose needs an hf source
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<E>], dtype = "f32", gguf = "w", transpose}> : () -> ()
}

// -----

// nested tied_to
// CHECK: graph.weight @w: tied_to must be a flat symbol reference
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<V>, #graph.dim<E>], dtype = "f32", tied_to = @emb::@x}> : () -> ()
}

// -----

// {i} in the hf name only
// CHECK: graph.weight @w: hf name "h.{i}.w" and the weight name must both contain {i} or neither
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "h.{i}.w"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// slice with the wrong arity (generic form)
// CHECK: graph.weight @w: slice must be (axis, start, stop)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<E>], dtype = "f32", hf = "w", hf_shape = [#graph.dim<E>], slice = ["0", "E"]}> : () -> ()
}

// -----

// slice bound malformed (generic form)
// CHECK: graph.weight @w: slice: bad dim expression 'E)': unexpected ')'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.weight"() <{sym_name = "w", shape = [#graph.dim<E>], dtype = "f32", hf = "w", hf_shape = [#graph.dim<E>], slice = ["0", "0", "E)"]}> : () -> ()
}

// -----

// slice without hf shape
// CHECK: graph.weight @w: slice needs the hf shape
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" slice(0, 0, E)
}

// -----

// slice axis out of range
// CHECK: graph.weight @w: slice axis 1 is out of range for hf shape [3*E] (rank 1)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" [3*E] slice(1, 0, E)
}

// -----

// unbound symbol in a weight shape
// CHECK: graph.weight @w: shape [E, X] uses symbol X, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, X] f32 hf "w"
}

// -----

// unbound symbol in the hf shape
// CHECK: graph.weight @w: hf shape [Y] uses symbol Y, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" [Y]
}

// -----

// tied_to an undeclared weight
// CHECK: graph.weight @lm_head: tied_to @embed is not declared in graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @lm_head : [V, E] f32 tied_to @embed
}

// -----

// tied_to a tied weight
// CHECK: graph.weight @b: tied_to @a, which is itself tied to another weight
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.weight @a : [V, E] f32 tied_to @emb
  graph.weight @b : [V, E] f32 tied_to @a
}

// -----

// tied shape differs
// CHECK: graph.weight @lm_head: shape [E, V] differs from the shape [V, E] of tied_to @emb
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.weight @lm_head : [E, V] f32 tied_to @emb
}

// -----

// slice exceeds the hf dim
// CHECK: graph.weight @w: slice(0, 2*E, 4*E) is empty or exceeds hf dim 3*E
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" [3*E] slice(0, 2*E, 4*E)
}

// -----

// transpose of a 1-D hf tensor
// CHECK: graph.weight @w: transpose needs a 2-D hf tensor, got rank 1
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" [E] transpose
}

// -----

// packing does not give the declared shape
// CHECK: graph.weight @w: hf shape [E, 3*E] with its slice/transpose does not give the declared shape [E, E]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w" [E, 3*E] slice(1, 0, 2*E) transpose
}

// -----

// transpose of a 1-D weight
// CHECK: graph.weight @w: transpose needs a 2-D weight
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" transpose
}

// -----

// header with block arguments (generic form)
// CHECK: graph.header: takes no block arguments
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.header"() ({
  ^bb0(%a : !graph.tensor<[T, E], f32>):
    "graph.yield"() : () -> ()
  }) : () -> ()
}

// -----

// header without graph.yield
// CHECK: graph.header: must end with graph.yield
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
  }
}

// -----

// footer without graph.output
// CHECK: graph.footer: must end with graph.output
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %t = graph.input "tokens2" : !graph.tensor<[T], i32>
  }
}

// -----

// repeat malformed (generic form): #graph.dim parses through the one dim grammar
// CHECK: bad dim expression 'L*': unexpected end of expression
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.body"() <{repeat = #graph.dim<L*>}> ({
    "graph.yield"() : () -> ()
  }) : () -> ()
}

// -----

// repeat given as a string, not a dim (generic form)
// CHECK: "L" should be of base attribute graph.dim
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  "graph.body"() <{repeat = "L"}> ({
    "graph.yield"() : () -> ()
  }) : () -> ()
}

// -----

// repeat uses an unbound symbol
// CHECK: graph.body: repeat N uses symbol N, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.body repeat N {
    graph.yield
  }
}

// -----

// repeat not positive
// CHECK: graph.body: repeat L-2 must evaluate to a positive count
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.body repeat L-2 {
    graph.yield
  }
}

// -----

// body arguments differ from the header's yield
// CHECK: graph.body: block argument types (!graph.tensor<[T, E], bf16>) do not match the types (!graph.tensor<[T, E], f32>) yielded by graph.header
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], bf16>) {
    graph.yield %x : !graph.tensor<[T, E], bf16>
  }
}

// -----

// body yield differs from its arguments (loop-carried)
// CHECK: graph.body: loop-carried block argument types (!graph.tensor<[T, E], f32>) differ from its graph.yield types (!graph.tensor<[T, V], f32>)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %y = graph.input "y" : !graph.tensor<[T, V], f32>
    graph.yield %y : !graph.tensor<[T, V], f32>
  }
}

// -----

// footer arguments differ from the body's yield
// CHECK: graph.footer: block argument types () do not match the types (!graph.tensor<[T, E], f32>) yielded by graph.body
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.footer {
    %y = graph.input "y" : !graph.tensor<[T, E], f32>
    graph.output %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// section argument with an unbound symbol
// CHECK: graph.footer: argument #0 type !graph.tensor<[T, Z], f32> uses symbol Z, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield
  }
  graph.footer (%x : !graph.tensor<[T, Z], f32>) {
    graph.output %x : !graph.tensor<[T, Z], f32>
  }
}

// -----

// empty input name
// CHECK: graph.input: the input name is empty
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "" : !graph.tensor<[T], i32>
    graph.yield
  }
}

// -----

// input type with an unbound symbol
// CHECK: graph.input "t": type !graph.tensor<[T, Q], f32> uses symbol Q, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "t" : !graph.tensor<[T, Q], f32>
    graph.yield
  }
}

// -----

// graph.output with no value
// CHECK: graph.output: needs at least one value
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield
  }
  graph.footer {
    graph.output
  }
}

// -----

// graph.yield in the footer
// CHECK: 'graph.yield' expects parent op to be one of 'graph.header', 'graph.body'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield
  }
  graph.footer {
    graph.yield
  }
}

// -----

// terminator not last
// CHECK: 'graph.yield' must be the last operation in its parent block
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
    %t = graph.input "t" : !graph.tensor<[T], i32>
  }
}

// -----

// compute op outside a section
// CHECK: 'graph.input' expects parent op to be one of 'graph.header', 'graph.body', 'graph.footer'
%z = graph.input "z" : !graph.tensor<[T, E], f32>

// -----

// wrong operand count
// CHECK: graph.add: expects 2 operand(s), got 1
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.add %x : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// wrong result count
// CHECK: graph.relu: expects 1 result(s), got 2
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y, %z = graph.relu %x : (!graph.tensor<[T, E], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>)
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// wrong weight count
// CHECK: graph.layernorm: expects 2 weight(s), got 1
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.layernorm %x {weights = [@g], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// linear takes one or two weights
// CHECK: graph.linear: expects 1 or 2 weight(s), got 3
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@w, @b, @g]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// empty when
// CHECK: graph.relu: when = [] guards the op out of every mode
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {when = []} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// unknown mode in when
// CHECK: graph.relu: unknown mode 'training' in when (expected prefill, decode, backward, optimize)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {when = ["training"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// duplicate mode in when
// CHECK: graph.relu: duplicate mode in when
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x {when = ["decode", "decode"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// malformed dim property: a parse error (dims are read by the one dim grammar)
// CHECK: bad dim expression '(H': expected ')'
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.attention %x, %x, %x heads (H kv_heads KV head_dim D : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// nested weight reference
// CHECK: graph.linear: weight @w::@inner must be a flat symbol reference
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@w::@inner]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// weight not declared
// CHECK: graph.linear: weight @"layers.{i}.wq" is not declared in graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@"layers.{i}.wq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// per-layer weight outside graph.body
// CHECK: graph.linear: per-layer weight @"layers.{i}.wq" is used outside graph.body
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.weight @"layers.{i}.wq" : [E, E] f32 hf "h.{i}.wq"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@"layers.{i}.wq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// result with an unbound symbol
// CHECK: graph.relu: result #0 type !graph.tensor<[T, F], f32> uses symbol F, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, F], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// dim property with an unbound symbol
// CHECK: graph.attention: heads = NH uses symbol NH, which is not bound on graph.model @m
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.attention %x, %x, %x heads NH kv_heads KV head_dim D : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// embed needs i32 token ids
// CHECK: graph.embed: token ids must be i32, got !graph.tensor<[T, E], f32>
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.embed %x {weights = [@emb]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// embed width differs from the table
// CHECK: graph.embed: the result's last dim is V but dim 1 of weight @emb [V, E] is E
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.embed %t {weights = [@emb]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, V], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// weight of too low rank
// CHECK: graph.linear: weight @g [E] has no dim 1
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@g]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// operand and result types differ
// CHECK: graph.relu: operand and result have different types: !graph.tensor<[T, E], f32> vs !graph.tensor<[T, E], bf16>
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.relu %x : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], bf16>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// add operands differ
// CHECK: graph.add: operands have different types: !graph.tensor<[T, E], f32> vs !graph.tensor<[T, V], f32>
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %z = graph.input "z" : !graph.tensor<[T, V], f32>
    %y = graph.add %x, %z : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// swiglu operands differ
// CHECK: graph.swiglu: operands have different types
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %z = graph.input "z" : !graph.tensor<[T, V], f32>
    %y = graph.swiglu %x, %z : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// rmsnorm gamma shape
// CHECK: graph.rmsnorm: gamma @w has shape [E, E], expected [E]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.rmsnorm %x {weights = [@w], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// layernorm beta shape
// CHECK: graph.layernorm: beta @bv has shape [V], expected [E]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.weight @bv : [V] f32 hf "bv"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.layernorm %x {weights = [@g, @bv], eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// rank-0 operand
// CHECK: graph.lm_head: operand !graph.tensor<[], f32> must have rank >= 1
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %s = graph.input "s" : !graph.tensor<[], f32>
    %y = graph.lm_head %s {weights = [@emb]} : (!graph.tensor<[], f32>) -> !graph.tensor<[T, V], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// eps not positive
// CHECK: graph.rmsnorm: eps = 0.0 must be positive
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.rmsnorm %x {weights = [@g], eps = 0.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// linear leading dims differ
// CHECK: graph.linear: leading dims of operand !graph.tensor<[T, E], f32> and result !graph.tensor<[V, E], f32> differ
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@w]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[V, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// linear output width differs from the weight
// CHECK: graph.linear: the result's last dim is V but dim 0 of weight @w [E, E] is E
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@w]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// linear input width differs from the weight
// CHECK: graph.linear: the operand's last dim is V but dim 1 of weight @w [E, E] is E
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %z = graph.input "z" : !graph.tensor<[T, V], f32>
    %y = graph.linear %z {weights = [@w]} : (!graph.tensor<[T, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// linear bias shape
// CHECK: graph.linear: bias @emb has shape [V, E], expected [E]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.linear %x {weights = [@w, @emb]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// lm_head bias shape
// CHECK: graph.lm_head: bias @b has shape [E], expected [V]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.lm_head %x {weights = [@emb, @b]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// rope theta not positive
// CHECK: graph.rope: theta = -1.0 must be positive
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %q, %k = graph.rope %x, %x heads H kv_heads KV head_dim D {theta = -1.0 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>)
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// heads not a multiple of kv_heads
// CHECK: graph.rope: heads = H (2) is not a multiple of kv_heads = 3 (3)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %q, %k = graph.rope %x, %x heads H kv_heads 3 head_dim D {theta = 1.0e+04 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>)
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention k and v differ
// CHECK: graph.attention: k and v have different types
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %z = graph.input "z" : !graph.tensor<[T, V], f32>
    %y = graph.attention %x, %x, %z heads H kv_heads KV head_dim D {causal} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// gelu approximate
// CHECK: graph.gelu: approximate = "erf" must be "tanh" or "none"
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.gelu %x {approximate = "erf"} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// cross_entropy targets must be integers
// CHECK: graph.cross_entropy: targets must be i32, got !graph.tensor<[T, E], f32>
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.cross_entropy %x, %x : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[1], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// matmul of a 1-D b
// CHECK: graph.matmul: expects a [.., K] x b [K, N] -> c [.., N], got !graph.tensor<[T, E], f32>, !graph.tensor<[E], f32> -> !graph.tensor<[T, E], f32>
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %b = graph.input "b" : !graph.tensor<[E], f32>
    %y = graph.matmul %x, %b : (!graph.tensor<[T, E], f32>, !graph.tensor<[E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// matmul inner dims differ
// CHECK: graph.matmul: inner dims differ: E (a) vs V (b)
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %b = graph.input "b" : !graph.tensor<[V, E], f32>
    %y = graph.matmul %x, %b : (!graph.tensor<[T, E], f32>, !graph.tensor<[V, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// fused_matmul_relu result shape
// CHECK: graph.fused_matmul_relu: result shape [T, E], expected [T, V]
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E, E] f32 hf "w"
  graph.weight @g : [E] f32 hf "g"
  graph.weight @b : [E] f32 hf "b"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %b = graph.input "b" : !graph.tensor<[E, V], f32>
    %y = graph.fused_matmul_relu %x, %b : (!graph.tensor<[T, E], f32>, !graph.tensor<[E, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention: kv_heads says H where k/v are KV*D wide (a kv_store would overrun its slot)
// CHECK: graph.attention: k/v !graph.tensor<[T, KV*D], f32> is 4 wide but kv_heads*head_dim = H*D = 8
graph.model @m arch "test" symbols {E = 8, H = 4, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %o = graph.attention %q, %k, %k heads H kv_heads H head_dim D {causal} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>, !graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, H*D], f32>
    graph.yield %o : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// rope: q narrower than heads*head_dim
// CHECK: graph.rope: q !graph.tensor<[T, E], f32> is 8 wide but heads*head_dim = H*D = 16
graph.model @m arch "test" symbols {E = 8, H = 4, KV = 2, D = 4, L = 2, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %t = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %q, %k = graph.rope %x, %x heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>)
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// layer_dtypes on a weight that is not per layer
// CHECK: graph.weight @w: layer_dtypes must be a string of dtypes, one per layer, on a per-layer weight; got "q4_k,q6_k"
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @w : [E] f32 hf "w" attributes {layer_dtypes = "q4_k,q6_k"}
}

// -----

// layer_dtypes naming an unknown dtype
// CHECK: layer_dtypes must be a string of dtypes, one per layer, on a per-layer weight; got "q4_k,q9"
graph.model @m arch "test" symbols {E = 4, H = 2, KV = 2, D = 2, L = 2, V = 8} {
  graph.weight @"l.{i}.w" : [E] f32 hf "h.{i}.w" attributes {layer_dtypes = "q4_k,q9"}
  "graph.body"() <{repeat = #graph.dim<L>}> ({
    "graph.yield"() : () -> ()
  }) : () -> ()
}
