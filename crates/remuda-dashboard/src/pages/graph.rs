//! A workflow run drawn as a graph, laid out on the server: each node in the column of its
//! longest path from a root, in the graph's order within its column. Every column shares one
//! grid of rows, so the gaps between columns and the gutters between rows hold no box: an
//! edge to the next column crosses the gap between them, and a longer one runs along the
//! gutter above its node's row, never behind a box it does not join. Edges end in an arrow at
//! the node that waits. SVG presentation attributes only (no style attributes: the
//! Content-Security-Policy forbids inline styles).

use super::html::esc;
use remuda::workflow::WorkflowStatus;
use std::collections::BTreeMap;
use std::fmt::Write;

const WIDTH: i64 = 170;
const HEIGHT: i64 = 44;
const GAP_X: i64 = 60;
const GAP_Y: i64 = 20;
/// Room around the boxes: the gutter above the first row holds edges too.
const MARGIN: i64 = 10 + GAP_Y;

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
/// The nodes come in the graph's order (dependencies first), so one pass settles them.
fn columns(run: &WorkflowStatus) -> Vec<(&str, i64)> {
    let mut column: BTreeMap<&str, i64> = BTreeMap::new();
    let mut placed = Vec::new();
    for (id, node) in run.nodes_in_order() {
        let c = node
            .deps
            .iter()
            .map(|d| column.get(d.as_str()).map_or(0, |c| c + 1))
            .max()
            .unwrap_or(0);
        column.insert(id, c);
        placed.push((id.as_str(), c));
    }
    placed
}

/// The path of the edge from the box at `from` to the box at `to` (top-left corners).
fn edge(from: (i64, i64), to: (i64, i64)) -> String {
    let (x1, y1) = (from.0 + WIDTH, from.1 + HEIGHT / 2);
    let (x2, y2) = (to.0, to.1 + HEIGHT / 2);
    if x2 - x1 <= GAP_X {
        // the next column: only the gap between them lies on the way
        let mid = (x1 + x2) / 2;
        return format!("M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}");
    }
    // out into the gap after the source's column, up or down to the gutter above the
    // target's row, along it to the gap before the target's column, then in
    let (gap1, gap2) = (x1 + GAP_X / 2, x2 - GAP_X / 2);
    let gutter = to.1 - GAP_Y / 2;
    format!("M{x1},{y1} H{gap1} V{gutter} H{gap2} V{y2} H{x2}")
}

/// The run as an SVG; node boxes link to their job (`jobs_href` + id) or sub-run.
pub fn svg(run: &WorkflowStatus, root: &str) -> String {
    let mut rows: BTreeMap<i64, i64> = BTreeMap::new();
    let mut at: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (id, c) in columns(run) {
        let row = rows.entry(c).or_insert(0);
        at.insert(
            id,
            (c * (WIDTH + GAP_X) + 10, *row * (HEIGHT + GAP_Y) + MARGIN),
        );
        *row += 1;
    }
    let width = (rows.len() as i64) * (WIDTH + GAP_X) + 20;
    let height = rows.values().max().copied().unwrap_or(1) * (HEIGHT + GAP_Y) + 2 * MARGIN;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"graph\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"workflow graph\">\
<defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#8a96a3\"/></marker></defs>"
    );
    for (id, node) in &run.nodes {
        let Some(&(x, y)) = at.get(id.as_str()) else {
            continue;
        };
        for dep in &node.deps {
            if let Some(&from) = at.get(dep.as_str()) {
                let _ = write!(
                    out,
                    "<path class=\"edge\" data-from=\"{}\" data-to=\"{}\" d=\"{}\" fill=\"none\" stroke=\"#8a96a3\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>",
                    esc(dep),
                    esc(id),
                    edge(from, (x, y))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The points a path passes through (its straight segments' ends).
    fn points(path: &str) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = Vec::new();
        let mut at = (0, 0);
        for part in path.split(' ') {
            let (cmd, rest) = part.split_at(1);
            match cmd {
                "M" => {
                    let (x, y) = rest.split_once(',').expect("x,y");
                    at = (x.parse().expect("x"), y.parse().expect("y"));
                }
                "H" => at.0 = rest.parse().expect("x"),
                "V" => at.1 = rest.parse().expect("y"),
                _ => panic!("a long edge is straight segments: {path}"),
            }
            out.push(at);
        }
        out
    }

    #[test]
    fn an_edge_past_a_column_runs_around_its_boxes() {
        // a -> c across column 1, whose row 0 holds b (a -> b -> c and a -> c)
        let box_at = |c: i64, r: i64| (c * (WIDTH + GAP_X) + 10, r * (HEIGHT + GAP_Y) + MARGIN);
        let path = edge(box_at(0, 0), box_at(2, 0));
        let pts = points(&path);
        let (bx, by) = box_at(1, 0);
        for pair in pts.windows(2) {
            let ((x1, y1), (x2, y2)) = (pair[0], pair[1]);
            let (lo_x, hi_x) = (x1.min(x2), x1.max(x2));
            let (lo_y, hi_y) = (y1.min(y2), y1.max(y2));
            let crosses = lo_x < bx + WIDTH && hi_x > bx && lo_y < by + HEIGHT && hi_y > by;
            assert!(
                !crosses,
                "segment {pair:?} of {path} crosses the box at {:?}",
                (bx, by)
            );
        }
        assert_eq!(
            pts.last(),
            Some(&(box_at(2, 0).0, box_at(2, 0).1 + HEIGHT / 2))
        );
    }
}
