//! What Whisper writes when it hears no speech.
//!
//! Whisper was trained on subtitled video, so silence, breath, clicks and music come out as
//! the subtitler's habits: "you", "Thank you.", "Thanks for watching!", "[BLANK_AUDIO]",
//! "(music)", "♪". Such a transcript is never a command; [`non_speech`] recognises it so the
//! runner can drop it instead of routing it (see `stt.transcribe`'s `non_speech` field).

/// Whole transcripts (lowercase, without punctuation) that Whisper produces on non-speech.
/// Collected from Whisper's known failure modes on silence and noise (the OpenAI and
/// whisper.cpp issue trackers) and from this project's own tests (2.5 s of zeros gives
/// "you"; a click train gives "Thank you.").
const PHRASES: &[&str] = &[
    "",
    "you",
    "thank you",
    "thank you very much",
    "thanks",
    "thanks for watching",
    "thank you for watching",
    "thanks for listening",
    "thank you for listening",
    "please subscribe",
    "subscribe",
    "like and subscribe",
    "bye",
    "bye bye",
    "oh",
    "ah",
    "uh",
    "um",
    "hmm",
    "mm",
    "so",
    "okay",
    "music",
    "applause",
    "silence",
    "blank audio",
    "subtitles by the amaraorg community",
    "i",
];

/// Whether `text` is what Whisper writes for audio without speech: empty, only punctuation,
/// only bracketed or starred annotations ("[BLANK_AUDIO]", "(upbeat music)", "*sigh*"),
/// only music signs, or one of the known phrases ("you", "Thank you.", "Thanks for
/// watching!"), compared without case, punctuation or repeats ("you you you").
pub fn non_speech(text: &str) -> bool {
    let mut rest = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut starred = false;
    for c in text.chars() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            '*' => starred = !starred,
            _ if depth > 0 || starred => {}
            _ => rest.push(c),
        }
    }
    let words: Vec<String> = rest
        .split_whitespace()
        .map(crate::model::word_key)
        .filter(|w| !w.is_empty())
        .collect();
    let phrase = words.join(" ");
    if PHRASES.contains(&phrase.as_str()) {
        return true;
    }
    // One known phrase said over and over ("you you you", "thank you thank you").
    let collapsed = crate::model::collapse_repeats(&phrase);
    collapsed != phrase && PHRASES.contains(&collapsed.as_str())
}

#[cfg(test)]
mod tests {
    use super::non_speech;

    #[test]
    fn whisper_habits_on_silence_are_non_speech() {
        for text in [
            "you",
            " You",
            "Thank you.",
            "Thanks for watching!",
            "[BLANK_AUDIO]",
            "(upbeat music)",
            "♪ ♪",
            "*sigh*",
            "...",
            "",
            "You you you",
            "Subtitles by the Amara.org community",
        ] {
            assert!(non_speech(text), "{text:?}");
        }
    }

    #[test]
    fn commands_are_speech() {
        for text in [
            "Open YouTube.",
            "thank you firefox",
            "play music",
            "you tube",
            "Switch to Firefox.",
            "(open) youtube",
            "so open the terminal",
        ] {
            assert!(!non_speech(text), "{text:?}");
        }
    }
}
