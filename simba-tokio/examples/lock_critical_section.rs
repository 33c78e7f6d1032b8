//! A lock around a critical section (S5.3), shared by the processes of one
//! host through a SQLite file.
//!
//! ```text
//! cargo run -p simba-tokio --example lock_critical_section   # in two terminals
//! ```
use simba_tokio::{Error, SimbaConfig};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join("simba-example-lock.db");
    let backend = simba_backends::connect(&format!("sqlite://{}", path.display())).await?;
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(3))
        .build()?;
    let simba = simba_tokio::builder_dyn(backend.into())
        .config(config)
        .build()?;

    match simba
        .lock("example.report")
        .acquire_timeout(Duration::from_secs(10))
        .await
    {
        Ok(lock) => {
            println!("in the critical section with token {}", lock.token());
            for step in 0..5 {
                // Check the term before each step that must not overlap.
                if lock.ensure_valid(Duration::from_millis(500)).is_err() {
                    println!("lock lost: stopping");
                    break;
                }
                println!("step {step}");
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            lock.release().await;
        }
        Err(Error::TimedOut { .. }) => println!("someone else kept the lock for 10 s"),
        Err(e) => return Err(e.into()),
    }
    simba.close().await;
    Ok(())
}
