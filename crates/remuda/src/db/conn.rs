//! A pooled connection and how its statements reach the server.
//!
//! Directly connected, a statement is prepared once per connection (a named prepared
//! statement, cached) and then only bound and executed: one round trip, planned once.
//!
//! Behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`, most cloud
//! poolers), consecutive statements of one connection may reach different server
//! connections, so nothing may outlive a transaction: no named prepared statement (before
//! PgBouncer 1.21 they are not carried over, and a name left behind on a server connection
//! collides with the next client's), no session setting, no session-level advisory lock. There
//! each statement is sent unnamed with its parameter types (Parse, Bind, Execute and Sync in
//! one round trip, `query_typed`); the types of each statement are learnt once per process by
//! preparing it and deallocating it again in one message (see [`learning`]).

use deadpool_postgres::GenericClient;
use deadpool_postgres::Object;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

/// How connections reach PostgreSQL: directly, or through a pooler that hands out a server
/// connection per transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooler {
    /// Directly (or through a pooler in session mode): prepared statements and session
    /// settings are kept.
    #[default]
    None,
    /// Through a pooler in transaction mode: no state outlives a transaction.
    Transaction,
}

impl std::str::FromStr for Pooler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" | "session" => Ok(Pooler::None),
            "transaction" => Ok(Pooler::Transaction),
            other => Err(format!(
                "invalid pooler {other:?}: use transaction (PgBouncer's pool_mode = transaction) or none"
            )),
        }
    }
}

/// The parameter types of each statement sent unnamed, learnt once per process.
#[derive(Default)]
pub(crate) struct Types(Mutex<HashMap<String, Arc<[Type]>>>);

impl Types {
    fn get(&self, sql: &str) -> Option<Arc<[Type]>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
            .cloned()
    }

    fn put(&self, sql: &str, types: Arc<[Type]>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sql.to_string(), types);
    }
}

/// A connection from a [`super::Database`]'s pool. It dereferences to the pool's object (so
/// every driver method is there), and its own `query`, `query_one`, `query_opt` and `execute`
/// take SQL text and send it the way the pool's [`Pooler`] allows.
pub struct Conn {
    object: Object,
    unnamed: Option<Arc<Types>>,
}

/// The parameters of a statement.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The statement methods of [`Conn`] and [`Tx`]: the same text for both, over the driver's
/// client or transaction (`$inner`), which have the same inherent methods.
macro_rules! statements {
    ($inner:ident, $own_transaction:expr) => {
        /// The parameter types of `sql` (behind a pooler), known or learnt now.
        async fn types_of(&self, types: &Types, sql: &str) -> Result<Arc<[Type]>, Error> {
            if let Some(known) = types.get(sql) {
                return Ok(known);
            }
            let script = learning(sql, $own_transaction);
            Ok(learnt(types, sql, self.$inner.simple_query(&script).await?))
        }

        /// Runs `sql` and returns its rows.
        pub async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error> {
            match &self.unnamed {
                None => {
                    let statement = self.$inner.prepare_cached(sql).await?;
                    self.$inner.query(&statement, params).await
                }
                Some(types) => {
                    let types = self.types_of(types, sql).await?;
                    let params = typed(params, &types);
                    planned(
                        &self.$inner,
                        $own_transaction,
                        self.$inner.query_typed(sql, &params),
                    )
                    .await
                }
            }
        }

        /// Runs `sql`, which returns exactly one row.
        pub async fn query_one(&self, sql: &str, params: Params<'_>) -> Result<Row, Error> {
            match &self.unnamed {
                None => {
                    let statement = self.$inner.prepare_cached(sql).await?;
                    self.$inner.query_one(&statement, params).await
                }
                Some(types) => {
                    let types = self.types_of(types, sql).await?;
                    let params = typed(params, &types);
                    planned(
                        &self.$inner,
                        $own_transaction,
                        self.$inner.query_typed_one(sql, &params),
                    )
                    .await
                }
            }
        }

        /// Runs `sql`, which returns at most one row.
        pub async fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>, Error> {
            match &self.unnamed {
                None => {
                    let statement = self.$inner.prepare_cached(sql).await?;
                    self.$inner.query_opt(&statement, params).await
                }
                Some(types) => {
                    let types = self.types_of(types, sql).await?;
                    let params = typed(params, &types);
                    planned(
                        &self.$inner,
                        $own_transaction,
                        self.$inner.query_typed_opt(sql, &params),
                    )
                    .await
                }
            }
        }

        /// Runs `sql`; returns how many rows it changed.
        pub async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, Error> {
            match &self.unnamed {
                None => {
                    let statement = self.$inner.prepare_cached(sql).await?;
                    self.$inner.execute(&statement, params).await
                }
                Some(types) => {
                    let types = self.types_of(types, sql).await?;
                    let run = async {
                        affected(
                            self.$inner
                                .query_typed_raw(sql, typed(params, &types))
                                .await?,
                        )
                        .await
                    };
                    planned(&self.$inner, $own_transaction, run).await
                }
            }
        }
    };
}

