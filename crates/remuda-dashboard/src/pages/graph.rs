//! A workflow run drawn as a graph, laid out on the server: each node in the column of its
//! longest path from a root, in order within its column, edges from each dependency's right
//! edge to the node's left edge. SVG presentation attributes only (no style attributes: the
//! Content-Security-Policy forbids inline styles).

use super::html::esc;
use remuda::workflow::WorkflowStatus;
use std::collections::BTreeMap;
use std::fmt::Write;

const WIDTH: i64 = 170;
const HEIGHT: i64 = 44;
const GAP_X: i64 = 60;
const GAP_Y: i64 = 20;

/// The fill of a node in `state`.
fn fill(state: &str) -> &'static str {
    match state {
        "completed" => "#dcf1e3",
        "failed" | "cancelled" => "#f8dedc",
        "running" | "waiting" => "#dde8f8",
        "skipped" => "#eceff2",
        _ => "#f5ebd0",
    }
}

/// Each node's column: the length of its longest path from a node without dependencies.
fn columns(run: &WorkflowStatus) -> BTreeMap<&str, i64> {
    let mut column: BTreeMap<&str, i64> = BTreeMap::new();
    // nodes come in topological order from the store, but the map is by name: iterate until
    // nothing moves (a run has at most a few hundred nodes)
    for _ in 0..=run.nodes.len() {
        let mut moved = false;
        for (id, node) in &run.nodes {
            let c = node
                .deps
                .iter()
                .map(|d| column.get(d.as_str()).map_or(0, |c| c + 1))
                .max()
                .unwrap_or(0);
            if column.get(id.as_str()) != Some(&c) {
                column.insert(id, c);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    column
}

/// The run as an SVG; node boxes link to their job (`jobs_href` + id) or sub-run.
pub fn svg(run: &WorkflowStatus, root: &str) -> String {
    let column = columns(run);
    let mut rows: BTreeMap<i64, i64> = BTreeMap::new();
    let mut at: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (id, c) in &column {
        let row = rows.entry(*c).or_insert(0);
        at.insert(id, (c * (WIDTH + GAP_X) + 10, *row * (HEIGHT + GAP_Y) + 10));
        *row += 1;
    }
    let width = (rows.len() as i64) * (WIDTH + GAP_X) + 20;
    let height = rows.values().max().copied().unwrap_or(1) * (HEIGHT + GAP_Y) + 20;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"graph\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"workflow graph\">"
    );
    for (id, node) in &run.nodes {
        let Some(&(x, y)) = at.get(id.as_str()) else {
            continue;
        };
        for dep in &node.deps {
            if let Some(&(dx, dy)) = at.get(dep.as_str()) {
                let (x1, y1, x2, y2) = (dx + WIDTH, dy + HEIGHT / 2, x, y + HEIGHT / 2);
                let mid = (x1 + x2) / 2;
                let _ = write!(
                    out,
                    "<path d=\"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}\" fill=\"none\" stroke=\"#8a96a3\" stroke-width=\"1.5\"/>"
                );
            }
        }
    }
    for (id, node) in &run.nodes {
        let Some(&(x, y)) = at.get(id.as_str()) else {
            continue;
        };
        let state = node.state.as_str();
        let link = match (node.job_id, node.workflow_id) {
            (_, Some(child)) => Some(format!("{root}workflows/{child}")),
            (Some(job), None) => Some(format!("{root}jobs/{job}")),
            _ => None,
        };
        let shape = format!(
            "<g class=\"node\" data-node=\"{id}\" data-state=\"{state}\"><rect x=\"{x}\" y=\"{y}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" rx=\"6\" fill=\"{}\" stroke=\"#5d6875\"/>\
<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"600\" fill=\"#1d232b\">{id}</text>\
<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#5d6875\">{} · {state}</text></g>",
            fill(state),
            x + 8,
            y + 18,
            x + 8,
            y + 34,
            esc(&node.node_type),
            id = esc(id),
        );
        match link {
            Some(href) => {
                let _ = write!(out, "<a href=\"{}\">{shape}</a>", esc(&href));
            }
            None => out += &shape,
        }
    }
    out + "</svg>"
}
