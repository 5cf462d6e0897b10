//! Bounded loopback load test of `strata serve` (a bench, not a timed test):
//! 32 simulated chatbots, each turn one `inject` + one `record`, on a scope
//! holding 10,000 episodes, with a fresh query text every turn (so the
//! query embedding is included). The same workload runs over HTTP against
//! the `strata` binary started on 127.0.0.1, then against the library in
//! this process (the baseline of the same run, on the same stores). Prints turns/s, p50 and
//! p99 per turn for both, the CPU time per turn of the server process and of
//! the bench process (the HTTP clients, or the library itself), the HTTP cost
//! over the library, and the server's resident memory idle and under load. Each path runs three phases: closed
//! loop (capacity), paced at `STRATA_LOAD_RATE` turns/s (default 250), and
//! one chatbot alone for `STRATA_LOAD_SERIAL_TURNS` turns (default 200): with
//! nothing queued, the difference between the paths there is the HTTP layer's
//! own cost (JSON, hyper, loopback TCP and the client).
//!
//! The memory proxy runs through the same server: an OpenAI-compatible
//! upstream in this process answers every chat completion at once (and
//! counts the Memory Context it was sent), and the closed-loop and
//! one-chatbot phases run as `POST /v1/chat/completions` through `strata
//! serve` (inject, record the turn, forward, record the reply) and straight
//! to the upstream (the baseline of the proxy's added latency). Prints the
//! tokens the proxy added per turn (characters / 4, as `strata eval`).
//! `STRATA_LOAD_PROXY=0` leaves it out.
//!
//! `cargo bench --profile dev --bench server_load`; `STRATA_LOAD_CLIENTS`
//! (32), `STRATA_LOAD_TURNS` (turns per client, 100) and `STRATA_LOAD_EPISODES`
//! (10000) change the shape, `STRATA_LOAD_SERVER_LOG` the server's log filter
//! (`warn`); `STRATA__…` config overrides (e.g.
//! `STRATA__EMBEDDING__ONNX_QUANTIZATION=weights_only`) apply to both paths.
//! It stops by itself: clients × turns requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use strata::memory::Components;
use strata::{Config, Memory, NewMessage, Scope, SessionId};

mod common;
use common::{populate, sentence};

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

const QUESTIONS: &[&str] = &[
    "what did Dana say about the migration?",
    "when is the wedding in Busan",
    "did Sam finish the marathon plan",
    "any news on the cat adoption?",
    "how is the kitchen renovation going",
    "remind me what Omar planned for the chess club",
];

/// A text no earlier turn used (phase included), so the embedding cache never answers.
fn question(phase: &str, client: usize, turn: usize) -> String {
    format!(
        "{} ({phase} chat {client}, turn {turn})",
        QUESTIONS[(client + turn) % QUESTIONS.len()]
    )
}

struct Stats {
    turns: usize,
    wall: Duration,
    lat: Vec<Duration>,
    /// CPU time of the phase, ms per turn: (the server process, this
    /// process); the library path has no server, so its first is 0
    cpu: (f64, f64),
}

impl Stats {
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.lat.clone();
        v.sort();
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i].as_secs_f64() * 1e3
    }
    fn tps(&self) -> f64 {
        self.turns as f64 / self.wall.as_secs_f64()
    }
}

/// Runs `clients` chatbots of `turns` turns each. Without `pace`, each sends
/// its next turn as soon as the last one is answered (closed loop: the
/// capacity). With `pace`, each sends one turn every `pace` (a user typing),
/// staggered, and latency counts from the scheduled send time, so a server
/// that falls behind is charged for the wait (no coordinated omission).
async fn drive<F, Fut>(clients: usize, turns: usize, pace: Option<Duration>, turn: F) -> Stats
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let turn = Arc::new(turn);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let turn = turn.clone();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(turns);
                let offset = pace
                    .map(|p| p * c as u32 / clients as u32)
                    .unwrap_or_default();
                for t in 0..turns {
                    let s = match pace {
                        Some(p) => {
                            let at = started + offset + p * t as u32;
                            tokio::time::sleep_until(at.into()).await;
                            at
                        }
                        None => Instant::now(),
                    };
                    turn(c, t).await;
                    lat.push(s.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    Stats {
        turns: clients * turns,
        wall: started.elapsed(),
        lat,
        cpu: (0.0, 0.0),
    }
}

/// CPU time the process has used, all threads, in ns: utime + stime of
/// `/proc/PID/stat` (fields 14 and 15), in clock ticks of 10 ms (`USER_HZ` =
/// 100 on Linux). (`/proc/PID/schedstat` counts the main thread only.)
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // after the parenthesised command name, fields start at 3 (state)
            let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
        * 10_000_000
}

