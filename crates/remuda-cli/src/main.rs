//! The `remuda` binary: everything is in the library (`remuda_cli`), which the Python
//! package's worker shares for its config file.

fn main() -> std::process::ExitCode {
    remuda_cli::main()
}
