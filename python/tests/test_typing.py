"""Tasks are typed as their functions: mypy --strict and pyright --strict accept a correct
use and report each wrong one (an argument the task does not take, of the wrong type, a
result read as another type, a bad send option, a missing argument) on its own line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

USE = '''
from __future__ import annotations

import remuda

app = remuda.App("postgres://localhost/app")


@app.task("charge")
def charge(order_id: str, cents: int) -> dict[str, int]:
    return {"cents": cents}


@app.task("notify")
async def notify(order_id: str) -> int:
    return 1


@app.task("refund")
def refund(order_id: str) -> remuda.TaskResult[int]:
    return remuda.TaskResult(ok=1)


@app.task("arefund")
async def arefund(order_id: str) -> remuda.TaskResult[int]:
    return remuda.TaskResult(ok=1)


handle: remuda.TaskHandle[dict[str, int]] = charge.send(order_id="x", cents=5)
got: remuda.TaskResult[dict[str, int]] = handle.get(timeout=1)
count: int = notify.send(order_id="y").get().unwrap()
later: remuda.TaskHandle[dict[str, int]] = charge.options(delay=5, unique_key="x").send("x", 1)
direct: dict[str, int] = charge("x", 1)
refunded: int = refund.send("x").get().unwrap()
arefunded: int = arefund.send("x").get().unwrap()
called: remuda.TaskResult[int] = refund("x")
node = charge.node(order_id="x", cents=1)
each: remuda.WorkflowNode[list[dict[str, int]]] = charge.node(map={"over": node}, order_id="x")
typed: remuda.WorkflowNode[dict[str, int]] = charge.call(order_id="x", cents=2).node(waits_for=[node], node_id="typed", join="any")
flow = app.workflow("checkout", [node, each, typed], output=node)
output: remuda.TaskResult[dict[str, int]] = flow.start().get()


many: int = charge.send_many([charge.call(order_id="a", cents=1), charge.call("b", 2)])
attempt: int = remuda.job().attempt


def quoted() -> dict[str, int]:
    return remuda.step_with("charge", remuda.StepOptions(retries=2), charge, "x", 1)


async def waits() -> int:
    return (await notify.send(order_id="z").get_async()).unwrap()


charge.send(order_id="x", bogus=1)  # WRONG
charge.send(order_id=1, cents=2)  # WRONG
wrong: str = handle.get().unwrap()  # WRONG
charge.options(delay="soon")  # WRONG
notify.send()  # WRONG
charge.send_many([charge.call(order_id="a", cents="one")])  # WRONG
charge.call(order_id="a", cents=1).node(join="most")  # WRONG
charge.call(order_id="a", cents=1).node(wait_for=[node])  # WRONG
'''


def wrong_lines() -> set[int]:
    return {n for n, line in enumerate(USE.splitlines(), 1) if line.endswith("# WRONG")}


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is not installed beside {sys.executable}: run the tests through scripts/test"
    return str(path)


def test_mypy_strict_accepts_the_typed_use_and_reports_each_wrong_line(tmp_path: Path) -> None:
    source = tmp_path / "use.py"
    source.write_text(USE)
    done = subprocess.run(
        [tool("mypy"), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(source)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    lines = {int(m.group(1)) for e in errors if (m := re.match(r".*use\.py:(\d+):", e))}
    assert lines == wrong_lines(), done.stdout


def test_pyright_strict_accepts_the_typed_use_and_reports_each_wrong_line(tmp_path: Path) -> None:
    source = tmp_path / "use.py"
    source.write_text(USE)
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.10"}))
    done = subprocess.run(
        [tool("pyright"), "--outputjson", "--pythonpath", sys.executable, str(source)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    report = json.loads(done.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    lines = {d["range"]["start"]["line"] + 1 for d in errors}
    assert lines == wrong_lines(), json.dumps(errors, indent=1)
