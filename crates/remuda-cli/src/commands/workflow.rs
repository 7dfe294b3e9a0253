//! `remuda workflow start|status|list|pause|resume|cancel|retry|signal`.

use crate::args::{
    DbArgs, WorkflowCommand, WorkflowCompileArgs, WorkflowListArgs, WorkflowSignalArgs,
    WorkflowStartArgs,
};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use crate::table::{Align, Table};
use remuda::workflow::{WorkflowFilter, WorkflowState, WorkflowStatus};
use serde_json::{json, Value};

pub async fn run(db: &DbArgs, command: WorkflowCommand) -> CliResult<u8> {
    let (id, json, action) = match command {
        WorkflowCommand::Start(args) => return start(db, args).await,
        WorkflowCommand::Compile(args) => return compile(args),
        WorkflowCommand::List(args) => return list(db, args).await,
        WorkflowCommand::Signal(args) => return signal(db, args).await,
        WorkflowCommand::Status(w) => return status(db, w.id, w.json).await,
        WorkflowCommand::Pause(w) => (w.id, w.json, "paused"),
        WorkflowCommand::Resume(w) => (w.id, w.json, "resumed"),
        WorkflowCommand::Cancel(w) => (w.id, w.json, "cancelled"),
        WorkflowCommand::Retry(w) => (w.id, w.json, "retried"),
    };
    let client = connect::client(db).await?;
    let was = match action {
        "paused" => client.pause_workflow(id).await?,
        "resumed" => client.resume_workflow(id).await?,
        "cancelled" => client.cancel_workflow(id).await?,
        _ => client.retry_workflow(id).await?,
    };
    // asking again for what is already so changes nothing and is no error
    let already = matches!(
        (action, was),
        ("paused", WorkflowState::Paused)
            | ("resumed", WorkflowState::Running)
            | ("cancelled", WorkflowState::Cancelled)
    );
    if json {
        print_json(&json!({"id": id, "action": action, "previous_state": was, "already": already}));
    } else if already {
        crate::out!("workflow run {id} was already {action}");
    } else {
        crate::out!("workflow run {id} {action} (it was {was})");
    }
    Ok(0)
}

fn json_arg(flag: &str, text: Option<&str>) -> CliResult<Value> {
    match text {
        None => Ok(Value::Null),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            CliError::Usage(format!(
                "{flag} is not valid JSON ({e}): give a value like '{{\"id\": 7}}'"
            ))
        }),
    }
}

/// Prints the compiled definition of a spec file, or exit 2 with every problem.
fn compile(args: WorkflowCompileArgs) -> CliResult<u8> {
    let spec = crate::spec_file::load(&args.spec).map_err(CliError::Usage)?;
    let compiled =
        remuda::workflow::compile(&spec).map_err(|e| remuda::Error::InvalidWorkflow(e.problems))?;
    print_json(&compiled);
    Ok(0)
}

async fn start(db: &DbArgs, args: WorkflowStartArgs) -> CliResult<u8> {
    let spec = crate::spec_file::load(&args.spec).map_err(CliError::Usage)?;
    let input = json_arg("--args", args.args.as_deref())?;
    // checked before connecting: a bad spec is exit 2 with every problem, database or not
    remuda::workflow::compile(&spec).map_err(|e| remuda::Error::InvalidWorkflow(e.problems))?;
    let trace =
        super::enqueue::trace_context(args.traceparent.as_deref(), args.tracestate.as_deref())?;
    let client = connect::client(db).await?;
    let group = super::enqueue::group(args.group.as_deref());
    let started = remuda::trace::scope(
        trace,
        remuda::group::scope(
            group,
            client.start_workflow_spec(&spec, &input, args.key.as_deref()),
        ),
    )
    .await?;
    let warning = started.warning(args.key.as_deref());
    if let Some(warning) = &warning {
        eprintln!("warning: {warning}");
    }
    if !args.wait {
        if args.json {
            let mut out = json!({"id": started.id, "existed": started.existed});
            if let Some(warning) = warning {
                out["warning"] = warning.into();
            }
            print_json(&out);
        } else {
            crate::out!("{}", started.id);
        }
        return Ok(0);
    }
    let run = client.wait_workflow(started.id, args.wait_timeout).await?;
    if args.json {
        print_json(&status_json(&run));
    } else if run.state == WorkflowState::Completed {
        crate::out!("{}", run.output.clone().unwrap_or(Value::Null));
    } else {
        crate::out!(
            "workflow run {} {}: {}",
            run.id,
            run.state,
            run.error.clone().unwrap_or(Value::Null)
        );
    }
    Ok(if run.state == WorkflowState::Completed {
        0
    } else {
        1
    })
}

