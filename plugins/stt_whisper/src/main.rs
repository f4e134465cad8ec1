//! `utter-stt-whisper`: the Whisper speech-to-text plugin as a program (see the library docs).
//! It takes no arguments; settings come from `UTTER_STT_MODEL`, `UTTER_STT_LANGUAGE` and
//! `stt.load`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        if arg == "--help" || arg == "-h" {
            println!(
                "utter-stt-whisper: Whisper speech to text for Utter (a plugin; the runner starts it)\n\n\
                 It speaks JSON-RPC on stdin/stdout or the socket the runner names.\n\
                 Environment:\n  \
                 UTTER_STT_MODEL     a faster-whisper (CTranslate2) model directory to load at start\n  \
                 UTTER_STT_LANGUAGE  the default language, e.g. en\n\n\
                 Methods: stt.load {{model, language?}}, stt.transcribe {{audio | samples_b64, format, rate, channels, language?, model?}}"
            );
            return ExitCode::SUCCESS;
        }
        eprintln!("utter-stt-whisper: unexpected argument {arg:?}; it takes none (see --help)");
        return ExitCode::FAILURE;
    }
    utter_stt_whisper::run().await
}
