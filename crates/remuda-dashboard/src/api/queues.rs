//! `/api/v1/queues`: counts and settings, pause, resume, limits and fair share, and the groups
//! of a fair queue with their weights.

use super::{optional, parse_field};
use crate::actions::{self, QueueAction};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::State;
use axum::extract::State as S;
use axum::{Extension, Json};
use remuda::{Fairness, QueueChange, RatePer};
use serde::Deserialize;
use serde_json::{json, Value};

/// `GET /api/v1/queues`: as `remuda queues --json` (counted at most a second ago, see
/// [`counts`](crate::counts)).
pub async fn list(S(state): S<State>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(*state.counts.get(&state.client).await?)))
}

/// `GET /api/v1/queues/{name}`: the queue's settings, as `remuda queue show --json`.
pub async fn get(S(state): S<State>, ApiPath(name): ApiPath<String>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.client.queue(&name).await?)))
}

/// `POST /api/v1/queues/{name}/pause`.
pub async fn pause(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let settings = actions::queue(&state, &who, &name, QueueAction::Pause).await?;
    Ok(Json(json!(settings)))
}

/// `POST /api/v1/queues/{name}/resume`.
pub async fn resume(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let settings = actions::queue(&state, &who, &name, QueueAction::Resume).await?;
    Ok(Json(json!(settings)))
}

/// The body of `PATCH /api/v1/queues/{name}`: each limit given is set, `null` lifts it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default, deserialize_with = "present")]
    max_running: Option<Option<i32>>,
    #[serde(default, deserialize_with = "present")]
    key_limit: Option<Option<i32>>,
    /// `N/PERIOD`, as `100/1s`.
    #[serde(default, deserialize_with = "present")]
    rate: Option<Option<String>>,
    /// `queue`, `kind` or `key`.
    rate_per: Option<String>,
    /// Most starts at once under the rate given with it (default: its N).
    rate_burst: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    max_depth: Option<Option<i32>>,
    /// `group` (fair share between the jobs' groups) or `none`.
    fairness: Option<String>,
}

/// A field given as `null` is `Some(None)` (lift the limit); a field left out is `None`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl Limits {
    /// Limits as the pages' form gives them (each `Some(None)` lifts that limit).
    pub fn new(
        max_running: Option<Option<i32>>,
        key_limit: Option<Option<i32>>,
        rate: Option<Option<String>>,
        rate_per: Option<String>,
        rate_burst: Option<i32>,
        max_depth: Option<Option<i32>>,
        fairness: Option<String>,
    ) -> Limits {
        Limits {
            max_running,
            key_limit,
            rate,
            rate_per,
            rate_burst,
            max_depth,
            fairness,
        }
    }

    /// The library's change, every value checked.
    pub fn to_change(&self) -> ApiResult<QueueChange> {
        let rate = match &self.rate {
            None => None,
            Some(None) => Some(None),
            Some(Some(text)) => Some(Some(parse_rate(text)?)),
        };
        let rate_per = optional(&self.rate_per)
            .map(|text| parse_field::<RatePer>("rate_per", text))
            .transpose()?;
        let fairness = optional(&self.fairness)
            .map(|text| parse_field::<Fairness>("fairness", text))
            .transpose()?;
        Ok(QueueChange {
            max_running: self.max_running,
            key_limit: self.key_limit,
            rate,
            rate_per,
            rate_burst: self.rate_burst,
            max_depth: self.max_depth,
            fairness,
            ..Default::default()
        })
    }
}

/// `N/PERIOD`, as `100/1s`.
fn parse_rate(text: &str) -> ApiResult<(i32, std::time::Duration)> {
    let bad = || ApiError::invalid(format!("rate: {text:?} is not N/PERIOD, as 100/1s"));
    let (n, period) = text.split_once('/').ok_or_else(bad)?;
    let n: i32 = n.trim().parse().map_err(|_| bad())?;
    let period = remuda::duration::parse(period.trim()).map_err(|_| bad())?;
    Ok((n, period))
}

/// `PATCH /api/v1/queues/{name}`: change its limits; answers its settings.
pub async fn change(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(name): ApiPath<String>,
    ApiJson(limits): ApiJson<Limits>,
) -> ApiResult<Json<Value>> {
    let change = QueueAction::Limits(limits.to_change()?);
    let settings = actions::queue(&state, &who, &name, change).await?;
    Ok(Json(json!(settings)))
}

/// `GET /api/v1/queues/{name}/groups`: the queue's groups, as `remuda queue groups --json`
/// (the jobs without a group as `"group": null`).
pub async fn groups(S(state): S<State>, ApiPath(name): ApiPath<String>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.client.queue_groups(&name).await?)))
}

/// The body of `PUT /api/v1/queues/{name}/groups/{group}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupWeight {
    weight: f64,
}

/// `PUT /api/v1/queues/{name}/groups/{group}`: sets the group's weight; answers the group, as
/// `remuda queue group --json`.
pub async fn group_weight(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath((name, group)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<GroupWeight>,
) -> ApiResult<Json<Value>> {
    let group = actions::group_weight(&state, &who, &name, &group, body.weight).await?;
    Ok(Json(json!(group)))
}
