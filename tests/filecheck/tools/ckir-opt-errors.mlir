// ckir-opt: user mistakes end in one error line and exit 1 (2 for argparse), never a traceback.

// A target ckir cannot print (xDSL's llvm target, among others, is not offered).
// RUN: not ckir-opt -t llvm %inputs/tiny_llama.mlir 2>&1 | filecheck %s --check-prefix=TARGET
// TARGET-NOT: Traceback
// TARGET: argument -t/--target: invalid choice: 'llvm' (choose from mlir, c, json{{.*}})
// TARGET-NOT: Traceback

// 3000 nested regions: the parser's recursion limit, reported as such.
// RUN: python -c "print('builtin.module {' * 3000 + '}' * 3000)" > %t.mlir
// RUN: not ckir-opt %t.mlir 2>&1 | filecheck %s --check-prefix=DEEP
// DEEP-NOT: Traceback
// DEEP: error: {{.*}}.mlir: regions nest too deeply to parse
// DEEP-NOT: Traceback

// An unclosed `{` in pass options.
// RUN: not ckir-opt %inputs/tiny_llama.mlir '--plan-layout{align=128' 2>&1 | filecheck %s --check-prefix=OPTS
// OPTS-NOT: Traceback
// OPTS: error: Error parsing pass pipeline specification:
// OPTS: Malformed pass arguments
// OPTS-NOT: Traceback

// An option of the wrong type.
// RUN: not ckir-opt %inputs/tiny_llama.mlir -p 'lower-decode{max-context=abc}' 2>&1 | filecheck %s --check-prefix=TYPE
// TYPE-NOT: Traceback
// TYPE: error: Incompatible types: given ('abc',), expected int | None
// TYPE-NOT: Traceback

// This file itself: a module whose `{` is never closed.
// RUN: not ckir-opt %s 2>&1 | filecheck %s --check-prefix=UNCLOSED
// UNCLOSED-NOT: Traceback
// UNCLOSED: ckir-opt-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: error:
// UNCLOSED-NOT: Traceback

builtin.module {
  graph.model @m arch "x" symbols {E = 4} {
