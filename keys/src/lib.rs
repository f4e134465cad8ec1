//! Key names and chords: X keysym names (X11 `keysymdef.h` without the `XK_` prefix, as
//! libxkbcommon's `xkb_keysym_from_name` takes them) into keysym values, a chord string
//! (`ctrl+shift+t`) into modifiers and one key, and text into the keysyms that type it.
//!
//! The name table is the `xkeysym` crate's (value → name), read once in reverse. A name is
//! matched exactly first, then without regard to case (so `return` and `pagedown`-style
//! spellings of a real name work), then through [`ALIASES`] (`enter`, `esc`, `pgdn`…).

use std::collections::HashMap;
use std::sync::OnceLock;
use xkeysym::Keysym;

/// The most characters one `type_keys` call types (every character is a press and a
/// release; the runner's rate limit counts them too).
pub const MAX_TYPED: usize = 2000;

/// The most keys one chord holds: four modifiers and one key.
pub const MAX_CHORD_KEYS: usize = 5;

/// The longest chord string accepted, in bytes.
pub const MAX_CHORD_LEN: usize = 128;

/// A modifier of a chord, in the order a chord names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Modifier {
    /// `ctrl`, `control`: keysym `Control_L`, the xkb `Control` modifier.
    Ctrl,
    /// `shift`: `Shift_L`, the `Shift` modifier.
    Shift,
    /// `alt`, `mod1`: `Alt_L`, the `Mod1` modifier.
    Alt,
    /// `super`, `logo`, `win`, `mod4`: `Super_L`, the `Mod4` modifier.
    Super,
}

impl Modifier {
    /// All modifiers in chord order.
    pub const ALL: [Modifier; 4] = [
        Modifier::Ctrl,
        Modifier::Shift,
        Modifier::Alt,
        Modifier::Super,
    ];

    /// The keysym pressed for this modifier.
    pub fn keysym(self) -> Keysym {
        match self {
            Modifier::Ctrl => Keysym::Control_L,
            Modifier::Shift => Keysym::Shift_L,
            Modifier::Alt => Keysym::Alt_L,
            Modifier::Super => Keysym::Super_L,
        }
    }

    /// The xkb real modifier this key sets (the name in a keymap's `modifier_map`).
    pub fn xkb_name(self) -> &'static str {
        match self {
            Modifier::Ctrl => "Control",
            Modifier::Shift => "Shift",
            Modifier::Alt => "Mod1",
            Modifier::Super => "Mod4",
        }
    }

    /// The bit of this modifier in a `wl_keyboard.modifiers` mask under the keymaps this
    /// crate writes (the core X11 order: Shift 0, Lock 1, Control 2, Mod1 3 … Mod5 7).
    pub fn mask(self) -> u32 {
        match self {
            Modifier::Shift => 1,
            Modifier::Ctrl => 1 << 2,
            Modifier::Alt => 1 << 3,
            Modifier::Super => 1 << 6,
        }
    }

    /// The name a chord uses for it.
    pub fn name(self) -> &'static str {
        match self {
            Modifier::Ctrl => "ctrl",
            Modifier::Shift => "shift",
            Modifier::Alt => "alt",
            Modifier::Super => "super",
        }
    }

    fn from_word(word: &str) -> Option<Modifier> {
        Some(match word.to_ascii_lowercase().as_str() {
            "ctrl" | "control" | "control_l" | "control_r" => Modifier::Ctrl,
            "shift" | "shift_l" | "shift_r" => Modifier::Shift,
            "alt" | "mod1" | "alt_l" | "alt_r" => Modifier::Alt,
            "super" | "logo" | "win" | "mod4" | "super_l" | "super_r" => Modifier::Super,
            _ => return None,
        })
    }
}

