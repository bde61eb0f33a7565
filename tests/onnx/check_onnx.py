#!/usr/bin/python3
"""Checks ONNX files with the onnx package's own checker (Debian's python3-onnx).

    /usr/bin/python3 tests/onnx/check_onnx.py FILE...

Runs onnx.checker.check_model(onnx.load(f), full_check=True) (the schema of
every node, and shape inference in strict mode) on each file and prints one
line per file. Exits 0 when every file passes, 1 when one does not (the reason
on stderr), 2 on bad usage, 3 when the onnx package is missing.
"""

import sys


def main(argv):
    if len(argv) < 2:
        print("usage: /usr/bin/python3 tests/onnx/check_onnx.py FILE...", file=sys.stderr)
        return 2
    try:
        import onnx
        import onnx.checker
    except ImportError as e:
        print(f"check_onnx.py: cannot import onnx ({e}); install Debian's python3-onnx and "
              "run this with /usr/bin/python3", file=sys.stderr)
        return 3
    failed = 0
    for path in argv[1:]:
        try:
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # the checker's and the loader's errors alike
            print(f"check_onnx.py: {path}: rejected by onnx {onnx.__version__}: {e}",
                  file=sys.stderr)
            failed += 1
            continue
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        print(f"{path}: ok (onnx {onnx.__version__} full check; IR {model.ir_version}, "
              f"opset {opsets})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