/// CPU ns over a phase → ms per turn (resolution: one 10 ms tick over the phase).
fn per_turn(ns: u64, turns: usize) -> f64 {
    ns as f64 / 1e6 / turns.max(1) as f64
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .map(|x| x.parse::<f64>().unwrap_or(0.0))
            })
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// The proxy phases' upstream: answers every chat completion at once, and
/// adds up the characters of the system messages it was sent.
async fn upstream(system_chars: Arc<std::sync::atomic::AtomicUsize>) -> String {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(req): axum::Json<serde_json::Value>| {
            let chars = system_chars.clone();
            async move {
                let system = req["messages"]
                    .as_array()
                    .and_then(|m| m.iter().find(|m| m["role"] == "system"))
                    .and_then(|m| m["content"].as_str())
                    .map(|s| s.chars().count())
                    .unwrap_or(0);
                chars.fetch_add(system, std::sync::atomic::Ordering::Relaxed);
                axum::Json(json!({"id": "c", "object": "chat.completion", "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Noted."}, "finish_reason": "stop"}]}))
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    // TCP_NODELAY on every accepted connection, as real model servers set it
    // (without it a small response can wait on Nagle's algorithm)
    use axum::serve::ListenerExt;
    let l = l.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    url
}

/// One chat completion (the proxy or the upstream directly), as an SDK sends it.
async fn chat(client: &reqwest::Client, url: &str, session: &str, q: &str) {
    let r = client
        .post(format!("{url}/chat/completions"))
        .header("content-type", "application/json")
        .header("x-strata-user-id", "load")
        .header("x-strata-agent-id", "bot")
        .header("x-strata-session-id", session)
        .body(json!({"model": "m", "messages": [{"role": "user", "content": q}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches`
    }
    let clients = env_usize("STRATA_LOAD_CLIENTS", 32);
    let turns = env_usize("STRATA_LOAD_TURNS", 100);
    let episodes = env_usize("STRATA_LOAD_EPISODES", 10_000);
    // the paced phase: turns per second over all chatbots (the target, 250)
    let rate = env_usize("STRATA_LOAD_RATE", 250).max(1);
    let pace = Duration::from_secs_f64(clients as f64 / rate as f64);
    let serial_turns = env_usize("STRATA_LOAD_SERIAL_TURNS", 200).max(1);
    // (name, chatbots, turns each, pacing)
    let phases = [
        ("closed", clients, turns, None),
        ("paced", clients, turns, Some(pace)),
        ("serial", 1, serial_turns, None),
    ];
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let scope = Scope::new("load", "bot").unwrap();
    // the compiled-in defaults with the STRATA__* environment applied, as the
    // server started below applies them (e.g. STRATA__EMBEDDING__ONNX_QUANTIZATION,
    // or STRATA__EMBEDDING__MODEL=minilm for the other model)
    let mut cfg = Config::load(None, &[]).expect("config with environment overrides");
    cfg.data_dir = dir.path().to_path_buf();
    cfg.pruner.enabled = false;

    // 0. the scope, written straight into the stores; closed so the server can open them.
    // The library baseline uses the embedder the server builds from the same config
    // (for MiniLM the ONNX pool behind the micro-batcher), so both sides embed the same
    // way, and the episodes' vectors come from it too.
    let lib_embedder = rt.block_on(Memory::load_embedder(&cfg)).unwrap();
    eprintln!("server_load: embedder {} ({} dims)", lib_embedder.model_id(), lib_embedder.dim());
    let texts: Vec<String> = (0..1000).map(sentence).collect();
    let vecs = rt.block_on(lib_embedder.embed(&texts)).unwrap();
    let base: Vec<(String, Vec<f32>)> = texts.into_iter().zip(vecs).collect();
    let open = |cfg: Config| {
        let model = lib_embedder.clone();
        async move {
            Memory::open_with(
                cfg,
                Components {
                    embedder: Some(model),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
        }
    };
    rt.block_on(async {
        let mem = open(cfg.clone()).await;
        populate(&mem, &scope, episodes, &base).await;
        mem.shutdown().await.unwrap();
    });

    // 1. the binary over HTTP on loopback
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let with_proxy = std::env::var("STRATA_LOAD_PROXY").map(|v| v != "0").unwrap_or(true);
    let system_chars = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let upstream_url = rt.block_on(upstream(system_chars.clone()));
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--set",
            "pruner.enabled=false",
            "--set",
            "server.max_concurrent_requests=256",
            "--set",
            "proxy.max_concurrent_requests=256",
            "--set",
            &format!("proxy.upstream_url={upstream_url:?}"),
        ])
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("STRATA_LOG", std::env::var("STRATA_LOAD_SERVER_LOG").unwrap_or_else(|_| "warn".into()))
        .spawn()
        .unwrap();
    let base_url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let (http, idle, peak, proxied, direct, tokens) = rt.block_on(async {
        for _ in 0..600 {
            if client
                .get(format!("{base_url}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let pid = server.id();
        // steady state first: at start the server's workers may still be
        // building the HNSW graph of the 10k points (the index written above
        // has none yet); wait until it uses under 5% of a core for 1 s
        let settle = Instant::now();
        loop {
            let before = cpu_ns(pid);
            tokio::time::sleep(Duration::from_secs(1)).await;
            if cpu_ns(pid).saturating_sub(before) < 50_000_000 || settle.elapsed() > Duration::from_secs(300) {
                break;
            }
        }
        println!("server settled {:.1} s after it was ready", settle.elapsed().as_secs_f64());
        let idle = rss_mib(pid);
        let peak = Arc::new(std::sync::Mutex::new(idle));
        let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (p2, s2) = (peak.clone(), sampling.clone());
        let sampler = tokio::spawn(async move {
            while s2.load(std::sync::atomic::Ordering::Relaxed) {
                let r = rss_mib(pid);
                {
                    let mut g = p2.lock().unwrap();
                    *g = g.max(r);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let mut stats = Vec::new();
        for (phase, n, turns, p) in phases {
            let (c2, u2) = (client.clone(), base_url.clone());
            let cpu0 = (cpu_ns(pid), cpu_ns(std::process::id()));
            stats.push(
                drive(n, turns, p, move |c, t| {
                    let (client, base) = (c2.clone(), u2.clone());
                    async move {
                        let q = question(phase, c, t);
                        let s =
                            format!("{base}/v1/users/load/agents/bot/sessions/http-{phase}-{c}");
                        let r = client
                            .post(format!("{s}/inject"))
                            .header("content-type", "application/json")
                            .body(json!({"message": q}).to_string())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
                        let r = client
                            .post(format!("{s}/messages"))
                            .header("content-type", "application/json")
                            .body(json!({"role": "user", "content": q}).to_string())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status(), 201);
                    }
                })
                .await,
            );
            let s = stats.last_mut().unwrap();
            s.cpu = (
                per_turn(cpu_ns(pid) - cpu0.0, s.turns),
                per_turn(cpu_ns(std::process::id()) - cpu0.1, s.turns),
            );
        }
        // the proxy, and the upstream straight (its baseline): closed loop and one chatbot
        let mut proxied = Vec::new();
        let mut direct = Vec::new();
        let mut tokens = f64::NAN;
        if with_proxy {
            for (phase, n, turns, _) in phases.iter().filter(|p| p.3.is_none()) {
                for (out, url, tag) in [(&mut direct, upstream_url.clone(), "direct"), (&mut proxied, format!("{base_url}/v1"), "proxy")] {
                    let c2 = client.clone();
                    let cpu0 = (cpu_ns(pid), cpu_ns(std::process::id()));
                    let chars0 = system_chars.load(std::sync::atomic::Ordering::Relaxed);
                    let phase = *phase;
                    out.push(
                        drive(*n, *turns, None, move |c, t| {
                            let (client, url) = (c2.clone(), url.clone());
                            async move {
                                let q = question(&format!("{tag} {phase}"), c, t);
                                chat(&client, &url, &format!("{tag}-{phase}-{c}"), &q).await;
                            }
                        })
                        .await,
                    );
                    let s = out.last_mut().unwrap();
                    s.cpu = (per_turn(cpu_ns(pid) - cpu0.0, s.turns), per_turn(cpu_ns(std::process::id()) - cpu0.1, s.turns));
                    if tag == "proxy" && phase == "serial" {
                        let chars = system_chars.load(std::sync::atomic::Ordering::Relaxed) - chars0;
                        tokens = chars as f64 / strata::eval::inject::CHARS_PER_TOKEN as f64 / s.turns as f64;
                    }
                }
            }
        }
        sampling.store(false, std::sync::atomic::Ordering::Relaxed);
        sampler.await.unwrap();
        let peak = *peak.lock().unwrap();
        (stats, idle, peak, proxied, direct, tokens)
    });
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();

    // 2. the library in this process, same stores, same workload (after the
    // server, so both meet an index whose background merges are done)
    let lib = rt.block_on(async {
        let mem = open(cfg.clone()).await;
        let mut out = Vec::new();
        for (phase, n, turns, p) in phases {
            let m = mem.clone();
            let sc = scope.clone();
            let cpu0 = cpu_ns(std::process::id());
            out.push(
                drive(n, turns, p, move |c, t| {
                    let (m, sc) = (m.clone(), sc.clone());
                    async move {
                        let sid = SessionId::new(format!("lib-{phase}-{c}")).unwrap();
                        let q = question(&format!("lib {phase}"), c, t);
                        m.inject(&sc, &sid, &q).await.unwrap();
                        m.record(&sc, &sid, NewMessage::user(q, chrono::Utc::now()))
                            .await
                            .unwrap();
                    }
                })
                .await,
            );
            let s = out.last_mut().unwrap();
            s.cpu = (0.0, per_turn(cpu_ns(std::process::id()) - cpu0, s.turns));
        }
        mem.shutdown().await.unwrap();
        out
    });

    println!("load: {clients} chatbots x {turns} turns (inject + record), {episodes} episodes in the scope, fresh query text each turn");
    println!("closed loop = each chatbot sends its next turn when answered (capacity); paced = {rate} turns/s offered in all, latency from the scheduled send; one chatbot = {serial_turns} turns, nothing queued");
    println!("| path | phase | turns/s | p50 ms | p99 ms | CPU ms/turn: server | CPU ms/turn: bench process |");
    println!("|---|---|---|---|---|---|---|");
    for (name, runs) in [
        ("library (baseline, same run)", &lib),
        ("HTTP (strata serve)", &http),
    ] {
        for (phase, s) in ["closed loop", "paced", "one chatbot"].iter().zip(runs.iter()) {
            println!(
                "| {name} | {phase} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} |",
                s.tps(),
                s.pct(0.5),
                s.pct(0.99),
                s.cpu.0,
                s.cpu.1
            );
        }
    }
    for (i, phase) in ["closed loop", "paced", "one chatbot"].iter().enumerate() {
        println!(
            "HTTP cost over the library, {phase}: p50 +{:.2} ms, p99 +{:.2} ms; throughput ratio {:.2}",
            http[i].pct(0.5) - lib[i].pct(0.5),
            http[i].pct(0.99) - lib[i].pct(0.99),
            http[i].tps() / lib[i].tps()
        );
    }
    if with_proxy {
        println!("memory proxy: one chat completion per turn (inject, record the turn, forward, record the reply), upstream in this process answering at once");
        println!("| path | phase | turns/s | p50 ms | p99 ms | CPU ms/turn: server | CPU ms/turn: bench process |");
        println!("|---|---|---|---|---|---|---|");
        for (name, runs) in [("upstream directly (baseline, same run)", &direct), ("proxy (strata serve)", &proxied)] {
            for (phase, s) in ["closed loop", "one chatbot"].iter().zip(runs.iter()) {
                println!("| {name} | {phase} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} |", s.tps(), s.pct(0.5), s.pct(0.99), s.cpu.0, s.cpu.1);
            }
        }
        for (i, phase) in ["closed loop", "one chatbot"].iter().enumerate() {
            println!(
                "proxy added over the upstream, {phase}: p50 +{:.2} ms, p99 +{:.2} ms",
                proxied[i].pct(0.5) - direct[i].pct(0.5),
                proxied[i].pct(0.99) - direct[i].pct(0.99)
            );
        }
        println!("proxy capacity against REST inject + record, closed loop: {:.2}", proxied[0].tps() / http[0].tps());
        println!("tokens the proxy added per turn (one chatbot; Memory Context, characters / 4): {tokens:.1}");
    }
    println!("strata serve resident memory: idle {idle:.0} MiB, peak under load {peak:.0} MiB");
}