/// Spellings people and other tools use for keys whose keysym name differs, and the second
/// names `keysymdef.h` gives some values (the name table keeps one name per value). Matched
/// without regard to case.
pub const ALIASES: &[(&str, Keysym)] = &[
    ("page_up", Keysym::Prior),
    ("page_down", Keysym::Next),
    ("kp_page_up", Keysym::KP_Prior),
    ("kp_page_down", Keysym::KP_Next),
    ("script_switch", Keysym::Mode_switch),
    ("enter", Keysym::Return),
    ("esc", Keysym::Escape),
    ("del", Keysym::Delete),
    ("ins", Keysym::Insert),
    ("pgup", Keysym::Prior),
    ("pageup", Keysym::Prior),
    ("pgdn", Keysym::Next),
    ("pagedown", Keysym::Next),
    ("backspace", Keysym::BackSpace),
    ("spacebar", Keysym::space),
    ("printscreen", Keysym::Print),
    ("capslock", Keysym::Caps_Lock),
];

/// A parsed chord: the modifiers held (each once, in [`Modifier::ALL`] order) and the key
/// pressed while they are held. A chord of modifiers only (`super`) has no key and presses
/// the last modifier as the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chord {
    /// Modifiers held, in chord order.
    pub modifiers: Vec<Modifier>,
    /// The key, or `None` for a chord of modifiers only.
    pub key: Option<Keysym>,
}

impl Chord {
    /// The chord written back in canonical form (`ctrl+shift+t`, `super`).
    pub fn canonical(&self) -> String {
        let mut parts: Vec<String> = self.modifiers.iter().map(|m| m.name().into()).collect();
        if let Some(k) = self.key {
            parts.push(keysym_name(k));
        }
        parts.join("+")
    }

    /// Every keysym the chord presses: modifiers, then the key.
    pub fn keysyms(&self) -> Vec<Keysym> {
        let mut out: Vec<Keysym> = self.modifiers.iter().map(|m| m.keysym()).collect();
        out.extend(self.key);
        out
    }
}

/// Why a chord or a text cannot be typed. The message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The chord string is empty.
    #[error(
        "the chord is empty; write X keysym names joined by +, e.g. \"ctrl+shift+t\" or \"Return\""
    )]
    Empty,
    /// Longer than [`MAX_CHORD_LEN`].
    #[error("the chord is {0} bytes long; at most {MAX_CHORD_LEN}")]
    TooLong(usize),
    /// A part is no keysym name.
    #[error(
        "\"{0}\" is no X keysym name (examples: Return, BackSpace, Tab, Escape, F5, Left, Page_Down, a, 1, space, XF86AudioPlay)"
    )]
    UnknownKey(String),
    /// Two parts are keys (not modifiers).
    #[error(
        "\"{0}\" and \"{1}\" are two keys; a chord is up to four modifiers (ctrl, shift, alt, super) and one key"
    )]
    TwoKeys(String, String),
    /// More parts than [`MAX_CHORD_KEYS`].
    #[error("the chord has {0} keys; at most {MAX_CHORD_KEYS} (four modifiers and one key)")]
    TooManyKeys(usize),
    /// A part is empty (`ctrl++t`, a trailing `+`).
    #[error("the chord {0:?} has an empty part; write \"plus\" for the + key")]
    EmptyPart(String),
    /// Text with a control character (or a noncharacter) that no key types.
    #[error("the text holds U+{0:04X}, a control character or noncharacter that no key types")]
    ControlCharacter(u32),
    /// Text longer than [`MAX_TYPED`].
    #[error("the text has {0} characters; keystroke typing takes at most {MAX_TYPED}")]
    TextTooLong(usize),
    /// Empty text.
    #[error("the text is empty")]
    EmptyText,
    /// A chord that switches the virtual terminal or ends the session.
    #[error("{0} switches the virtual terminal or ends the session; Utter does not press it")]
    SessionKey(String),
}

