//! No build step: this script exists only so that `[build-dependencies]` in
//! Cargo.toml can turn on the `syn` features a dev-dependency's proc macro
//! needs in every build (see the note there), keeping the demo's build and
//! the tests' build one and the same.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
