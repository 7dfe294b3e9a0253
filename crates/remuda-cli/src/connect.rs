//! From the global flags to a client: resolve the database (URL, local server, or private
//! cluster), and check the schema unless the command is the one that creates it.

use crate::args::DbArgs;
use crate::error::CliResult;
use remuda::db::setup::Resolve;
use remuda::{Client, Database};

/// Connections each CLI process keeps at most.
const POOL_SIZE: usize = 16;

/// The resolved database, not yet checked.
pub async fn database(args: &DbArgs) -> CliResult<Database> {
    let mut resolve = Resolve::from_env();
    if args.database_url.is_some() {
        resolve.url = args.database_url.clone().filter(|u| !u.is_empty());
    }
    resolve.embedded |= args.embedded;
    let (config, tls) = resolve.resolve_with_tls().await?;
    let mut db = Database::with_tls(config, tls, POOL_SIZE)?;
    if let Some(direct) = args.direct_url.as_deref().filter(|u| !u.is_empty()) {
        db = db.with_direct(direct)?;
    }
    db.ping().await?;
    Ok(db)
}

/// A client on a database whose schema is current.
pub async fn client(args: &DbArgs) -> CliResult<Client> {
    let client = Client::new(database(args).await?);
    client.check().await?;
    Ok(client)
}