fn names() -> &'static HashMap<String, Keysym> {
    static NAMES: OnceLock<HashMap<String, Keysym>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut map = HashMap::new();
        // The ranges keysymdef.h names: the core set (Latin-1 to the function keys), the
        // named Unicode keysyms, and the XFree86 vendor keys (media, brightness…).
        let ranges = [
            0x0000_0000u32..=0x0000_ffff,
            0x0100_0000..=0x0101_0000,
            0x1008_fe00..=0x1008_ffff,
        ];
        for range in ranges {
            for raw in range {
                let sym = Keysym::new(raw);
                if let Some(name) = sym.name() {
                    let name = xkb_name(name);
                    // Several names share a value; keep the first (keysymdef's own order
                    // gives the canonical one first) and let every name find its value.
                    map.entry(name).or_insert(sym);
                }
            }
        }
        map
    })
}

/// The name libxkbcommon uses for a `keysymdef.h` constant name: `XK_Return` is `Return`,
/// `XF86XK_AudioPlay` is `XF86AudioPlay`.
fn xkb_name(constant: &str) -> String {
    if let Some(rest) = constant.strip_prefix("XF86XK_") {
        return format!("XF86{rest}");
    }
    constant.strip_prefix("XK_").unwrap_or(constant).to_owned()
}

fn lowercase_names() -> &'static HashMap<String, Keysym> {
    static LOWER: OnceLock<HashMap<String, Keysym>> = OnceLock::new();
    LOWER.get_or_init(|| {
        let mut map = HashMap::new();
        // Lower-case letters win over their capitals ("a" is `a`, not `A`).
        let mut all: Vec<(&String, &Keysym)> = names().iter().collect();
        all.sort_by_key(|(name, _)| (name.chars().any(|c| c.is_ascii_uppercase()), *name));
        for (name, sym) in all {
            map.entry(name.to_ascii_lowercase()).or_insert(*sym);
        }
        map
    })
}

/// The keysym of an X keysym name (`Return`, `a`, `F5`, `XF86AudioPlay`), of an alias in
/// [`ALIASES`], of a Unicode name `U20AC` (or `U+20AC` outside a chord, where `+` joins
/// keys), or of a single character (`é`, `+`). `None` when it names no keysym, and for the
/// keysyms of [`is_refused`].
pub fn keysym_from_name(name: &str) -> Option<Keysym> {
    keysym_from_any_name(name).filter(|s| !is_refused(*s))
}

/// Keysyms no chord may press: `NoSymbol` and `VoidSymbol` (no key; a keymap would read
/// `0` as the digit), and the keys that end or leave the session rather than act in an
/// app: `Terminate_Server`, the `XF86Switch_VT_*` keys, power, sleep and log-off keys.
pub fn is_refused(sym: Keysym) -> bool {
    let raw = sym.raw();
    raw == 0
        || sym == Keysym::VoidSymbol
        || sym == Keysym::Terminate_Server
        || (Keysym::XF86_Switch_VT_1.raw()..=Keysym::XF86_Switch_VT_12.raw()).contains(&raw)
        || [
            Keysym::XF86_PowerOff,
            Keysym::XF86_PowerDown,
            Keysym::XF86_Sleep,
            Keysym::XF86_Suspend,
            Keysym::XF86_Hibernate,
            Keysym::XF86_LogOff,
            Keysym::XF86_Standby,
        ]
        .contains(&sym)
}

fn keysym_from_any_name(name: &str) -> Option<Keysym> {
    if name.is_empty() || name.len() > 64 {
        return None;
    }
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return char_keysym(c);
    }
    if let Some(sym) = names().get(name) {
        return Some(*sym);
    }
    let lower = name.to_ascii_lowercase();
    if let Some(hex) = lower
        .strip_prefix("u+")
        .or_else(|| lower.strip_prefix('u').filter(|h| h.len() >= 4))
    {
        if let Ok(cp) = u32::from_str_radix(hex, 16) {
            return char::from_u32(cp).and_then(char_keysym);
        }
    }
    if let Some(sym) = lowercase_names().get(&lower) {
        return Some(*sym);
    }
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == lower)
        .map(|(_, sym)| *sym)
}

