//! `remuda notifications` (list) and `remuda notifications retry ID`.

use crate::args::{DbArgs, NotificationsAction, NotificationsArgs};
use crate::connect;
use crate::error::CliResult;
use crate::output::print_json;
use remuda::notify::{Notification, NotificationFilter};

/// Lists notifications, or retries a dead one.
pub async fn run(db: &DbArgs, args: NotificationsArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    if let Some(NotificationsAction::Retry { id, json }) = args.action {
        client.retry_notification(id).await?;
        if json {
            print_json(&serde_json::json!({"id": id, "state": "pending"}));
        } else {
            crate::out!("notification {id} is due again");
        }
        return Ok(0);
    }
    let filter = NotificationFilter {
        state: args.state,
        job_id: args.job,
        workflow_id: args.workflow,
        limit: Some(args.limit),
    };
    let list = client.notifications(&filter).await?;
    if args.json {
        print_json(&list);
    } else {
        print_list(&list);
    }
    Ok(0)
}

fn print_list(list: &[Notification]) {
    if list.is_empty() {
        crate::out!("no notifications");
        return;
    }
    crate::out!(
        "{:>8}  {:>8}  {:<7}  {:<18}  {:<7}  {:>8}  TARGET",
        "ID",
        "JOB",
        "CHANNEL",
        "EVENT",
        "STATE",
        "ATTEMPTS"
    );
    for n in list {
        let job = n
            .job_id
            .map(|j| j.to_string())
            .or(n.workflow_id.map(|w| format!("wf {w}")))
            .unwrap_or_default();
        crate::out!(
            "{:>8}  {:>8}  {:<7}  {:<18}  {:<7}  {:>8}  {}",
            n.id,
            job,
            n.channel.as_str(),
            n.event,
            n.state.as_str(),
            n.attempts,
            n.target
        );
        if let Some(error) = &n.last_error {
            crate::out!("{:>10}last error: {error}", "");
        }
    }
}
