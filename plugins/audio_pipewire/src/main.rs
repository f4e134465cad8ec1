//! `utter-audio-pipewire`: the PipeWire microphone plugin as a program (see the library
//! docs). The runner starts it and speaks JSON-RPC on its stdin and stdout (or the socket
//! `UTTER_PLUGIN_SOCKET` names); `--list-sources` is for trying it by hand.

use clap::Parser;
use std::process::ExitCode;

/// Microphone capture for Utter (a plugin; the runner starts it).
///
/// Without options it serves JSON-RPC on stdin/stdout until stdin closes. Methods:
/// audio.configure {source, pre_roll_ms, max_seconds, vad}, audio.sources, audio.status,
/// audio.begin, audio.end, audio.cancel, audio.record {seconds}; see the crate's README.md.
/// PipeWire is found through PIPEWIRE_RUNTIME_DIR or XDG_RUNTIME_DIR.
#[derive(Debug, Parser)]
#[command(name = "utter-audio-pipewire", version)]
struct Args {
    /// Print the PipeWire audio sources as JSON and exit.
    #[arg(long)]
    list_sources: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list_sources {
        return match utter_audio_pipewire::list_sources().await {
            Ok(sources) => match serde_json::to_string_pretty(&sources) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("utter-audio-pipewire: {e}");
                    ExitCode::FAILURE
                }
            },
            Err(e) => {
                eprintln!("utter-audio-pipewire: {e}");
                ExitCode::FAILURE
            }
        };
    }
    utter_audio_pipewire::run().await
}
