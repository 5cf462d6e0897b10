//! The query embedding alone, for each local model a deployment can choose
//! (the default is chosen by recall and by this cost): all-MiniLM-L6-v2 int8
//! (`embedding.model = "minilm"`) and multilingual-e5-small (`"e5"`, the
//! default: the graph of `embed::e5_onnx`, each kind of query session
//! `embedding.e5_queries` offers: `q4_int8`, `int8` and, as the baseline,
//! `f32`, the passage session), all on ONNX Runtime. One
//! thread per run (`embedding.onnx_threads = 1`), one query per call, a
//! text no earlier call used (English, Korean, Japanese, Spanish in turn,
//! ~10–20 word pieces), so no cache answers. Prints p50/p99 beside
//! criterion's mean; compare the rows of one run, not across runs.
//!
//! `cargo bench --profile dev --bench embed`

use criterion::{criterion_group, criterion_main, Criterion};
use strata::embed::e5_onnx::E5OnnxEmbedder;
use strata::config::E5Queries;
use strata::Config;

mod common;
use common::{bench_embedders, model};

const QUERIES: &[&str] = &[
    "what did Dana say about the migration deadline?",
    "유나 결혼식 날짜랑 장소가 어떻게 됐었죠?",
    "先週の歯医者の予約は何時でしたか",
    "¿cuándo es la boda de Marta en Asturias?",
];

fn benches(c: &mut Criterion) {
    let e = Config::default().embedding;
    let minilm = model();
    let e5_onnx = E5OnnxEmbedder::load(&e.e5_model_path(), &e.onnx_runtime_path(), 32, 256, 1)
        .expect("run scripts/fetch-model.sh first");
    let with = |queries| {
        E5OnnxEmbedder::load_with(&e.e5_model_path(), &e.onnx_runtime_path(), 32, 256, 1, queries, 1)
            .expect("run scripts/fetch-model.sh first")
    };
    let e5_onnx_int8 = with(E5Queries::Int8);
    let e5_onnx_f32 = with(E5Queries::F32);
    let embedders: [(&str, &dyn Fn(&[String])); 4] = [
        ("embed_query/minilm_onnx", &|q| {
            std::hint::black_box(minilm.embed_blocking(q).unwrap());
        }),
        ("embed_query/e5_onnx", &|q| {
            std::hint::black_box(e5_onnx.embed_blocking(q, true).unwrap());
        }),
        ("embed_query/e5_onnx_int8_dynamic", &|q| {
            std::hint::black_box(e5_onnx_int8.embed_blocking(q, true).unwrap());
        }),
        ("embed_query/e5_onnx_f32_queries", &|q| {
            std::hint::black_box(e5_onnx_f32.embed_blocking(q, true).unwrap());
        }),
    ];
    bench_embedders(c, &embedders, |k| format!("{} ({k})", QUERIES[k % QUERIES.len()]));
}

criterion_group! {
    name = group;
    config = { strata::eval::report::register_fonts().expect("embedded font"); Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(5)) };
    targets = benches
}
criterion_main!(group);
