//! A small HTTP service exposing `/leader` (whether this replica leads,
//! and if not, which one does) and `/metrics` (Prometheus, from Simba's
//! `metrics` facade).
//!
//! ```text
//! cargo run -p simba-tokio --example http_service -- 127.0.0.1:8080 &
//! cargo run -p simba-tokio --example http_service -- 127.0.0.1:8081 &
//! curl localhost:8080/leader; curl localhost:8081/leader; curl localhost:8080/metrics
//! ```
//!
//! The replicas share the backend of `SIMBA_BACKEND` (any URL; with
//! `--features postgres` or `mysql` on this crate for those servers), or by
//! default one SQLite file in the temporary directory, so two copies on one
//! host elect one leader between them; the other says it follows, and
//! whom (each replica publishes its address as session metadata).
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use simba_tokio::{Election, Simba, SimbaConfig, Status};
use std::time::Duration;

#[derive(Clone)]
struct App {
    simba: Simba,
    election: Election,
    prometheus: PrometheusHandle,
}

const NAME: &str = "example.http";

async fn leader(State(app): State<App>) -> String {
    match app.election.snapshot().await {
        Ok(Some(s)) if s.status == Status::Leader => {
            format!("leader (token {})\n", s.term.map_or(0, |t| t.1.get()))
        }
        Ok(Some(s)) => match app.simba.leader(NAME).await {
            Ok(Some(h)) => format!(
                "{}: following {} (token {})\n",
                s.status,
                h.metadata
                    .get("addr")
                    .unwrap_or("a replica without an address"),
                h.token
            ),
            Ok(None) => format!("{}: no leader right now\n", s.status),
            Err(e) => format!("{}: cannot tell who leads: {e}\n", s.status),
        },
        _ => "stopped\n".to_owned(),
    }
}

async fn metrics(State(app): State<App>) -> String {
    app.prometheus.render()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let url = std::env::var("SIMBA_BACKEND").unwrap_or_else(|_| {
        let path = std::env::temp_dir().join("simba-http-example.db");
        format!("sqlite://{}?mode=rwc", path.display())
    });
    let backend = simba_tokio::connect(&url).await?;
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(6))
        .build()?;
    let simba = simba_tokio::builder_dyn(std::sync::Arc::from(backend))
        .config(config)
        .metadata("addr", addr.clone())
        .build()?;
    let election = simba.election(NAME).start(simba_tokio::NoListener).await?;
    let app = Router::new()
        .route("/leader", get(leader))
        .route("/metrics", get(metrics))
        .with_state(App {
            simba: simba.clone(),
            election,
            prometheus,
        });
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
