//! Spoken numbers as digits, for the phrase tables.
//!
//! People say "workspace two", "the third workspace", "workspace 3" and "the 3rd workspace"
//! for the same thing, and speech-to-text writes any of them. [`digits`] rewrites every
//! cardinal ("two", "twenty one"), ordinal ("third", "twenty-first" once normalised to
//! "twenty first") and digit ordinal ("3rd") as plain digits, so a table needs one entry
//! with a number slot instead of a hundred. Words are understood from zero to ninety-nine;
//! digits are left as they are.
//!
//! The rewrite is only ever applied to copies used for table lookups: the other rules see
//! the utterance as it was, so an application called "One Note" is not disturbed.

/// Cardinal words below twenty, by value.
const UNITS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];

/// Ordinal words below twenty, by value (index 0 unused).
const UNIT_ORDINALS: &[&str] = &[
    "",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
];

/// Tens from twenty, as cardinals and as ordinals, with their value.
const TENS: &[(&str, &str, u32)] = &[
    ("twenty", "twentieth", 20),
    ("thirty", "thirtieth", 30),
    ("forty", "fortieth", 40),
    ("fifty", "fiftieth", 50),
    ("sixty", "sixtieth", 60),
    ("seventy", "seventieth", 70),
    ("eighty", "eightieth", 80),
    ("ninety", "ninetieth", 90),
];

/// The value of one word below twenty, cardinal or ordinal.
fn unit(word: &str) -> Option<u32> {
    let position = |list: &[&str]| list.iter().position(|w| *w == word);
    position(UNITS)
        .or_else(|| position(UNIT_ORDINALS).filter(|&i| i > 0))
        .and_then(|i| u32::try_from(i).ok())
}

/// The value of a tens word ("twenty", "fortieth").
fn tens(word: &str) -> Option<u32> {
    TENS.iter()
        .find(|(cardinal, ordinal, _)| *cardinal == word || *ordinal == word)
        .map(|(_, _, value)| *value)
}

/// True for the cardinal form of a tens word, which may be followed by a unit.
fn is_tens_cardinal(word: &str) -> bool {
    TENS.iter().any(|(cardinal, _, _)| *cardinal == word)
}

/// "3rd", "21st", "2nd", "4th": the digits of a digit ordinal.
fn digit_ordinal(word: &str) -> Option<&str> {
    let split = word.find(|c: char| !c.is_ascii_digit())?;
    let (number, suffix) = word.split_at(split);
    (!number.is_empty() && matches!(suffix, "st" | "nd" | "rd" | "th")).then_some(number)
}

/// `text` (normalised: lowercase words separated by single spaces) with every spoken number
/// written as digits: `workspace twenty one` → `workspace 21`, `the third workspace` →
/// `the 3 workspace`, `the 2nd one` → `the 2 1`.
pub fn digits(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if let Some(value) = tens(word) {
            // "twenty one", "twenty first"; a unit above nine does not combine.
            let next = words
                .get(i + 1)
                .and_then(|w| unit(w))
                .filter(|u| (1..10).contains(u));
            match next {
                Some(u) if is_tens_cardinal(word) => {
                    out.push((value + u).to_string());
                    i += 2;
                }
                _ => {
                    out.push(value.to_string());
                    i += 1;
                }
            }
            continue;
        }
        if let Some(value) = unit(word) {
            out.push(value.to_string());
        } else if let Some(number) = digit_ordinal(word) {
            out.push(number.to_owned());
        } else {
            out.push(word.to_owned());
        }
        i += 1;
    }
    out.join(" ")
}

/// `text` (words as said, single-spaced) with each number said around a spoken "dot"
/// written in digits and joined by the dot: "ping one dot one dot one dot one" is "ping
/// 1.1.1.1", "ten dot zero dot zero dot twenty" is "10.0.0.20", "version two dot five" is
/// "version 2.5". A dot needs a number on both sides (one word each, digits or a number
/// word up to ninety nine); other words are kept as said, and a text without such a run is
/// returned unchanged.
pub fn dotted_numbers(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let number = |w: &str| -> Option<String> {
        let w = w.trim_end_matches([',', '.', '?', '!']);
        if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) {
            return Some(w.to_owned());
        }
        let lower = w.to_lowercase();
        let lower = if lower == "oh" {
            "zero".to_owned()
        } else {
            lower
        };
        unit(&lower).or_else(|| tens(&lower)).map(|n| n.to_string())
    };
    let is_dot = |w: &str| w.eq_ignore_ascii_case("dot") || w.eq_ignore_ascii_case("point");
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut changed = false;
    let mut i = 0;
    while i < words.len() {
        // A run: number (dot number)+.
        let mut end = i;
        let mut run = Vec::new();
        if let Some(first) = number(words[i]) {
            run.push(first);
            while end + 2 < words.len() && is_dot(words[end + 1]) {
                match number(words[end + 2]) {
                    Some(next) => {
                        run.push(next);
                        end += 2;
                    }
                    None => break,
                }
            }
        }
        if run.len() >= 2 {
            out.push(run.join("."));
            changed = true;
            i = end + 1;
        } else {
            out.push(words[i].to_owned());
            i += 1;
        }
    }
    // Without a run the text stays exactly as said (spaces and all).
    if changed {
        out.join(" ")
    } else {
        text.to_owned()
    }
}