impl Conn {
    pub(crate) fn new(object: Object, unnamed: Option<Arc<Types>>) -> Conn {
        Conn { object, unnamed }
    }

    statements!(object, true);

    /// Starts a transaction whose statements are sent as this connection's are (behind a
    /// pooler, with remuda's planner settings for the transaction: see [`planned`]).
    pub async fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        let unnamed = self.unnamed.clone();
        let inner = self.object.transaction().await?;
        if unnamed.is_some() {
            inner.batch_execute(super::LOCAL_SETTINGS).await?;
        }
        Ok(Tx { inner, unnamed })
    }

    /// Closes the connection instead of giving it back to the pool (a session that may
    /// still hold a lock or a transaction).
    pub fn close(self) {
        drop(Object::take(self.object));
    }

    /// Whether statements are sent unnamed (behind a transaction-mode pooler).
    pub fn pooled(&self) -> bool {
        self.unnamed.is_some()
    }

    /// Runs `sql` under planner settings of its own (`plan`, `SET LOCAL` statements: see
    /// [`Pinned`]) and returns its rows.
    pub(crate) async fn query_pinned(
        &self,
        sql: Pinned,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        match &self.unnamed {
            None => {
                let statement = self.object.prepare_cached(sql.text).await?;
                pinned(
                    &self.object,
                    false,
                    sql.plan,
                    self.object.query(&statement, params),
                )
                .await
            }
            Some(types) => {
                let types = self.types_of(types, sql.text).await?;
                let params = typed(params, &types);
                pinned(
                    &self.object,
                    true,
                    sql.plan,
                    self.object.query_typed(sql.text, &params),
                )
                .await
            }
        }
    }

    /// Runs `sql` under planner settings of its own (see [`Conn::query_pinned`]); returns how
    /// many rows it changed.
    pub(crate) async fn execute_pinned(
        &self,
        sql: Pinned,
        params: Params<'_>,
    ) -> Result<u64, Error> {
        match &self.unnamed {
            None => {
                let statement = self.object.prepare_cached(sql.text).await?;
                pinned(
                    &self.object,
                    false,
                    sql.plan,
                    self.object.execute(&statement, params),
                )
                .await
            }
            Some(types) => {
                let types = self.types_of(types, sql.text).await?;
                let run = async {
                    affected(
                        self.object
                            .query_typed_raw(sql.text, typed(params, &types))
                            .await?,
                    )
                    .await
                };
                pinned(&self.object, true, sql.plan, run).await
            }
        }
    }
}

/// A hot statement and the planner settings it is always planned under (`plan`: `SET LOCAL`
/// statements), so that its plan does not depend on the job table's statistics or size. A
/// connection plans a statement once and keeps the plan (a generic plan, see
/// [`super::SESSION_OPTIONS`]) until the table is analysed again: planned while the table was
/// empty or small, as when a worker starts before the jobs come, the claim and the completions
/// became sequential scans of the whole table, repeated for every batch as the table grew (a
/// 100 000-job drain by a worker started before its jobs came: 10 300 jobs/s, against 27 600
/// with the jobs there first; 45 000 with the settings). The settings leave each statement one
/// way to its rows (see the statement's file).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pinned {
    /// The statement.
    pub(crate) text: &'static str,
    /// `SET LOCAL` statements for the transaction it runs in.
    pub(crate) plan: &'static str,
}

