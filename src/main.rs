use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    gymapi::cli::main().await
}
