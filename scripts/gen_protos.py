#!/usr/bin/env python3
"""Compile every proto/*.proto into auditor/_proto/ with grpcio-tools (messages, gRPC stubs, .pyi).

Imports inside generated modules are rewritten to be package-relative so the generated package needs
nothing on sys.path.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "proto"
OUT = ROOT / "auditor" / "_proto"


def main() -> int:
    from grpc_tools import protoc  # imported late: only the build needs grpcio-tools

    OUT.mkdir(parents=True, exist_ok=True)
    protos = sorted(SRC.glob("*.proto"))
    if not protos:
        print("no .proto files in", SRC, file=sys.stderr)
        return 1
    include = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{SRC}", f"-I{include}", f"--python_out={OUT}", f"--pyi_out={OUT}",
            f"--grpc_python_out={OUT}", *map(str, protos)]
    if protoc.main(args) != 0:
        print("protoc failed on", [p.name for p in protos], file=sys.stderr)
        return 1
    modules = {p.stem + "_pb2" for p in protos}
    for gen in OUT.glob("*_pb2*.py"):
        text = gen.read_text()
        for mod in modules:
            text = re.sub(rf"^import {mod} as", f"from . import {mod} as", text, flags=re.M)
        gen.write_text(text)
    (OUT / "__init__.py").write_text('"""Generated from proto/ by scripts/gen_protos.py. Do not edit."""\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