/// Runs a [`Pinned`] statement's `run` in a transaction of its own that first takes its
/// planner settings, and behind a pooler remuda's session settings too (`pooled`: a pooled
/// server connection has none of its own, see [`planned`]).
async fn pinned<C: GenericClient, T>(
    client: &C,
    pooled: bool,
    plan: &str,
    run: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match pooled {
        true => in_transaction(client, &format!("{}; {plan}", super::LOCAL_SETTINGS), run).await,
        false => in_transaction(client, plan, run).await,
    }
}

/// Runs `statement` in a transaction of its own whose first statements are `settings`
/// (`SET LOCAL` statements): BEGIN with the settings, the statement and COMMIT are sent
/// together, pipelined, one round trip. Each is sent when first polled, in this order
/// (`biased`), so all three reach the server even if the caller stops waiting: the
/// connection never goes back to the pool inside the transaction.
async fn in_transaction<C: GenericClient, T>(
    client: &C,
    settings: &str,
    statement: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let begin = format!("BEGIN; {settings}");
    let (begun, done, committed) = tokio::join!(
        biased;
        client.batch_execute(&begin),
        statement,
        client.batch_execute("COMMIT")
    );
    begun?;
    let done = done?;
    committed?;
    Ok(done)
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("pooled", &self.pooled())
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for Conn {
    type Target = Object;
    fn deref(&self) -> &Object {
        &self.object
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Object {
        &mut self.object
    }
}

/// A transaction on a [`Conn`]; like it, it dereferences to the driver's transaction and sends
/// its statements the way the pool allows. Dropped without [`Tx::commit`], it rolls back.
pub struct Tx<'a> {
    inner: deadpool_postgres::Transaction<'a>,
    unnamed: Option<Arc<Types>>,
}

impl<'a> Tx<'a> {
    statements!(inner, false);

    /// Commits.
    pub async fn commit(self) -> Result<(), Error> {
        self.inner.commit().await
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), Error> {
        self.inner.rollback().await
    }
}

impl<'a> std::ops::Deref for Tx<'a> {
    type Target = deadpool_postgres::Transaction<'a>;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

/// Where statements run: a pooled [`Conn`], a [`Tx`], or a caller's own client
/// ([`Prepared`]). Functions that run statements for either take `&impl Sql`.
pub trait Sql: Sync {
    /// Runs `sql` and returns its rows.
    fn query<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send + 'a;
    /// Runs `sql`, which returns exactly one row.
    fn query_one<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a;
    /// Runs `sql`, which returns at most one row.
    fn query_opt<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Option<Row>, Error>> + Send + 'a;
    /// Runs `sql`; returns how many rows it changed.
    fn execute<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<u64, Error>> + Send + 'a;
}

/// [`Sql`] for a type with the inherent statement methods of [`statements!`].
macro_rules! run_by_inherent {
    ($ty:ty) => {
        impl Sql for $ty {
            fn query<'a>(
                &'a self,
                sql: &'a str,
                params: Params<'a>,
            ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send + 'a {
                <$ty>::query(self, sql, params)
            }
            fn query_one<'a>(
                &'a self,
                sql: &'a str,
                params: Params<'a>,
            ) -> impl Future<Output = Result<Row, Error>> + Send + 'a {
                <$ty>::query_one(self, sql, params)
            }
            fn query_opt<'a>(
                &'a self,
                sql: &'a str,
                params: Params<'a>,
            ) -> impl Future<Output = Result<Option<Row>, Error>> + Send + 'a {
                <$ty>::query_opt(self, sql, params)
            }
            fn execute<'a>(
                &'a self,
                sql: &'a str,
                params: Params<'a>,
            ) -> impl Future<Output = Result<u64, Error>> + Send + 'a {
                <$ty>::execute(self, sql, params)
            }
        }
    };
}

run_by_inherent!(Conn);
run_by_inherent!(Tx<'_>);

/// A caller's own connection or transaction (any driver client): each statement prepared on
/// it and closed after use, as the driver does for SQL text, so nothing outlives the
/// caller's transaction.
pub struct Prepared<'c, C>(pub &'c C);

impl<C: tokio_postgres::GenericClient + Sync> Sql for Prepared<'_, C> {
    fn query<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send + 'a {
        self.0.query(sql, params)
    }
    fn query_one<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a {
        self.0.query_one(sql, params)
    }
    fn query_opt<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Option<Row>, Error>> + Send + 'a {
        self.0.query_opt(sql, params)
    }
    fn execute<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<u64, Error>> + Send + 'a {
        self.0.execute(sql, params)
    }
}