/// The keysym that types one character: `\n` is `Return`, `\t` is `Tab`, other control
/// characters have none.
pub fn char_keysym(c: char) -> Option<Keysym> {
    match c {
        '\n' | '\r' => Some(Keysym::Return),
        '\t' => Some(Keysym::Tab),
        c if c.is_control() => None,
        // Noncharacters (U+FDD0–U+FDEF, U+xFFFE, U+xFFFF) are no text.
        c if ('\u{FDD0}'..='\u{FDEF}').contains(&c) || (c as u32 & 0xFFFE) == 0xFFFE => None,
        c => {
            let sym = Keysym::from_char(c);
            (sym != Keysym::NoSymbol).then_some(sym)
        }
    }
}

/// The canonical name of a keysym (`Return`), or `U20AC` for an unnamed Unicode keysym,
/// or `0x…` for anything else.
pub fn keysym_name(sym: Keysym) -> String {
    if let Some(name) = sym.name() {
        return xkb_name(name);
    }
    let raw = sym.raw();
    if (0x0100_0000..=0x0110_ffff).contains(&raw) {
        return format!("U{:04X}", raw - 0x0100_0000);
    }
    format!("0x{raw:08x}")
}

/// Parse a chord: X keysym names joined by `+`, up to four modifiers and one key, in any
/// order (`ctrl+shift+t`, `shift+ctrl+T`, `super+Left`, `alt+F4`, `Return`, `super`).
/// `plus` names the `+` key. A letter key with `shift` is written lower-case in the result
/// (`shift+a` presses the `a` key with Shift held; the application sees `A`).
///
/// # Errors
/// [`KeyError`], each naming the part at fault.
pub fn parse_chord(chord: &str) -> Result<Chord, KeyError> {
    let chord = chord.trim();
    if chord.is_empty() {
        return Err(KeyError::Empty);
    }
    if chord.len() > MAX_CHORD_LEN {
        return Err(KeyError::TooLong(chord.len()));
    }
    // A lone "+" is the plus key; so is a trailing "++" ("ctrl++").
    let (body, plus_key) = if chord == "+" {
        ("", true)
    } else if let Some(b) = chord.strip_suffix("++") {
        (b, true)
    } else {
        (chord, false)
    };
    let mut parts: Vec<&str> = if body.is_empty() {
        Vec::new()
    } else {
        body.split('+').map(str::trim).collect()
    };
    if plus_key {
        parts.push("plus");
    }
    if parts.len() > MAX_CHORD_KEYS {
        return Err(KeyError::TooManyKeys(parts.len()));
    }
    if parts.iter().any(|p| p.is_empty()) {
        return Err(KeyError::EmptyPart(chord.to_owned()));
    }
    let mut modifiers = Vec::new();
    let mut key: Option<(Keysym, &str)> = None;
    for (i, part) in parts.iter().enumerate() {
        // The last part is the key even when it names a modifier alone ("super").
        let last = i + 1 == parts.len();
        if let Some(m) = Modifier::from_word(part).filter(|_| !last || parts.len() > 1) {
            if !modifiers.contains(&m) {
                modifiers.push(m);
            }
            continue;
        }
        let sym = if last && Modifier::from_word(part).is_some() {
            None
        } else {
            Some(keysym_from_name(part).ok_or_else(|| KeyError::UnknownKey((*part).into()))?)
        };
        match (sym, key) {
            (None, _) => {
                let m = Modifier::from_word(part).expect("checked above");
                if !modifiers.contains(&m) {
                    modifiers.push(m);
                }
            }
            (Some(_), Some((_, first))) => {
                return Err(KeyError::TwoKeys(first.into(), (*part).into()));
            }
            (Some(s), None) => key = Some((s, part)),
        }
    }
    modifiers.sort();
    if modifiers.contains(&Modifier::Ctrl) && modifiers.contains(&Modifier::Alt) {
        if let Some((sym, part)) = key {
            let f = sym.raw().wrapping_sub(Keysym::F1.raw());
            if f < 12 || sym == Keysym::BackSpace || sym == Keysym::Delete {
                return Err(KeyError::SessionKey(format!("ctrl+alt+{part}")));
            }
        }
    }
    let key = key.map(|(sym, _)| {
        // With Shift held, a capital names its key: the key of `A` is `a`.
        if modifiers.contains(&Modifier::Shift) {
            lower_letter(sym)
        } else {
            sym
        }
    });
    Ok(Chord { modifiers, key })
}

