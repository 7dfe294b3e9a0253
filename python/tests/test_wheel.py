"""The wheel ``scripts/wheel`` builds (the test command builds it first) is one abi3 wheel
under 15 MB that installs into a fresh venv, with no Rust toolchain and no network, and runs
a task there against the database."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys
import remuda

assert "site-packages" in remuda._native.__file__, remuda._native.__file__
app = remuda.App(os.environ["DATABASE_URL"])

@app.task("wheel.double")
def double(x: int) -> int:
    return 2 * x

handle = double.send(21)
app.run_worker(once=True)
print(handle.get(timeout=30).unwrap())
"""


def the_wheel() -> Path:
    wheels = sorted((ROOT / "target" / "wheels").glob("remuda-*.whl"))
    assert len(wheels) == 1, f"scripts/wheel leaves one wheel in target/wheels: {wheels}"
    return wheels[0]


def test_the_wheel_is_one_stripped_abi3_wheel_with_the_typed_package() -> None:
    wheel = the_wheel()
    assert "-cp310-abi3-" in wheel.name, wheel.name
    assert wheel.stat().st_size < 15 * 2**20, f"{wheel.stat().st_size} bytes"
    names = zipfile.ZipFile(wheel).namelist()
    for part in ("remuda/__init__.py", "remuda/py.typed", "remuda/_native.pyi", "remuda/codec.py", "remuda/pytest_plugin.py",
                 "remuda/django/management/commands/remuda_worker.py"):
        assert part in names, names
    assert any(n.startswith("remuda/_native") and n.endswith(".so") for n in names), names


def test_the_wheel_installs_and_runs_a_task_in_a_fresh_venv_without_rust(tmp_path: Path, database_url: str) -> None:
    python = shutil.which("python3") or sys.executable
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    # no cargo, no rustc, no network: only the wheel
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "DATABASE_URL": database_url}
    assert shutil.which("cargo", path=env["PATH"]) is None
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-cache-dir", str(the_wheel())],
        check=True, env=env, cwd=tmp_path,
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "42", done.stdout