/// How the parameter types of `sql` are learnt: one simple-query message that prepares it
/// under a name of its own (SQL `PREPARE`, inferring the types as a protocol-level Parse
/// does), reads the types from `pg_prepared_statements` and deallocates it, inside a
/// transaction of its own outside one (`own_transaction`). One message: the server runs it
/// whole even if the caller stops waiting half-way, so no name and no open transaction is
/// ever left on a server connection the pooler hands to someone else.
fn learning(sql: &str, own_transaction: bool) -> String {
    let (begin, commit) = match own_transaction {
        true => ("BEGIN; ", "; COMMIT"),
        false => ("", ""),
    };
    // the newline ends a comment on the statement's last line
    format!(
        "{begin}PREPARE remuda_learn AS {}\n; \
         SELECT array_to_string(ARRAY(SELECT unnest(parameter_types)::oid), ',') \
         FROM pg_prepared_statements WHERE name = 'remuda_learn'; \
         DEALLOCATE remuda_learn{commit}",
        sql.trim_end()
    )
}

/// The types in the answer to [`learning`], remembered for `sql`. A type that is not one of
/// PostgreSQL's own (an enum, a domain) is kept as `unknown`: a value for it fails to
/// encode with the driver's error naming both types.
fn learnt(types: &Types, sql: &str, reply: Vec<tokio_postgres::SimpleQueryMessage>) -> Arc<[Type]> {
    let oids = reply
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap_or_default();
    let learnt: Arc<[Type]> = oids
        .split(',')
        .filter(|oid| !oid.is_empty())
        .map(|oid| {
            oid.parse()
                .ok()
                .and_then(Type::from_oid)
                .unwrap_or(Type::UNKNOWN)
        })
        .collect();
    types.put(sql, learnt.clone());
    learnt
}

/// Behind a pooler, a statement outside a transaction runs in one of its own that first takes
/// remuda's planner settings for itself (`SET LOCAL`, see [`super::SESSION_OPTIONS`]: a
/// pooler takes no start-up options and a plain `SET` would stay with the server connection
/// for the next client): BEGIN with the settings, the statement and COMMIT are sent together,
/// pipelined, one round trip. Without the settings an unnamed statement is planned for its
/// values, and a batch of 2 000 successes planned on a table whose statistics were taken
/// before its 100 000 jobs came was joined by a filter over a sequential scan: 980 ms instead
/// of 25 ms, a drain of 1 400 jobs/s instead of 40 000. With `plan_cache_mode` in force the
/// unnamed statement gets the generic plan, as a prepared one does directly.
async fn planned<C: GenericClient, T>(
    client: &C,
    own_transaction: bool,
    statement: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    if !own_transaction {
        return statement.await;
    }
    in_transaction(client, super::LOCAL_SETTINGS, statement).await
}

fn typed<'a>(params: Params<'a>, types: &[Type]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .zip(
            types
                .iter()
                .cloned()
                .chain(std::iter::repeat(Type::UNKNOWN)),
        )
        .map(|(p, t)| (*p, t))
        .collect()
}

async fn affected(stream: tokio_postgres::RowStream) -> Result<u64, Error> {
    use futures_util::StreamExt;
    futures_util::pin_mut!(stream);
    while let Some(row) = stream.next().await {
        row?;
    }
    Ok(stream.rows_affected().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::SimpleQueryMessage;

    #[test]
    fn a_statement_is_learnt_in_one_message_that_leaves_nothing_behind() {
        let script = learning("SELECT $1::int -- the last line is a comment", true);
        assert!(script.starts_with("BEGIN; PREPARE remuda_learn AS SELECT $1::int"));
        assert!(script.contains("comment\n; SELECT"), "{script}");
        assert!(
            script.ends_with("DEALLOCATE remuda_learn; COMMIT"),
            "{script}"
        );
        let inside = learning("SELECT 1", false);
        assert!(
            !inside.contains("BEGIN") && !inside.contains("COMMIT"),
            "{inside}"
        );
    }

    #[test]
    fn a_statement_without_parameters_is_learnt_as_such_and_cached() {
        let types = Types::default();
        let none: Vec<SimpleQueryMessage> = Vec::new();
        assert!(learnt(&types, "a", none).is_empty());
        assert_eq!(types.get("a").map(|t| t.len()), Some(0));
    }
}