fn lower_letter(sym: Keysym) -> Keysym {
    match sym.key_char() {
        Some(c) if c.is_uppercase() => {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) => char_keysym(l).unwrap_or(sym),
                _ => sym,
            }
        }
        _ => sym,
    }
}

/// The keysyms that type `text`, one per character.
///
/// # Errors
/// [`KeyError::EmptyText`], [`KeyError::TextTooLong`] (over [`MAX_TYPED`] characters),
/// [`KeyError::ControlCharacter`].
pub fn text_keysyms(text: &str) -> Result<Vec<Keysym>, KeyError> {
    if text.is_empty() {
        return Err(KeyError::EmptyText);
    }
    let n = text.chars().count();
    if n > MAX_TYPED {
        return Err(KeyError::TextTooLong(n));
    }
    // "\r\n" is one Return.
    let text = text.replace("\r\n", "\n");
    text.chars()
        .map(|c| char_keysym(c).ok_or(KeyError::ControlCharacter(c as u32)))
        .collect()
}

/// The keysym of a push-to-talk key for the keyboard monitor (`[ptt] keyboard_monitor_key`):
/// a keysym number written `0x…` (`wev` and `xev` print them), or the X name of a key that
/// types nothing and modifies nothing, so that grabbing it takes no letter or modifier from
/// the person: a function key `F1`…`F35` (`F13` is 0xffca), another key of the function
/// block (`Pause`, `Scroll_Lock`, `Insert`, `Menu`, `Page_Up`, keypad keys …) or a vendor key
/// (`XF86AudioMicMute`, `XF86Launch5`, `XF86Tools` …). Names compare without regard to case.
///
/// # Errors
/// A sentence naming the bad name and giving valid examples.
pub fn grab_keysym(name: &str) -> Result<u32, String> {
    let name = name.trim();
    let bad = || {
        format!(
            "{name:?} is not a keysym push-to-talk can grab; use an XKB keysym name such as F13, F14, Pause, Scroll_Lock, Insert, Menu or XF86AudioMicMute, or a keysym number such as 0xffca (wev or xev print them)"
        )
    };
    if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
        return match u32::from_str_radix(hex, 16) {
            // 0 is NoSymbol; above 0x1ffffff no keysym is defined.
            Ok(v) if v != 0 && v <= 0x1ff_ffff => Ok(v),
            _ => Err(bad()),
        };
    }
    if name.chars().count() < 2 {
        return Err(bad());
    }
    let sym = names()
        .get(name)
        .or_else(|| lowercase_names().get(&name.to_ascii_lowercase()))
        .copied()
        .ok_or_else(bad)?;
    let raw = sym.raw();
    // The function block (TTY keys, cursor and keypad keys, F1…F35) without the modifiers
    // (Shift_L … Hyper_R, 0xffe1…0xffee), and the XFree86 vendor keys.
    let function_block = (0xff00..=0xffff).contains(&raw) && !(0xffe1..=0xffee).contains(&raw);
    let vendor = (0x1008_fe00..=0x1008_ffff).contains(&raw);
    if (function_block || vendor) && !is_refused(sym) && raw != 0xffff {
        Ok(raw)
    } else {
        Err(bad())
    }
}

