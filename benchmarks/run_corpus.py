"""Run public NKI kernel corpora, unmodified, on trnsim and print pass counts as JSON.

Not part of the test suite: it needs local git copies of the public repositories, given as bare git
directories (or work trees) with --sdk and --samples:

    python benchmarks/run_corpus.py --sdk PATH/aws-neuron-sdk --samples PATH/nki-samples [--only sdk-tests]

Corpora (each extracted from one commit into a scratch folder):
- sdk-tests: every test file of aws-neuron-sdk nki/test (the newest commit that has them), run by pytest;
- samples-unit: nki-samples test/unit with --simulation-only, at the last commit with the reference kernels
  (tests that read the host's instance name see `--instance`, trn2.48xlarge unless told);
- samples-tutorials: each tutorial kernel file of nki-samples (newest commit) run as a script (its __main__), the
  MX matmul tutorial's driver, and the attention-performance tutorial's check of each kernel version;
- samples-contributed: each contributed kernel file of nki-samples (newest commit that has them) run as a script
  (its __main__ builds inputs, runs the kernel, compares or benchmarks);
- sdk-examples: each aws-neuron-sdk nki/examples script run as a script.

Every file runs in its own process with the trnsim shim installed (`import nki` and `import neuronxcc.nki`
resolve to trnsim). One JSON object: per corpus, passed/failed counts and each failure's first error line.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tarfile
import io
import tempfile
from pathlib import Path

# The EC2 instance name a test reads to decide what it runs on (nki-samples' double-row matmul tests read the
# DMI product name, and skip unless it names a trn2): the instance trnsim emulates, as `--instance` says.
DMI = "/sys/devices/virtual/dmi/id/product_name"
INSTANCE = ("import builtins, io, os; _open = builtins.open; name = os.environ.get('TRNSIM_CORPUS_INSTANCE'); "
            "builtins.open = lambda f, *a, **k: io.StringIO(name + '\\n') if name and f == %r else _open(f, *a, **k); " % DMI)
PYTEST = (INSTANCE + "import sys, trnsim.shim; trnsim.shim.install(); import pytest; "
          "sys.exit(pytest.main(sys.argv[1:]))")
SCRIPT = ("import sys, runpy, trnsim.shim; trnsim.shim.install(); p = sys.argv[1]; sys.argv = sys.argv[1:]; "
          "sys.path.insert(0, __import__('os').path.dirname(p)); runpy.run_path(p, run_name='__main__')")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(_gitdir(repo)), *args], check=True, capture_output=True,
                          text=True).stdout


def _gitdir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def extract(repo: Path, commit: str, dest: Path) -> Path:
    """The tree of `commit` written under dest/<commit>."""
    out = dest / commit[:12]
    if not out.exists():
        data = subprocess.run(["git", "--git-dir", str(_gitdir(repo)), "archive", commit], check=True,
                              capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(out, filter="data")
    return out


def newest_with(repo: Path, path: str, ref: str = "HEAD") -> str:
    """The newest commit (from ref back) whose tree has `path`."""
    last_touch = git(repo, "log", "-1", "--format=%H", ref, "--", path).strip()
    tree = git(repo, "ls-tree", last_touch, "--", path).strip()
    return last_touch if tree else git(repo, "rev-parse", last_touch + "^").strip()


def run_one(cmd: list[str], cwd: Path, env: dict, timeout: int) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return -1, f"timed out after {timeout} s"


def first_error(out: str) -> str:
    lines = [l for l in out.splitlines() if l.strip()]
    for pat in (r"^E\s+\w+(Error|Exception)", r"^\w+(Error|Exception)\b", r"^E\s+"):
        hits = [l for l in lines if re.match(pat, l)]
        if hits:
            return hits[-1 if pat != r"^E\s+\w+(Error|Exception)" else 0].strip()[:300]
    return (lines[-1] if lines else "").strip()[:300]


def pytest_counts(out: str) -> tuple[int, int]:
    tail = "\n".join(out.splitlines()[-5:])
    get = lambda word: sum(int(n) for n in re.findall(rf"(\d+) {word}", tail))
    return get("passed"), get("failed") + get("error")


def pytest_failures(out: str) -> list[str]:
    """'test name: first error line' for each failure block of pytest's --tb=short output."""
    parts = re.split(r"^_{3,} (.+?) _{3,}$", out, flags=re.M)
    found = []
    for name, body in zip(parts[1::2], parts[2::2]):
        errs = [l[1:].strip() for l in body.splitlines() if l.startswith("E ")]
        found.append(f"{name}: {(errs[0] if errs else first_error(body))[:300]}")
    return found


def run_pytest_files(files: list[Path], cwd: Path, env: dict, timeout: int, extra=()) -> dict:
    res = {"passed": 0, "failed": 0, "files": {}}

    def one(f):
        code, out = run_one([sys.executable, "-c", PYTEST, str(f), "-q", "-rfE", "-p", "no:cacheprovider",
                             "--tb=short", *extra], cwd, env, timeout)
        return f, code, out

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for f, code, out in pool.map(one, files):
            p, n = pytest_counts(out)
            if code not in (0, 5) and n == 0:  # collection error or timeout
                n = 1
            res["passed"] += p
            res["failed"] += n
            res["files"][f.name] = {"passed": p, "failed": n,
                                    **({"failures": pytest_failures(out) or [first_error(out)]} if n else {})}
            print(f"{f.name}: {p} passed, {n} failed", file=sys.stderr)
    return res


