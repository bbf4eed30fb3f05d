"""Packaging checks that need a fresh virtual environment and the package index (minutes each).

    python tests/project/packaging_checks.py oldest [--python python3.11] [--constraints FILE]
    python tests/project/packaging_checks.py sdist  [--python python3.11]

``oldest``: a fresh venv, the pins of the constraints file (default: oldest-constraints.txt beside this
file) installed exactly (the oldest versions the package declares it supports), the project installed
from this checkout under those pins, then the README's commands (``example``, ``rewrite``, ``check``) and
a short ``check --fuzz 50`` in an empty folder.

``sdist``: ``python -m build`` into a temp folder; the sdist unpacked elsewhere, installed with the
``test`` extra into a fresh venv, and ``python -m pytest -q`` run from the unpacked folder; the wheel
installed into a second fresh venv and the README's commands run in a new folder.

Both exit non-zero at the first failing step, after printing its output. tests/project/test_packaging.py runs
them under pytest when GATHERMULTIAXIS_PACKAGING_TESTS=1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLDEST_CONSTRAINTS = Path(__file__).resolve().parent / "oldest-constraints.txt"
ENABLE_VARIABLE = "GATHERMULTIAXIS_PACKAGING_TESTS"
STEP_TIMEOUT_S = 1800  # one install, build or test run; a hang fails the check instead of blocking it
README_COMMANDS = [
    ["gathermultiaxis", "example", "example.onnx", "--force"],
    ["gathermultiaxis", "rewrite", "example.onnx", "-o", "example.rewritten.onnx", "--force"],
    ["gathermultiaxis", "check"],
]
SHORT_FUZZ = ["gathermultiaxis", "check", "--fuzz", "50"]


class StepFailed(Exception):
    pass


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, tail: int = 3) -> str:
    """Run one step, print it with its duration and the last ``tail`` lines of its output."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{' '.join(command[:3])} did not finish within {STEP_TIMEOUT_S} s") from None
    output = done.stdout + done.stderr
    print(f"$ {' '.join(command)}   [{time.monotonic() - start:.1f} s, exit {done.returncode}]", flush=True)
    if done.returncode != 0:
        print(output[-6000:], flush=True)
        raise StepFailed(f"{command[0]} {' '.join(command[1:3])} exited {done.returncode}")
    for line in done.stdout.strip().splitlines()[-tail:] if tail else []:
        print(f"    {line}")
    return done.stdout


def fresh_venv(folder: Path, python: str) -> tuple[Path, dict[str, str]]:
    """A new venv with an up-to-date pip; returns its python and an environment with its bin first."""
    run([python, "-m", "venv", str(folder)], cwd=folder.parent)
    bin_dir = folder / "bin"
    # Not ENABLE_VARIABLE: the sdist's own test run must not start these checks again inside itself.
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", ENABLE_VARIABLE)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(folder)
    py = bin_dir / "python"
    run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], cwd=folder.parent, env=env)
    return py, env


def installed_versions(py: Path, env: dict[str, str], packages: list[str]) -> dict[str, str]:
    code = ("import sys, importlib.metadata as m; print(sys.version.split()[0]); "
            f"[print(m.version(p)) for p in {packages!r}]")
    lines = subprocess.run([str(py), "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    return dict(zip(["python", *packages], lines))


def read_pins(constraints: Path) -> dict[str, str]:
    pins = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def run_readme_commands(env: dict[str, str], folder: Path, fuzz: bool) -> None:
    for command in README_COMMANDS + ([SHORT_FUZZ] if fuzz else []):
        run(command, cwd=folder, env=env)


def check_oldest(python: str, constraints: Path) -> None:
    pins = read_pins(constraints)
    with tempfile.TemporaryDirectory(prefix="gma-oldest-") as tmp:
        tmp = Path(tmp)
        py, env = fresh_venv(tmp / "venv", python)
        # The pins themselves first (exact versions, with their own dependencies), then the project
        # under them as constraints, so pip can neither upgrade nor downgrade any of them.
        run([str(py), "-m", "pip", "install", "-q", "-r", str(constraints)], cwd=tmp, env=env)
        run([str(py), "-m", "pip", "install", "-q", "-c", str(constraints), str(ROOT)], cwd=tmp, env=env)
        versions = installed_versions(py, env, sorted(pins))
        print("installed: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
        wrong = {k: (v, pins[k]) for k, v in versions.items() if k in pins and v != pins[k]}
        if wrong:
            raise StepFailed(f"installed versions differ from the pins: {wrong}")
        work = tmp / "work"
        work.mkdir()
        run_readme_commands(env, work, fuzz=True)


def check_sdist(python: str) -> None:
    with tempfile.TemporaryDirectory(prefix="gma-sdist-") as tmp:
        tmp = Path(tmp)
        build_py, build_env = fresh_venv(tmp / "build-venv", python)
        run([str(build_py), "-m", "pip", "install", "-q", "build"], cwd=tmp, env=build_env)
        dist = tmp / "dist"
        run([str(build_py), "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=tmp, env=build_env, tail=2)
        (sdist,) = dist.glob("*.tar.gz")
        (wheel,) = dist.glob("*.whl")
        unpacked = tmp / "unpacked"
        with tarfile.open(sdist) as archive:
            # The "data" filter (Python >= 3.11.4) refuses links and paths out of the folder.
            archive.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        (source,) = unpacked.iterdir()
        print(f"sdist {sdist.name}: {sum(1 for p in source.rglob('*') if p.is_file())} files; wheel {wheel.name}")

        py, env = fresh_venv(tmp / "sdist-venv", python)
        run([str(py), "-m", "pip", "install", "-q", f"{source}[test]"], cwd=tmp, env=env)
        # From the unpacked folder, as a user would; pytest must import the installed package.
        run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=source, env=env, tail=4)

        py, env = fresh_venv(tmp / "wheel-venv", python)
        run([str(py), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp, env=env)
        newcomer = tmp / "newcomer"
        newcomer.mkdir()
        run_readme_commands(env, newcomer, fuzz=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["oldest", "sdist"])
    parser.add_argument("--python", default=sys.executable, help="interpreter for the fresh venvs")
    parser.add_argument("--constraints", type=Path, default=OLDEST_CONSTRAINTS,
                        help="exact pins for 'oldest' (default tests/project/oldest-constraints.txt)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        check_oldest(args.python, args.constraints) if args.what == "oldest" else check_sdist(args.python)
    except StepFailed as error:
        print(f"FAILED after {time.monotonic() - start:.0f} s: {error}")
        return 1
    print(f"OK: {args.what} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