/// A run as `status --json` prints it.
fn status_json(run: &WorkflowStatus) -> Value {
    serde_json::to_value(run).unwrap_or_else(|e| json!({"id": run.id, "error": e.to_string()}))
}

async fn status(db: &DbArgs, id: i64, json: bool) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let run = client
        .workflow(id)
        .await?
        .ok_or(remuda::Error::WorkflowNotFound(id))?;
    if json {
        print_json(&status_json(&run));
        return Ok(0);
    }
    crate::out!("workflow run {} ({}): {}", run.id, run.name, run.state);
    crate::out!("  started {}", run.created_at.to_rfc3339());
    if let Some(at) = run.finished_at {
        crate::out!("  ended   {}", at.to_rfc3339());
    }
    if let Some(error) = &run.error {
        crate::out!("  error   {error}");
    }
    if let Some(output) = &run.output {
        crate::out!("  output  {output}");
    }
    let mut table = Table::new(&[
        ("NODE", Align::Left),
        ("STATE", Align::Left),
        ("TYPE", Align::Left),
        ("JOB", Align::Left),
        ("DETAIL", Align::Left),
    ]);
    for (id, node) in run.nodes_in_order() {
        let job = match (&node.children, node.job_id, node.workflow_id) {
            (Some(children), _, _) => {
                let counts: Vec<String> =
                    children.iter().map(|(s, n)| format!("{n} {s}")).collect();
                format!("[{}]", counts.join(", "))
            }
            (None, Some(job), _) => format!("job {job}"),
            (None, None, Some(child)) => format!("run {child}"),
            (None, None, None) => "-".into(),
        };
        let mut detail = Vec::new();
        if let Some(reason) = &node.reason {
            detail.push(format!("({reason})"));
        }
        if let Some(error) = &node.error {
            detail.push(format!(
                "{}: {}",
                error["code"].as_str().unwrap_or(""),
                error["message"].as_str().unwrap_or("")
            ));
        }
        table.row(vec![
            id.clone(),
            node.state.as_str().into(),
            node.node_type.clone(),
            job,
            detail.join(" "),
        ]);
    }
    table.print();
    Ok(0)
}

async fn list(db: &DbArgs, args: WorkflowListArgs) -> CliResult<u8> {
    let state = match &args.state {
        None => None,
        Some(s) => Some(
            s.parse::<WorkflowState>()
                .map_err(|e| CliError::Usage(format!("--state: {e}")))?,
        ),
    };
    let client = connect::client(db).await?;
    let runs = client
        .workflows(&WorkflowFilter {
            state,
            name: args.name.clone(),
            limit: Some(args.limit),
        })
        .await?;
    if args.json {
        print_json(&runs);
        return Ok(0);
    }
    if runs.is_empty() {
        crate::out!("no workflow runs");
        return Ok(0);
    }
    let mut table = Table::new(&[
        ("ID", Align::Right),
        ("NAME", Align::Left),
        ("STATE", Align::Left),
        ("STARTED", Align::Left),
        ("PARENT", Align::Right),
        ("NODES", Align::Left),
    ]);
    for run in &runs {
        let counts: Vec<String> = run.nodes.iter().map(|(s, n)| format!("{n} {s}")).collect();
        table.row(vec![
            run.id.to_string(),
            run.name.clone(),
            run.state.as_str().into(),
            run.created_at.to_rfc3339(),
            run.parent_id.map_or_else(|| "-".into(), |p| p.to_string()),
            counts.join(", "),
        ]);
    }
    table.print();
    Ok(0)
}

async fn signal(db: &DbArgs, args: WorkflowSignalArgs) -> CliResult<u8> {
    let data = json_arg("--data", args.data.as_deref())?;
    let client = connect::client(db).await?;
    let completed = client.signal_workflow(args.id, &args.name, &data).await?;
    if args.json {
        print_json(&json!({"id": args.id, "signal": args.name, "completed": completed}));
    } else {
        crate::out!(
            "workflow run {} got signal {}: {completed} node(s) completed",
            args.id,
            args.name
        );
    }
    Ok(0)
}