/// A whole number said as people say numbers (normalised words): "120", "forty two",
/// digit groups read together ("one twenty" is 120, "one two three" 123, "three oh five"
/// 305), or with a scale ("one hundred and twenty", "two thousand five hundred"; "and"
/// only after a scale). `None` for anything else, and above 10^12.
pub fn said_number(said: &str) -> Option<u64> {
    // "oh" is a zero among digits, word by word ("three oh oh five").
    let said: Vec<&str> = said
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| if w == "oh" { "0" } else { w })
        .collect();
    let written = digits(&said.join(" "));
    let parts: Vec<&str> = written.split(' ').filter(|w| !w.is_empty()).collect();
    let value = |w: &str| {
        w.parse::<u64>()
            .ok()
            .filter(|_| w.chars().all(|c| c.is_ascii_digit()))
    };
    // "one hundred and": the number is not finished.
    if parts.last() == Some(&"and") {
        return None;
    }
    let (mut total, mut group, mut scaled) = (0u64, 0u64, false);
    let mut concat = String::new();
    for (i, part) in parts.iter().enumerate() {
        match *part {
            "hundred" => {
                group = group.max(1).checked_mul(100)?;
                scaled = true;
            }
            "thousand" | "million" => {
                let scale = if *part == "thousand" {
                    1_000
                } else {
                    1_000_000
                };
                total = total.checked_add(group.max(1).checked_mul(scale)?)?;
                group = 0;
                scaled = true;
            }
            "and" if i > 0 && matches!(parts[i - 1], "hundred" | "thousand" | "million") => {}
            w => {
                group = group.checked_add(value(w)?)?;
                concat.push_str(w);
                if concat.len() > 12 {
                    return None;
                }
            }
        }
    }
    let n = if scaled {
        total.checked_add(group)?
    } else {
        concat.parse().ok()?
    };
    (n <= 1_000_000_000_000).then_some(n)
}

/// A whole word that is a number `1..=max` in plain digits, as [`digits`] writes them.
pub fn slot_value(word: &str, max: u32) -> Option<u32> {
    if word.is_empty() || word.len() > 4 || !word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    word.parse::<u32>().ok().filter(|n| (1..=max).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_read_as_people_say_numbers() {
        for (said, n) in [
            ("120", 120),
            ("forty two", 42),
            ("one twenty", 120),
            ("one two three", 123),
            ("three oh five", 305),
            ("three oh oh five", 3005),
            ("one hundred and twenty", 120),
            ("two thousand five hundred", 2500),
        ] {
            assert_eq!(said_number(said), Some(n), "{said}");
        }
        for said in [
            "one and two",
            "the end",
            "",
            "and",
            "one hundred and",
            "nine nine nine nine nine nine nine nine nine nine nine nine nine",
        ] {
            assert_eq!(said_number(said), None, "{said}");
        }
    }

    #[test]
    fn cardinals_and_ordinals_become_digits() {
        let cases = [
            ("workspace two", "workspace 2"),
            ("workspace number three", "workspace number 3"),
            ("the third workspace", "the 3 workspace"),
            ("the second workspace", "the 2 workspace"),
            ("workspace twenty", "workspace 20"),
            ("the twentieth workspace", "the 20 workspace"),
            ("workspace twenty one", "workspace 21"),
            ("the twenty first workspace", "the 21 workspace"),
            ("workspace ninety nine", "workspace 99"),
            ("workspace nineteen", "workspace 19"),
            ("the twelfth one", "the 12 1"),
            ("the 3rd workspace", "the 3 workspace"),
            ("the 21st workspace", "the 21 workspace"),
            ("workspace 7", "workspace 7"),
            ("go to workspace", "go to workspace"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(digits(text), want, "{text}");
        }
    }

    #[test]
    fn tens_combine_only_with_small_units() {
        // "twenty twelve" is two numbers, and an ordinal tens word takes no unit.
        assert_eq!(digits("twenty twelve"), "20 12");
        assert_eq!(digits("twentieth one"), "20 1");
        assert_eq!(digits("thirty"), "30");
        // Letters after digits that are no ordinal suffix stay a word.
        assert_eq!(digits("3x 4k"), "3x 4k");
    }

    #[test]
    fn every_number_to_twenty_is_understood_both_ways() {
        for n in 1..=20u32 {
            let cardinal = if n < 20 { UNITS[n as usize] } else { "twenty" };
            let ordinal = if n < 20 {
                UNIT_ORDINALS[n as usize]
            } else {
                "twentieth"
            };
            assert_eq!(digits(cardinal), n.to_string());
            assert_eq!(digits(ordinal), n.to_string());
        }
    }

    #[test]
    fn slot_values() {
        assert_eq!(slot_value("3", 255), Some(3));
        assert_eq!(slot_value("255", 255), Some(255));
        assert_eq!(slot_value("256", 255), None);
        assert_eq!(slot_value("0", 255), None);
        assert_eq!(slot_value("99999999999999999999", 255), None);
        assert_eq!(slot_value("three", 255), None);
        assert_eq!(slot_value("", 255), None);
    }
}
