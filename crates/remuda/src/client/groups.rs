//! The groups of a fair queue (`fairness = group`): their weights, and how their starts are
//! shared. The claim keeps each group's virtual time in `remuda.queue_groups`
//! (`sql/jobs/claim_limited.sql`); here are the weights an operator sets and what they read.

use super::Client;
use crate::names::check_name;
use crate::{sql, Error, Result};

/// Heaviest weight a group may have.
pub const MAX_WEIGHT: f64 = 1000.0;

/// Lightest weight a group may have: weights are relative, and 1 000 000 to 1 is the widest
/// gap (each start moves a group's virtual time by 1 / weight: a weight near zero would move
/// it past what the other groups' steps can still be told apart from).
pub const MIN_WEIGHT: f64 = 0.001;

/// One group of a queue, as `remuda queue groups` shows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GroupShare {
    /// The group's name; `None` for the jobs without a group.
    pub group: Option<String>,
    /// Its weight (default 1).
    pub weight: f64,
    /// Its jobs running now.
    pub running: i64,
    /// Its jobs waiting to start (available).
    pub waiting: i64,
    /// Its jobs started over the last minute, estimated: the claims of a fair queue count
    /// each minute's starts, and this is the current minute's count plus the previous
    /// minute's in proportion to the part of it still within the last 60 s (as a sliding
    /// window rate limiter estimates; off by up to a fifth when the starts were uneven).
    pub starts_last_minute: i64,
    /// Its part of all the queue's starts over the last minute (0 to 1).
    pub share: f64,
    /// The part its weight entitles it to among the groups with jobs waiting (0 when it has
    /// none waiting): what `share` tends to under backlog.
    pub fair_share: f64,
}

impl Client {
    /// Sets the weight of `group` in `queue` (`None`: the jobs without a group). Weights are
    /// relative: a group of weight 3 starts three jobs for each one of a group of weight 1
    /// while both have jobs waiting. Takes effect from the group's next start, in a queue
    /// with fair share on ([`crate::Fairness::Group`]).
    pub async fn set_group_weight(
        &self,
        queue: &str,
        group: Option<&str>,
        weight: f64,
    ) -> Result<GroupShare> {
        check_name("queue", queue)?;
        if let Some(name) = group {
            crate::names::check_group(name, super::MAX_UNIQUE_KEY).map_err(Error::InvalidInput)?;
        }
        if !(weight.is_finite() && (MIN_WEIGHT..=MAX_WEIGHT).contains(&weight)) {
            return Err(Error::InvalidInput(format!(
                "a weight is a number from {MIN_WEIGHT} to {MAX_WEIGHT} (relative to the other groups' weights), not {weight}"
            )));
        }
        let mut conn = self.database().conn().await?;
        let tx = conn.transaction().await?;
        let name = group.unwrap_or("");
        // under the claims' lock of the queue, taken first as a claim takes it: a claim locks
        // the group's jobs and then its row, this the row and then the jobs
        tx.query(sql::CLAIM_LOCK, &[&queue]).await?;
        tx.execute(sql::GROUP_WEIGHT, &[&queue, &name, &weight])
            .await?;
        // its backlog spaced by the new weight: the weight counts from its next start
        tx.execute(sql::GROUP_RETAG, &[&queue, &name, &weight])
            .await?;
        tx.commit().await?;
        let groups = self.queue_groups(queue).await?;
        Ok(groups
            .into_iter()
            .find(|g| g.group.as_deref() == group)
            .unwrap_or(GroupShare {
                group: group.map(str::to_string),
                weight,
                running: 0,
                waiting: 0,
                starts_last_minute: 0,
                share: 0.0,
                fair_share: 0.0,
            }))
    }

    /// The groups of `queue`: those with a weight set, jobs waiting or running, or recent
    /// starts, by name (the jobs without a group first).
    pub async fn queue_groups(&self, queue: &str) -> Result<Vec<GroupShare>> {
        check_name("queue", queue)?;
        let conn = self.database().conn().await?;
        let rows = conn.query(sql::QUEUE_GROUPS, &[&queue]).await?;
        let mut groups = rows
            .iter()
            .map(|row| {
                let name: String = row.try_get("name")?;
                Ok(GroupShare {
                    group: (!name.is_empty()).then_some(name),
                    weight: row.try_get("weight")?,
                    running: row.try_get("running")?,
                    waiting: row.try_get("waiting")?,
                    starts_last_minute: row.try_get("starts_last_minute")?,
                    share: 0.0,
                    fair_share: 0.0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let starts: i64 = groups.iter().map(|g| g.starts_last_minute).sum();
        let backlogged: f64 = groups
            .iter()
            .filter(|g| g.waiting > 0)
            .map(|g| g.weight)
            .sum();
        for g in &mut groups {
            if starts > 0 {
                g.share = g.starts_last_minute as f64 / starts as f64;
            }
            if g.waiting > 0 && backlogged > 0.0 {
                g.fair_share = g.weight / backlogged;
            }
        }
        Ok(groups)
    }
}
