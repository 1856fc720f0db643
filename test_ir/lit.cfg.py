"""lit configuration: FileCheck tests of the perf passes and the CLI's error messages."""
# ruff: noqa: F821  (lit injects `config`)

import os

import lit.formats

config.name = "stablehlo-perf"
config.test_format = lit.formats.ShTest(False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["corpus", "Inputs", "Output"]
config.environment["PATH"] = os.environ.get("PATH", "")
config.environment["HOME"] = os.environ.get("HOME", "/tmp")
config.substitutions.append(("FileCheck", "filecheck --enable-var-scope"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
