"""Workflows from Python nodes: results passed with args_from, joins, signals, pause,
resume, cancel, retry; run by a Python worker."""

from __future__ import annotations

from typing import Any

import pytest

import remuda
from conftest import StartWorker


def test_args_from_passes_typed_results_into_a_join(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    add, combine = app.tasks["add"], app.tasks["combine"]
    left = add.node(1, 2, node_id="left")
    right = add.node(10, 20, node_id="right")
    total = combine.node(args_from={"x": left, "y": right}, join="all")
    wf = app.workflow("sums", [left, right, total], output=total)
    handle = wf.start()
    assert handle.get(timeout=60) == remuda.TaskResult(ok=33)
    nodes = handle.status()["nodes"]
    assert nodes["left"]["result"] == {"ok": 3}
    assert nodes["combine"]["state"] == "completed"
    again = wf.start(key="sums-1")
    same = wf.start(key="sums-1")
    assert same.id == again.id and same.existed, "one run per key"
    assert not same.input_ignored, "the same input"
    with pytest.warns(RuntimeWarning, match="the input given now was ignored"):
        other = wf.start({"other": 1}, key="sums-1")
    assert other.id == again.id and other.input_ignored


def test_a_typed_call_makes_the_same_node_as_the_untyped_form(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    add = app.tasks["add"]
    first = add.call(1, 2).node(node_id="first", max_attempts=2)
    second = add.call(a=3, b=4).node(waits_for=[first], node_id="second", timeout="30s")
    wf = app.workflow("typed", [first, second], output=second)
    spec = {n["id"]: n for n in wf.compile()["nodes"]}
    untyped = app.workflow("untyped", [add.node(1, 2, node_id="first", max_attempts=2)]).compile()["nodes"][0]
    assert {**spec["first"], "dependents": []} == untyped
    assert spec["second"]["deps"] == ["first"] and spec["second"]["timeout_ms"] == 30_000
    assert wf.start().get(timeout=60) == remuda.TaskResult(ok=7)
    with pytest.raises(TypeError, match="wait_for: not options of a workflow node"):
        misspelt: Any = {"wait_for": [first]}
        add.call(1, 2).node(**misspelt)


def test_the_run_input_a_signal_and_controls(app: remuda.App, start_worker: StartWorker) -> None:
    add = app.tasks["add"]
    first = add.node(args_from={"a": remuda.INPUT}, b=1)
    approval = remuda.signal("approve", waits_for=[first])
    last = add.node(2, 2, waits_for=[approval], node_id="after")
    handle = app.workflow("approved", [first, approval, last], output=last).start(5)
    assert handle.pause() == "running"
    assert handle.resume() == "paused"
    start_worker()
    assert handle.get(timeout=0.5).err_value.code == "WAIT_TIMEOUT", "waits for the signal"
    assert handle.signal("approve", {"by": "ops"}) == 1
    assert handle.get(timeout=60).unwrap() == 4
    status = handle.status()
    assert status["nodes"]["add"]["result"] == {"ok": 6}, "5 + 1: the input reached the node"
    assert status["nodes"]["approve"]["result"] == {"ok": {"by": "ops"}}


def test_a_failed_run_is_retried_and_a_bad_definition_lists_its_problems(app: remuda.App, start_worker: StartWorker) -> None:
    refuse, add = app.tasks["refuse"], app.tasks["add"]
    bad = refuse.node(why="no")
    after = add.node(1, 1, waits_for=[bad])
    handle = app.workflow("fails", [bad, after]).start()
    start_worker()
    result = handle.get(timeout=60)
    assert result.is_err() and result.err_value.code == "REFUSED"
    assert handle.retry() == "failed"
    assert handle.cancel() in ("running", "failed")
    loop = add.node(1, 1, node_id="a", waits_for=["b"])
    other = add.node(1, 1, node_id="b", waits_for=["a"])
    with pytest.raises(remuda.RemudaError) as problems:
        app.workflow("cycle", [loop, other]).start()
    assert problems.value.code == "INVALID_SPEC" and "cycle" in problems.value.message
    assert app.workflow("ok", [add.node(1, 2)]).compile()["nodes"][0]["id"] == "add"


def test_nodes_take_their_tasks_queue(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker("--queues", "async")
    double = app.tasks["double"]
    first = double.node(x=2)
    second = double.node(args_from={"x": remuda.INPUT}, node_id="from_input")
    handle = app.workflow("doubles", [first, second], output=second).start(21)
    assert handle.get(timeout=60).unwrap() == 42, "run by a worker of the task's queue alone"
    with pytest.raises(ValueError, match="more than one node"):
        app.workflow("dupes", [double.node(x=1, node_id="a"), double.node(x=2, node_id="a")]).start()


def test_a_maps_result_reaches_a_task_result_parameter_as_one(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    listing, square, total = app.tasks["listing"], app.tasks["square"], app.tasks["total"]
    numbers = listing.node(n=3)
    squares = square.node(map={"over": numbers, "pointer": "/items"}, node_id="squares")
    summed = total.node(args_from={"values": squares}, node_id="summed")
    handle = app.workflow("summed", [numbers, squares, summed], output=summed).start()
    result = handle.get(timeout=60)
    assert result.is_ok(), (result, handle.status())
    assert result.unwrap() == 1 + 4 + 9, "TaskResult[list[int]] of the elements' values"


def test_a_map_passes_index_only_to_a_task_that_takes_one(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    listing, cube, placed = app.tasks["listing"], app.tasks["cube"], app.tasks["placed"]
    numbers = listing.node(n=3)
    cubes = cube.node(map={"over": numbers, "pointer": "/items"}, node_id="cubes")
    places = placed.node(map={"over": numbers, "pointer": "/items"}, node_id="places")
    handle = app.workflow("mapped", [numbers, cubes, places]).start()
    result = handle.get(timeout=60)
    assert result.is_ok(), (result, handle.status())
    nodes = handle.status()["nodes"]
    assert nodes["cubes"]["state"] == "completed" and nodes["places"]["state"] == "completed", nodes
    assert nodes["cubes"]["result"] == {"ok": [1, 8, 27]}, "item alone: no index passed"
    assert nodes["places"]["result"] == {"ok": [[0, 1], [1, 2], [2, 3]]}, "index passed where taken"


def test_a_map_a_sleep_a_condition_and_a_sub_workflow(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    add, listing, square = app.tasks["add"], app.tasks["listing"], app.tasks["square"]
    numbers = listing.node(n=4)
    squares = square.node(map={"over": numbers, "pointer": "/items"}, node_id="squares")
    pause = remuda.sleep(0.2, waits_for=[squares])
    skipped = add.node(1, 1, node_id="skipped", run_if={"node": numbers, "state": "failed"}, waits_for=[numbers])
    inner_node = add.node(20, 22, node_id="inner_add")
    inner = app.workflow("inner", [inner_node], output=inner_node)
    child = inner.node(node_id="child", waits_for=[pause])
    handle = app.workflow("everything", [numbers, squares, pause, skipped, child], output=squares).start()
    result = handle.get(timeout=60)
    assert result.is_ok(), (result, handle.status())
    assert result.unwrap() == [1, 4, 9, 16], "a map's output lists its elements' values"
    nodes = handle.status()["nodes"]
    assert nodes["skipped"]["state"] == "skipped"
    assert nodes["child"]["state"] == "completed"
