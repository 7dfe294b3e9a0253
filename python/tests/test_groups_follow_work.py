"""A tenant's group follows its work from Python: a task reads its job's group in
``current_job().group``, and what it sends or starts without a group of its own takes it; a
workflow started with ``group=`` runs its node jobs in it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import remuda
from conftest import StartWorker, job_info, wait_state


def run_groups(db: psycopg.Connection[Any], run: int) -> list[Any]:
    rows = db.execute(
        "SELECT w.group_key, j.group_key FROM remuda.workflows w JOIN remuda.jobs j ON j.workflow_id = w.id WHERE w.id = %s",
        (run,),
    ).fetchall()
    return sorted({tuple(r) for r in rows})


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_task_reads_its_group_and_what_it_sends_or_starts_takes_it(
    app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    grouped = app.tasks["fan_group"].send(group="acme")
    ungrouped = app.tasks["fan_group"].send()
    start_worker()
    out = wait_state(grouped, "completed")["result"]["ok"]
    assert out["group"] == "acme"
    assert job_info(remuda.TaskHandle(app, out["child"], False))["group"] == "acme"
    assert job_info(remuda.TaskHandle(app, out["own"], False))["group"] == "other"
    assert run_groups(db, out["run"]) == [("acme", "acme")]
    out = wait_state(ungrouped, "completed")["result"]["ok"]
    assert out["group"] is None
    assert job_info(remuda.TaskHandle(app, out["child"], False))["group"] is None
    assert run_groups(db, out["run"]) == [(None, None)]


def test_a_workflow_started_with_a_group_runs_its_nodes_in_it(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    add = app.tasks["add"]
    handle = app.workflow("grouped_add", [add.node(1, 2)]).start(group="acme")
    assert run_groups(db, handle.id) == [("acme", "acme")]
    try:
        app.workflow("bad_group", [add.node(1, 2)]).start(group="a\nb")
    except remuda.RemudaError as e:
        assert "control character" in e.message, e
    else:
        raise AssertionError("a group with a newline was taken")
