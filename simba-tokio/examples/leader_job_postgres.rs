//! A leader-only job that writes to PostgreSQL with its fencing token (S9).
//!
//! Every replica runs this; only the leader writes, and every write is
//! admitted by a fence keyed on the term's token, so a paused former leader
//! whose term has ended cannot overwrite a later leader's work.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!     cargo run -p simba-tokio --example leader_job_postgres
//! ```
use simba_tokio::fencing::PgFence;
use simba_tokio::postgres::PgBackend;
use simba_tokio::{PoolOptions, SimbaConfig, Term};
use sqlx::PgPool;
use std::time::Duration;

async fn run_job(term: Term, fence: PgFence, pool: PgPool) {
    let mut batch = 0u64;
    // Stop writing before the term's local deadline could pass mid-write.
    while term.ensure_valid(Duration::from_secs(1)).is_ok() {
        batch += 1;
        let result = async {
            let mut tx = pool.begin().await?;
            if fence
                .admit_in(&mut tx, "example.ledger", &term)
                .await
                .map_err(|e| sqlx::Error::Protocol(e.to_string()))?
            {
                sqlx::query("INSERT INTO example_ledger (batch, token) VALUES ($1, $2)")
                    .bind(batch as i64)
                    .bind(term.token() as i64)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(true)
            } else {
                Ok::<bool, sqlx::Error>(false) // a later term has written: roll back
            }
        }
        .await;
        match result {
            Ok(true) => println!("batch {batch} written with token {}", term.token()),
            Ok(false) => println!("fenced off: a later leader exists"),
            Err(e) => eprintln!("write failed: {e}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    // The application's own pool, shared with Simba (bring your own pool).
    let pool = PgPool::connect(&url).await?;
    let backend = PgBackend::from_pool(pool.clone(), &PoolOptions::new()).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS example_ledger (batch bigint, token bigint)")
        .execute(&pool)
        .await?;
    let fence = PgFence::create(pool.clone(), "example_fence").await?;
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(6))
        .build()?;
    let simba = simba_tokio::builder(backend).config(config).build()?;
    let task = simba
        // The task factory is called once per term: clone what each term's
        // job needs, then move the clones into it.
        .run_while_leader("example.ledger-job", move |term| {
            run_job(term, fence.clone(), pool.clone())
        })
        .await?;
    tokio::signal::ctrl_c().await?;
    task.stop().await; // revoke, cancel the job, then release (S6.1)
    simba.close().await;
    Ok(())
}
