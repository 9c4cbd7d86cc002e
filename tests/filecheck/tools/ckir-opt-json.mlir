// ckir-opt --emit-json writes IR JSON (docs/ir-json.md); a .json file, or any input whose
// first non-space character is `{` (stdin too), is read as IR JSON.

// text -> JSON -> text prints byte-identically, for graph IR and after passes.
// RUN: ckir-opt %inputs/tiny_llama.mlir > %t.text.mlir
// RUN: ckir-opt %inputs/tiny_llama.mlir --emit-json -o %t.json
// RUN: ckir-opt %t.json | diff - %t.text.mlir
// RUN: ckir-opt %t.json -t json | diff - %t.json
// RUN: filecheck %s --check-prefix=OUT < %t.json
// OUT: "format": "ckir-ir-json",
// OUT: "version": 1,
// OUT: "op": "graph.model",
// OUT: "op": "graph.weight",
// OUT: "sym_name": {
// OUT-NEXT: "string": "embed"
// OUT: "op": "graph.rmsnorm",
// OUT: "operands": [
// OUT-NEXT: "%x"
// OUT: "id": "%h",
// OUT-NEXT: "type": {
// OUT-NEXT: "type": "graph.tensor",
// OUT-NEXT: "shape": [
// OUT-NEXT: "T",
// OUT-NEXT: "E"
// OUT-NEXT: ],
// OUT-NEXT: "dtype": "f32"
// OUT: "eps": {
// OUT-NEXT: "float": 1e-05,
// OUT-NEXT: "type": "f64"

// Passes run on JSON input; lowered and layout IR round-trip too; stdin is sniffed.
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout > %t.plan.mlir
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --emit-json | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout | diff - %t.plan.mlir
// RUN: ckir-opt %t.plan.mlir --emit-json | ckir-opt - | diff - %t.plan.mlir
// RUN: ckir-opt %t.plan.mlir --emit-json | filecheck %s --check-prefix=LOWERED
// LOWERED: "op": "lowered.buffer",
// LOWERED: "type": "lowered.buf",
// LOWERED-NEXT: "shape": [
// LOWERED-NEXT: 256,
// LOWERED-NEXT: 64
// LOWERED: "op": "layout.plan",

// Errors: one line naming the file and the JSON path, exit 1, never a traceback.
// RUN: printf '{"format": "ckir-ir-json", "version": 1, "ops": [' > %t.bad.json
// RUN: not ckir-opt %t.bad.json 2>&1 | filecheck %s --check-prefix=MALFORMED
// MALFORMED-NOT: Traceback
// MALFORMED: error: {{.*}}.bad.json:1:{{[0-9]+}}: malformed JSON: Expecting value
// MALFORMED-NOT: Traceback

// RUN: sed 's/"graph.rmsnorm"/"graph.nonesuch"/' %t.json > %t.unknown.json
// RUN: not ckir-opt %t.unknown.json 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN-NOT: Traceback
// UNKNOWN: error: {{.*}}.unknown.json: ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0].ops[0].op: unknown op 'graph.nonesuch'
// UNKNOWN-NOT: Traceback

// RUN: sed 's/"float": 1e-05/"float": "tiny"/' %t.json | not ckir-opt 2>&1 | filecheck %s --check-prefix=ATTR
// ATTR-NOT: Traceback
// ATTR: error: <stdin>: ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0].ops[0].properties.eps.float: expected a number
// ATTR-NOT: Traceback

// RUN: sed 's/"type": "f64"/"type": "f99"/' %t.json | not ckir-opt - 2>&1 | filecheck %s --check-prefix=TYPE
// TYPE-NOT: Traceback
// TYPE: error: <stdin>: ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0].ops[0].properties.eps.type: cannot parse 'f99'
// TYPE-NOT: Traceback

// RUN: sed 's/"dtype": "i32"/"dtype": "f99"/' %t.json | not ckir-opt - 2>&1 | filecheck %s --check-prefix=DTYPE
// DTYPE-NOT: Traceback
// DTYPE: error: <stdin>: ops[0].regions[0].blocks[0].ops[12].regions[0].blocks[0].ops[0].results[0].type: bad 'graph.tensor': graph.tensor: unknown dtype 'f99'
// DTYPE-NOT: Traceback

// A verifier failure names the op's JSON path.
// RUN: python -c "import json, sys; d = json.load(sys.stdin); d['ops'][0]['regions'][0]['blocks'][0]['ops'][13]['regions'][0]['blocks'][0]['ops'][0]['results'][0]['type']['shape'] = ['T', 'V']; json.dump(d, sys.stdout)" < %t.json > %t.verify.json
// RUN: not ckir-opt %t.verify.json 2>&1 | filecheck %s --check-prefix=VERIFY
// VERIFY-NOT: Traceback
// VERIFY: error: {{.*}}.verify.json: ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0].ops[0]: graph.rmsnorm: operand and result have different types
// VERIFY-NOT: Traceback

// RUN: python -c "import json, sys; d = json.load(sys.stdin); d['ops'][0]['regions'][0]['blocks'][0]['ops'][13]['regions'][0]['blocks'][0]['ops'][0]['operands'] = ['%%nowhere']; json.dump(d, sys.stdout)" < %t.json | not ckir-opt - 2>&1 | filecheck %s --check-prefix=OPERAND
// OPERAND-NOT: Traceback
// OPERAND: error: <stdin>: ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0].ops[0].operands[0]: unknown value %nowhere (not defined before this use)
// OPERAND-NOT: Traceback

// RUN: echo '{"format": "ckir-ir-json", "version": 2, "ops": []}' | not ckir-opt 2>&1 | filecheck %s --check-prefix=VERSION
// VERSION: error: <stdin>: version: expected 1, got 2
