//! `utter-tts-espeak`: the espeak-ng spoken-feedback plugin as a program (see the library
//! docs). Usage: `utter-tts-espeak [--output-dir DIR]`.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("utter-tts-espeak: argument {bad:?} is not UTF-8");
            return ExitCode::FAILURE;
        }
    };
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "utter-tts-espeak: spoken feedback for Utter through espeak-ng (a plugin; the runner starts it)\n\n\
             Usage: utter-tts-espeak [--output-dir DIR]\n\n\
             --output-dir DIR  write each tts.speak utterance to a WAV file in DIR instead of the\n                  \
             sound device (also UTTER_TTS_OUTPUT_DIR)\n\n\
             Methods: tts.speak {{text, voice?, rate?}}, tts.synthesize {{text, voice?, rate?}}\n\
             Needs the Debian package espeak-ng."
        );
        return ExitCode::SUCCESS;
    }
    utter_tts_espeak::run(args).await
}
