//! Test helpers: one real embedding model (the default: multilingual-e5-small
//! on ONNX Runtime) loaded once per test binary, and `Memory` instances on
//! fresh temporary directories.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use strata::embed::e5_onnx::E5OnnxEmbedder;
use strata::embed::Embedder;
use strata::memory::Components;
use strata::{Config, Memory};

/// MiniLM's folder (its tokenizer): `STRATA_TEST_MODEL`, else where the
/// binary looks by default (`embedding.models_home`, the per-user data
/// directory, where `scripts/fetch-model.sh` puts it).
pub fn model_dir() -> PathBuf {
    std::env::var_os("STRATA_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| Config::default().embedding.model_path())
}

/// The models folder `model_dir` sits in (every other model file is under it).
pub fn models_home() -> PathBuf {
    model_dir().parent().map(|p| p.to_path_buf()).unwrap_or_default()
}

/// Files of the int8 ONNX embedder (fetched by `scripts/fetch-model.sh` beside the f32 model).
pub fn onnx_files() -> strata::embed::onnx::OnnxFiles {
    let models = model_dir()
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    strata::embed::onnx::OnnxFiles {
        model: models.join("all-MiniLM-L6-v2-int8/model.onnx"),
        tokenizer: model_dir().join("tokenizer.json"),
        runtime: models.join("onnxruntime/libonnxruntime.so"),
    }
}

/// The default model on the default runtime (multilingual-e5-small on ONNX
/// Runtime, one query session), loaded once. Panics (never skips) when missing.
pub fn embedder() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<E5OnnxEmbedder>> = OnceLock::new();
    E.get_or_init(|| {
        let mut e = Config::default().embedding;
        e.models_home = models_home();
        Arc::new(
            E5OnnxEmbedder::load(
                &e.e5_model_path(),
                &e.onnx_runtime_path(),
                e.batch_size,
                e.max_tokens,
                e.onnx_threads,
            )
            .unwrap_or_else(|e| panic!("{e} (tests need the real model)")),
        )
    })
    .clone()
}

/// A config on a fresh directory (returned so it lives as long as the test).
pub fn config() -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.data_dir = dir.path().to_path_buf();
    c.embedding.model_dir = model_dir();
    c.embedding.models_home = models_home();
    c.pruner.enabled = false;
    (c, dir)
}

/// Opens a memory on `config` with the shared model.
pub async fn open(config: Config) -> Memory {
    Memory::open_with(
        config,
        Components {
            embedder: Some(embedder()),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// Opens a memory on `config` with the shared model and no background
/// workers: ended sessions wait in the outbox until a test drains them (or
/// a later open replays them).
pub async fn open_without_workers(config: Config) -> Memory {
    Memory::open_with(
        config,
        Components {
            embedder: Some(embedder()),
            no_workers: true,
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// The `strata` binary of this build, run from the crate root without
/// `STRATA_LOG` (the tests set the log level they need).
pub fn bin() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_strata"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c.env_remove("STRATA_LOG");
    c
}

/// Sends `sig` (`-TERM`, `-HUP`, `-KILL`) to a child process.
pub fn signal(child: &std::process::Child, sig: &str) {
    let sent = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {sig} failed");
}

/// Waits (at most `secs` seconds) until the server at `base` answers `/readyz`.
pub async fn wait_ready(base: &str, secs: u64) {
    for _ in 0..secs * 10 {
        if reqwest::get(format!("{base}/readyz"))
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("server at {base} did not come up");
}

/// A loopback port free at the time of the call (bound, then released):
/// for a child server to listen on, or, left unused, an address that
/// refuses connections.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP client for the tests' calls. Building a `reqwest::Client` reads
/// and parses the system's root certificates (most of the CPU of the HTTP
/// isolation property test when each call built its own); no idle
/// connection is kept, since each test has its own runtime and a pooled
/// connection would outlive the runtime that drives it.
pub fn http() -> &'static reqwest::Client {
    static C: OnceLock<reqwest::Client> = OnceLock::new();
    C.get_or_init(|| reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("http client"))
}
