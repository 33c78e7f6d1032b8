//! A small HTTP service exposing `/leader` (whether this replica leads) and
//! `/metrics` (Prometheus, from Simba's `metrics` facade).
//!
//! ```text
//! cargo run -p simba-tokio --example http_service -- 127.0.0.1:8080
//! curl localhost:8080/leader; curl localhost:8080/metrics
//! ```
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use simba_tokio::{Election, MemoryBackend, SimbaConfig, Status};
use std::time::Duration;

#[derive(Clone)]
struct App {
    election: Election,
    prometheus: PrometheusHandle,
}

async fn leader(State(app): State<App>) -> String {
    match app.election.snapshot().await {
        Ok(Some(s)) if s.status == Status::Leader => {
            format!("leader (token {})\n", s.term.map_or(0, |t| t.1.get()))
        }
        Ok(Some(s)) => format!("{}\n", s.status),
        _ => "stopped\n".to_owned(),
    }
}

async fn metrics(State(app): State<App>) -> String {
    app.prometheus.render()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    // A real deployment shares a database backend between replicas.
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(6))
        .build()?;
    let simba = simba_tokio::builder(MemoryBackend::new())
        .config(config)
        .build()?;
    let election = simba
        .election("example.http")
        .start(simba_tokio::NoListener)
        .await?;
    let app = Router::new()
        .route("/leader", get(leader))
        .route("/metrics", get(metrics))
        .with_state(App {
            election,
            prometheus,
        });
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{addr}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    simba.close().await;
    Ok(())
}
