//! The `strata` binary: parses arguments and hands over to [`strata::cli::run`].

fn main() -> std::process::ExitCode {
    strata::cli::main()
}
