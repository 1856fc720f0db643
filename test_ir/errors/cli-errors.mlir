// Bad input gets one `file:line:col: error: ...` line, exit code 1, no traceback, no output file.

// RUN: not stablehlo-perf-opt %inputs/empty.mlir 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: {{.*}}empty.mlir:1:1: error: empty input: expected a StableHLO module
// EMPTY-NOT: Traceback

// RUN: not stablehlo-perf-opt %inputs/syntax_error.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: {{.*}}syntax_error.mlir:3:24: error: expected ','

// RUN: not stablehlo-perf-opt %inputs/unknown_dialect.mlir 2>&1 | FileCheck %s --check-prefix=DIALECT
// DIALECT: {{.*}}unknown_dialect.mlir:2:8: error: Dialect `mydialect' not found for custom op 'mydialect.frobnicate'

// RUN: not stablehlo-perf-opt %s --target tpu-v9 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: stablehlo-perf-opt: error: unknown target 'tpu-v9'; valid targets: gb10, h100, h200, host, thor, tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e

// RUN: not stablehlo-perf-opt %s --target %inputs/bad_target.toml 2>&1 | FileCheck %s --check-prefix=TARGETFILE
// TARGETFILE: error: {{.*}}bad_target.toml: unknown key 'clock_mhz'

// RUN: not stablehlo-perf-opt %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: does-not-exist.mlir:1:1: error: cannot read input: No such file or directory

// RUN: not stablehlo-perf-opt %s -o %t.no-such-dir/out.mlir 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// UNWRITABLE: stablehlo-perf-opt: error: cannot write '{{.*}}no-such-dir/out.mlir': not a writable location

// RUN: not stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-nope)' 2>&1 | FileCheck %s --check-prefix=PASS
// PASS: stablehlo-perf-opt: error: unknown pass 'perf-nope'; known passes: perf-inline-calls, perf-op-info, perf-fusion, perf-annotate-cache-traffic, perf-annotate-cycles, perf-critical-path

// RUN: not stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{clock=3})' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: stablehlo-perf-opt: error: pass 'perf-annotate-cycles' has no option 'clock' (options: target, branches)

// RUN: not stablehlo-perf-opt %s --pass-pipeline='builtin.module(perf-annotate-cycles{branches=min})' 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: stablehlo-perf-opt: error: perf-annotate-cycles: branches must be one of max, mean, not 'min'

// Branch weights must weigh the op's branches.
// RUN: not stablehlo-perf-opt %inputs/bad_branch_weights.mlir 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// WEIGHTS: {{.*}}bad_branch_weights.mlir:4:8: error: perf.branch_weights has 3 weights for 2 branches
// WEIGHTS-NOT: Traceback

// An error leaves no partial output behind.
// RUN: rm -f %t.out.mlir %t.report.json
// RUN: not stablehlo-perf-opt %inputs/syntax_error.mlir -o %t.out.mlir --report %t.report.json
// RUN: not test -e %t.out.mlir
// RUN: not test -e %t.report.json

// Reading from stdin names the input <stdin>.
// RUN: not stablehlo-perf-opt - < %inputs/syntax_error.mlir 2>&1 | FileCheck %s --check-prefix=STDIN
// STDIN: <stdin>:3:24: error:

func.func @ok(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