def run_scripts(files: list[Path], cwd: Path, env: dict, timeout: int, extra_runs=()) -> dict:
    """Each file run as a script, plus `extra_runs` ((name, argv after the interpreter, folder)); a run passes
    when it exits 0 and prints no failed comparison (`np.allclose pass? False`, as the MX tutorial reports)."""
    res = {"passed": 0, "failed": 0, "files": {}}
    runs = [(str(f.relative_to(cwd)), ["-c", SCRIPT, str(f)], f.parent) for f in files] + list(extra_runs)

    def one(run):
        name, argv, folder = run
        return name, *run_one([sys.executable, *argv], folder, env, timeout)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, code, out in pool.map(one, runs):
            mismatch = re.search(r"allclose pass\?\s*False", out)
            ok = code == 0 and not mismatch
            error = "passed" if ok else (mismatch.group(0) if mismatch else first_error(out))
            if not ok and "XFailed" in error:  # a case its own file expects to fail (pytest.xfail)
                res["xfailed"] = res.get("xfailed", 0) + 1
                res["files"][name] = f"xfailed: {error}"
                print(f"{name}: xfailed (expected by the file)", file=sys.stderr)
                continue
            res["passed" if ok else "failed"] += 1
            res["files"][name] = error
            print(f"{name}: {'passed' if ok else 'FAILED ' + error}", file=sys.stderr)
    return res


# The attention-performance tutorial's own check, test_attn_tutorial(mode, version), for one kernel version in one
# mode per process (each version is run on its own, as its kernels' module-level SBUF address counter expects).
# The file uses `pytest` without importing it (for the xfail of a case that fails on hardware too).
ATTENTION = ("import sys, pytest, trnsim.shim; trnsim.shim.install(); sys.path.insert(0, '.'); import test_attention as t; "
             "t.pytest = pytest; t.test_attn_tutorial(sys.argv[2], getattr(t, 'attn_fwd_v' + sys.argv[1]))")


def attention_runs(root: Path) -> list:
    folder = root / "src" / "nki_samples" / "tutorials" / "attention_fwd_performance"
    if not (folder / "test_attention.py").exists():
        return []
    versions = sorted(int(m) for m in re.findall(r"^def attn_fwd_v(\d+)\(", (folder / "attention_kernels.py").read_text(),
                                                 re.M))
    return [(f"attention_fwd_performance v{v} {mode}", ["-c", ATTENTION, str(v), mode], folder)
            for v in versions for mode in ("accuracy", "benchmark")]


def main():
    global args
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdk", type=Path, help="aws-neuron/aws-neuron-sdk git directory")
    ap.add_argument("--samples", type=Path, help="aws-neuron/nki-samples git directory")
    ap.add_argument("--only", action="append", help="run only these corpora")
    ap.add_argument("--filter", default="", help="only files whose name contains this")
    ap.add_argument("--exclude", default=None, help="leave out files whose name contains this")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "trnsim-corpus")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--instance", default="trn2.48xlarge",
                    help=f"the instance name tests read from {DMI} (empty: the host's own)")
    args = ap.parse_args()
    want = lambda name: not args.only or name in args.only
    keep = lambda name: args.filter in name and not (args.exclude and args.exclude in name)
    pick = lambda fs: sorted(f for f in fs if keep(f.name))
    env = dict(os.environ, PYTHONUNBUFFERED="1", TRNSIM_CORPUS_INSTANCE=args.instance)
    report = {}
    if args.sdk and want("sdk-tests"):
        commit = newest_with(args.sdk, "nki/test")
        root = extract(args.sdk, commit, args.work / "sdk")
        report["sdk-tests"] = {"commit": commit, **run_pytest_files(
            pick((root / "nki" / "test").glob("test_*.py")), root / "nki" / "test", env, args.timeout)}
    if args.sdk and want("sdk-examples"):
        commit = git(args.sdk, "rev-parse", "HEAD").strip()
        root = extract(args.sdk, commit, args.work / "sdk")
        files = [f for f in (root / "nki" / "examples").rglob("*.py")
                 if "jax" not in f.name and "torch" not in f.name]
        report["sdk-examples"] = {"commit": commit, **run_scripts(pick(files), root, env, args.timeout)}
    if args.samples and want("samples-unit"):
        commit = newest_with(args.samples, "src/nki_samples/reference")
        root = extract(args.samples, commit, args.work / "samples")
        uenv = dict(env, PYTHONPATH=str(root / "src"))
        report["samples-unit"] = {"commit": commit, **run_pytest_files(
            pick((root / "test" / "unit").glob("test_*.py")), root / "test" / "unit", uenv, args.timeout,
            ("--simulation-only",))}
    if args.samples and want("samples-tutorials"):
        commit = git(args.samples, "rev-parse", "HEAD").strip()
        root = extract(args.samples, commit, args.work / "samples")
        tutorials = root / "src" / "nki_samples" / "tutorials"
        files = list(tutorials.rglob("*_nki_kernels.py")) + list(tutorials.rglob("mx_toplevel.py"))
        report["samples-tutorials"] = {"commit": commit, **run_scripts(
            pick(files), root, env, args.timeout, [r for r in attention_runs(root) if keep(r[0])])}
    if args.samples and want("samples-contributed"):
        commit = newest_with(args.samples, "contributed")
        root = extract(args.samples, commit, args.work / "samples")
        files = list((root / "contributed").glob("*.py"))
        report["samples-contributed"] = {"commit": commit, **run_scripts(pick(files), root, env, args.timeout)}
    summary = {k: f"{v['passed']} passed, {v['failed']} failed" + (f", {v['xfailed']} xfailed" if v.get("xfailed") else "")
               for k, v in report.items()}
    print(json.dumps({"summary": summary, **report}, indent=1))


if __name__ == "__main__":
    main()
