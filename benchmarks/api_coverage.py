"""API coverage of the conformance table (prints one JSON object): for each module of the NKI API reference of
both generations (the name lists of tests/test_api_reference_names.py, and the methods of the current NkiTensor),
how many of its functions the table (tests/nki/api_forms.py) has forms for, and how many forms; with
--uncovered, the functions without any, by name.

Names only count as covered when a row of the table runs them against a numpy reference; resolving a name
(what test_api_reference_names checks) is not coverage. Constants, dtypes, enums and buffers are listed by
the reference too and are left out of the denominators here (they take no parameter forms).

    .venv/bin/python benchmarks/api_coverage.py [--uncovered]
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


NOT_FUNCTIONS = set("""
    psum sbuf hbm private_hbm shared_hbm bool_ int8 int16 int32 uint8 uint16 uint32 float16 float32 bfloat16
    tfloat32 float8_e4m3 float8_e5m2 float8_e4m3fn float8_e8m0fnu float8_e5m2_x4 float8_e4m3fn_x4
    float4_e2m1fn_x4 tile_size prelu bypass engine dma_engine reduce_cmd dge_mode oob_mode matmul_perf_mode
    nc_version VirtualRegister NkiInstruction NkiTensor ReplicaGroup fp32 par_dim spmd_dim nc tensor
""".split())


# The methods of nki.language.NkiTensor the current reference documents (nki/api/nki/language/__init__.py, class
# NkiTensor: the views NKI 0.5 added and the ones before them); rows name them "language.NkiTensor.<method>".
NKITENSOR_METHODS = """
    slice select permute broadcast expand_dim squeeze_dim reshape_dim flatten_dims rearrange vector_select
    is_contiguous is_indirect reshape view ap get_pattern indirect
""".split()


def coverage(show_uncovered: bool = False) -> dict:
    names = _load(ROOT / "tests" / "test_api_reference_names.py", "_api_reference_names")
    forms = _load(ROOT / "tests" / "nki" / "api_forms.py", "_api_forms").FORMS
    by_function = collections.Counter((f.api, f.function) for f in forms)
    out = {}
    for module, listed in names.MODULES + [("nki.language.NkiTensor", NKITENSOR_METHODS)]:
        api = "beta" if module.startswith("neuronxcc") else "current"
        part = module.removeprefix("neuronxcc.").removeprefix("nki").lstrip(".") or "nki"  # language, isa, ...
        functions = [n for n in listed if n not in NOT_FUNCTIONS]
        covered = [n for n in functions if by_function[(api, f"{part}.{n}")]]
        entry = {"functions": len(functions), "covered": len(covered),
                 "forms": sum(by_function[(api, f"{part}.{n}")] for n in functions)}
        if show_uncovered:
            entry["uncovered"] = [n for n in functions if n not in covered]
        out[module] = entry
    total = sum(e["functions"] for e in out.values())
    done = sum(e["covered"] for e in out.values())
    return {"benchmark": "api_coverage", "functions": total, "covered": done, "forms": len(forms),
            "covered_fraction": round(done / total, 3), "modules": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uncovered", action="store_true", help="list the functions without a form")
    print(json.dumps(coverage(p.parse_args().uncovered)))


if __name__ == "__main__":
    main()
