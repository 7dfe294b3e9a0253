//! Workflow spec files: TOML or JSON of the same structure, with sub-workflows named by a
//! path relative to the file that names them, loaded in place.

use remuda::workflow::{SubWorkflow, WorkflowSpec};
use std::path::{Path, PathBuf};

/// Loads the spec at `path` and, recursively, the sub-workflows it names.
pub fn load(path: &Path) -> Result<WorkflowSpec, String> {
    load_within(path, &mut Vec::new())
}

fn load_within(path: &Path, open: &mut Vec<PathBuf>) -> Result<WorkflowSpec, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read workflow spec {}: {e}", path.display()))?;
    let mut spec = parse(path, &text)?;
    let here = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if open.contains(&here) {
        let chain: Vec<String> = open.iter().map(|p| p.display().to_string()).collect();
        return Err(format!(
            "workflow spec {} includes itself: {} → {}",
            path.display(),
            chain.join(" → "),
            here.display()
        ));
    }
    open.push(here);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for (id, node) in &mut spec.nodes.0 {
        if let Some(SubWorkflow::Path(child)) = &node.workflow {
            let child_path = dir.join(child);
            let child = load_within(&child_path, open)
                .map_err(|e| format!("{}: node {id}: {e}", path.display()))?;
            node.workflow = Some(SubWorkflow::Inline(Box::new(child)));
        }
    }
    open.pop();
    Ok(spec)
}

fn parse(path: &Path, text: &str) -> Result<WorkflowSpec, String> {
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if json {
        serde_json::from_str(text)
            .map_err(|e| format!("workflow spec {} is not valid: {e}", path.display()))
    } else {
        toml::from_str(text)
            .map_err(|e| format!("workflow spec {} is not valid: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sub_workflow_is_loaded_from_beside_its_parent_and_a_loop_is_refused() {
        let dir = std::env::temp_dir().join(format!("remuda-spec-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("dir");
        std::fs::write(
            dir.join("parent.toml"),
            "name = \"p\"\n[nodes.c]\nworkflow = \"sub/child.json\"\n",
        )
        .expect("write");
        std::fs::write(
            dir.join("sub/child.json"),
            r#"{"name": "c", "nodes": {"x": {"kind": "k"}}}"#,
        )
        .expect("write");
        let spec = load(&dir.join("parent.toml")).expect("loads");
        match &spec.nodes.0[0].1.workflow {
            Some(SubWorkflow::Inline(child)) => assert_eq!(child.name, "c"),
            other => panic!("not loaded: {other:?}"),
        }
        std::fs::write(
            dir.join("sub/child.json"),
            r#"{"name": "c", "nodes": {"x": {"workflow": "../parent.toml"}}}"#,
        )
        .expect("write");
        let e = load(&dir.join("parent.toml")).expect_err("a loop");
        assert!(e.contains("includes itself"), "{e}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
