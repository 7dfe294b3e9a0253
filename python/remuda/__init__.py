"""remuda: a durable task queue and workflow engine on PostgreSQL, with Python tasks on its
Rust worker runtime.

.. code-block:: python

    import remuda

    app = remuda.App(database_url="postgres://localhost/app")

    @app.task("resize", queue="media", retry=remuda.RetryPolicy.exponential(base=1.0, max_attempts=5))
    def resize(path: str, width: int) -> str:
        return f"{path} at {width}px"

    handle = resize.send(path="a.jpg", width=640)
    print(handle.get(timeout=30).unwrap())

and ``python -m remuda worker myapp.tasks:app`` runs the worker.
"""

from .app import App
from .context import JobContext, Sleeping, current_job, job
from .errors import InputTypeError, InputValueError, RemudaError
from .sending import SendOptions
from .task import AsyncResultTask, AsyncTask, ResultTask, Sending, SyncTask, Task, TaskHandle
from .result import TaskError, TaskFailed, TaskResult
from .retry import RetryPolicy
from .steps import StepError, StepOptions, step, step_async, step_key, step_with, step_with_async
from .workflow import INPUT, NodeOptions, Workflow, WorkflowHandle, WorkflowNode, TaskNode, signal, sleep

__all__ = [
    "App",
    "AsyncResultTask",
    "AsyncTask",
    "INPUT",
    "InputTypeError",
    "InputValueError",
    "JobContext",
    "NodeOptions",
    "RemudaError",
    "ResultTask",
    "RetryPolicy",
    "SendOptions",
    "Sleeping",
    "StepError",
    "StepOptions",
    "Sending",
    "SyncTask",
    "Task",
    "TaskError",
    "TaskFailed",
    "TaskHandle",
    "TaskNode",
    "TaskResult",
    "Workflow",
    "WorkflowHandle",
    "WorkflowNode",
    "current_job",
    "job",
    "signal",
    "sleep",
    "step",
    "step_async",
    "step_key",
    "step_with",
    "step_with_async",
]
