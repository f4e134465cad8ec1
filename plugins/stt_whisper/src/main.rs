//! `utter-stt-whisper`: the Whisper speech-to-text plugin as a program (see the library docs
//! and `utter-stt-whisper --help`). It takes no options; settings come from
//! `UTTER_STT_MODEL`, `UTTER_STT_LANGUAGE` and `stt.load`.

use clap::Parser;
use std::process::ExitCode;

/// The examples at the end of `utter-stt-whisper --help`.
const EXAMPLES: &str = "\
Environment:
  UTTER_STT_MODEL     a faster-whisper model directory to load at start
  UTTER_STT_LANGUAGE  the default language (ISO 639-1), e.g. en

Examples:
  Check that it starts and answers, the way the runner talks to it:
    UTTER_STT_MODEL=~/models/faster-whisper-tiny.en \\
      utter plugin check -- utter-stt-whisper

  Turn the voice loop on in the runner's config (config.toml):
    [stt]
    model = \"~/models/faster-whisper-tiny.en\"
    language = \"en\"

    [[plugin]]
    id = \"stt\"
    kind = \"stt\"
    entrypoint = [\"utter-stt-whisper\"]

A model directory holds model.bin, config.json, vocabulary.json (or
vocabulary.txt) and tokenizer.json, e.g. a copy of
Systran/faster-whisper-tiny.en. Nothing is ever downloaded.";

/// Utter's speech to text: Whisper through CTranslate2, int8 on the CPU, offline.
///
/// This is a plugin: Utter's runner starts it and speaks JSON-RPC 2.0 with it
/// on stdin and stdout (or on the socket the runner names) until it closes the
/// connection. You do not normally run it by hand. It takes no options.
///
/// It serves
///   - stt.load {model, language?}: load a faster-whisper model directory and
///     make it the default;
///   - stt.transcribe {audio | samples_b64, format, rate, channels, language?,
///     model?}: turn 16 kHz mono f32 audio into text, with stt.partial and
///     stt.final notifications;
///   - stt.score {audio | samples_b64, format, rate, channels, phrases}: how
///     likely the audio makes each phrase (the log probability of its tokens).
//
// (verbatim_doc_comment: clap 4 without its wrap_help feature does not wrap help text, so the
// lines above are wrapped by hand.)
#[derive(Debug, Parser)]
#[command(
    name = "utter-stt-whisper",
    version,
    verbatim_doc_comment,
    after_help = EXAMPLES
)]
struct Args {}

#[tokio::main]
async fn main() -> ExitCode {
    // --help and --version print and exit 0; any argument is a usage error (exit 2).
    let Args {} = Args::parse();
    utter_stt_whisper::run().await
}