/// Check the shape of an evdev key name such as `KEY_F13` or `KEY_RIGHTCTRL` (the names of
/// `linux/input-event-codes.h`) for `[ptt] evdev_key`: `KEY_` or `BTN_` and upper-case
/// letters, digits or `_`. The evdev trigger resolves the name to a code and reports an
/// unknown one in its status.
///
/// # Errors
/// A sentence naming the bad name and valid examples.
pub fn check_evdev_key_name(name: &str) -> Result<(), String> {
    let name = name.trim();
    let body = name
        .strip_prefix("KEY_")
        .or_else(|| name.strip_prefix("BTN_"));
    match body {
        Some(b)
            if !b.is_empty()
                && b.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_') =>
        {
            Ok(())
        }
        _ => Err(format!(
            "{name:?} is not an evdev key name; use a name from linux/input-event-codes.h such as KEY_F13, KEY_RIGHTCTRL, KEY_RIGHTALT, KEY_PAUSE or KEY_SCROLLLOCK"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn push_to_talk_keys_are_keys_that_type_and_modify_nothing() {
        assert_eq!(grab_keysym("F13"), Ok(0xffca));
        assert_eq!(grab_keysym("F1"), Ok(0xffbe));
        assert_eq!(grab_keysym("f35"), Ok(0xffe0));
        assert_eq!(grab_keysym(" Pause "), Ok(0xff13));
        assert_eq!(grab_keysym("scroll_lock"), Ok(0xff14));
        assert_eq!(grab_keysym("Insert"), Ok(0xff63));
        assert_eq!(grab_keysym("Menu"), Ok(0xff67));
        assert_eq!(grab_keysym("XF86AudioMicMute"), Ok(0x1008_ffb2));
        assert_eq!(grab_keysym("XF86Launch5"), Ok(0x1008_ff45));
        assert_eq!(grab_keysym("0xffca"), Ok(0xffca));
        for bad in [
            "F0",
            "F36",
            "F013",
            "KEY_F13",
            "0x0",
            "0xzz",
            "0x2000000",
            "",
            "Shift_L",
            "Control_R",
            "a",
            "A",
            "space",
            "eacute",
            "XF86PowerOff",
            "Terminate_Server",
        ] {
            let e = grab_keysym(bad).unwrap_err();
            assert!(e.contains("F13") && e.contains("0xffca"), "{bad}: {e}");
        }
    }

    #[test]
    fn evdev_key_names_are_checked_and_a_bad_one_names_examples() {
        assert!(check_evdev_key_name("KEY_F13").is_ok());
        assert!(check_evdev_key_name("KEY_RIGHTCTRL").is_ok());
        assert!(check_evdev_key_name("BTN_SIDE").is_ok());
        for bad in ["F13", "KEY_", "key_f13", "KEY_F13;rm", ""] {
            let e = check_evdev_key_name(bad).unwrap_err();
            assert!(e.contains("KEY_F13") && e.contains("KEY_RIGHTCTRL"), "{e}");
        }
    }

    use super::*;

    #[test]
    fn names_resolve_to_keysyms() {
        assert_eq!(keysym_from_name("Return"), Some(Keysym::Return));
        assert_eq!(keysym_from_name("return"), Some(Keysym::Return));
        assert_eq!(keysym_from_name("enter"), Some(Keysym::Return));
        assert_eq!(keysym_from_name("BackSpace"), Some(Keysym::BackSpace));
        assert_eq!(keysym_from_name("Page_Down"), Some(Keysym::Next));
        assert_eq!(keysym_from_name("F5"), Some(Keysym::F5));
        assert_eq!(keysym_from_name("f24"), Some(Keysym::F24));
        assert_eq!(keysym_from_name("a"), Some(Keysym::a));
        assert_eq!(keysym_from_name("A"), Some(Keysym::A));
        assert_eq!(keysym_from_name("plus"), Some(Keysym::plus));
        assert_eq!(
            keysym_from_name("XF86AudioPlay"),
            Some(Keysym::XF86_AudioPlay)
        );
        assert_eq!(keysym_from_name("U20AC"), Some(Keysym::EuroSign));
        assert_eq!(keysym_from_name("é"), Some(Keysym::eacute));
        assert_eq!(keysym_from_name("NoSuchKey"), None);
        for refused in [
            "NoSymbol",
            "nosymbol",
            "VoidSymbol",
            "Terminate_Server",
            "XF86Switch_VT_1",
            "XF86PowerOff",
            "XF86Sleep",
        ] {
            assert_eq!(keysym_from_name(refused), None, "{refused}");
        }
        assert_eq!(keysym_from_name(""), None);
        assert_eq!(keysym_from_name(&"x".repeat(1000)), None);
    }

    #[test]
    fn chords_parse_in_any_order_and_print_canonically() {
        let c = parse_chord("shift+ctrl+T").unwrap();
        assert_eq!(c.modifiers, [Modifier::Ctrl, Modifier::Shift]);
        assert_eq!(c.key, Some(Keysym::t));
        assert_eq!(c.canonical(), "ctrl+shift+t");
        assert_eq!(parse_chord("super+Left").unwrap().canonical(), "super+Left");
        assert_eq!(parse_chord("alt+F4").unwrap().canonical(), "alt+F4");
        assert_eq!(parse_chord("Return").unwrap().canonical(), "Return");
        let sup = parse_chord("super").unwrap();
        assert_eq!(sup.modifiers, [Modifier::Super]);
        assert_eq!(sup.key, None);
        assert_eq!(sup.keysyms(), [Keysym::Super_L]);
        assert_eq!(parse_chord("ctrl++").unwrap().key, Some(Keysym::plus));
        assert_eq!(parse_chord("+").unwrap().key, Some(Keysym::plus));
        assert_eq!(parse_chord("ctrl+shift").unwrap().keysyms().len(), 2);
    }

    #[test]
    fn bad_chords_say_what_is_wrong() {
        assert_eq!(parse_chord(""), Err(KeyError::Empty));
        assert_eq!(
            parse_chord("ctrl+Nope"),
            Err(KeyError::UnknownKey("Nope".into()))
        );
        assert_eq!(
            parse_chord("a+b"),
            Err(KeyError::TwoKeys("a".into(), "b".into()))
        );
        assert_eq!(
            parse_chord("ctrl+shift+alt+super+a+b+c+d"),
            Err(KeyError::TooManyKeys(8))
        );
        assert!(matches!(
            parse_chord("ctrl++t"),
            Err(KeyError::EmptyPart(_))
        ));
        assert!(matches!(
            parse_chord(&"a".repeat(500)),
            Err(KeyError::TooLong(500))
        ));
        for e in [
            KeyError::UnknownKey("Nope".into()),
            KeyError::TooManyKeys(8),
        ] {
            assert!(e.to_string().len() > 20, "{e}");
        }
    }

    #[test]
    fn text_becomes_one_keysym_per_character() {
        let syms = text_keysyms("Hi é\n\t€").unwrap();
        assert_eq!(
            syms,
            [
                Keysym::H,
                Keysym::i,
                Keysym::space,
                Keysym::eacute,
                Keysym::Return,
                Keysym::Tab,
                Keysym::EuroSign
            ]
        );
        assert_eq!(text_keysyms("a\r\nb").unwrap().len(), 3);
        assert_eq!(text_keysyms(""), Err(KeyError::EmptyText));
        assert_eq!(text_keysyms("a\u{7}"), Err(KeyError::ControlCharacter(7)));
        assert_eq!(
            text_keysyms(&"x".repeat(MAX_TYPED + 1)),
            Err(KeyError::TextTooLong(MAX_TYPED + 1))
        );
    }

    #[test]
    fn unicode_keysyms_have_names() {
        assert_eq!(keysym_name(Keysym::Return), "Return");
        assert_eq!(keysym_name(Keysym::XF86_AudioPlay), "XF86AudioPlay");
        let smile = char_keysym('😀').unwrap();
        assert_eq!(keysym_name(smile), "U1F600");
    }
}
