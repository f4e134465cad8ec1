//! The xkb keymap the virtual keyboard uploads (`zwp_virtual_keyboard_v1.keymap`, format
//! `xkb_v1`): one key per keysym that a call needs, so what is typed does not depend on the
//! person's layout. The compositor compiles the text with libxkbcommon and hands the result
//! to the focused application, which turns each key back into its keysym.
//!
//! Layout of a keymap: evdev code `1 + i` (xkb keycode `9 + i`, since xkb keycodes are evdev
//! codes plus 8) carries the `i`-th keysym. The four modifier keys (Control_L, Shift_L,
//! Alt_L, Super_L) always come first and are bound to their real modifiers with
//! `modifier_map`, so a held modifier changes the xkb state as a physical one does. Keysyms
//! are written as numbers (`0x1000e9`), which libxkbcommon takes for any keysym value.

use crate::keys::Modifier;
use std::collections::HashMap;
use xkeysym::Keysym;

/// The most keys one keymap carries: xkb keycodes stop at 255 for X11 clients (Xwayland),
/// evdev codes start at 1.
pub const MAX_KEYS: usize = 240;

/// The keysyms the first keymap carries, after the modifiers: printable ASCII, the editing,
/// navigation and function keys, the common accented Latin letters and the media keys.
/// Almost every chord and text needs only these, so the keymap rarely changes: GTK 3 matches
/// its key bindings (`ctrl+a`) through key tables it builds from the first keymap and does
/// not always rebuild, so a key added later types but may not trigger bindings.
pub fn base_keysyms() -> Vec<Keysym> {
    let mut out: Vec<Keysym> = (0x20u32..=0x7e).map(Keysym::new).collect();
    out.extend([
        Keysym::Return,
        Keysym::Tab,
        Keysym::BackSpace,
        Keysym::Escape,
        Keysym::Delete,
        Keysym::Insert,
        Keysym::Home,
        Keysym::End,
        Keysym::Prior,
        Keysym::Next,
        Keysym::Left,
        Keysym::Right,
        Keysym::Up,
        Keysym::Down,
        Keysym::Print,
        Keysym::Menu,
        Keysym::Caps_Lock,
        Keysym::ISO_Left_Tab,
        Keysym::XF86_AudioPlay,
        Keysym::XF86_AudioPause,
        Keysym::XF86_AudioNext,
        Keysym::XF86_AudioPrev,
        Keysym::XF86_AudioStop,
        Keysym::XF86_AudioMute,
        Keysym::XF86_AudioRaiseVolume,
        Keysym::XF86_AudioLowerVolume,
        Keysym::XF86_MonBrightnessUp,
        Keysym::XF86_MonBrightnessDown,
    ]);
    out.extend((0..24).map(|i| Keysym::new(Keysym::F1.raw() + i)));
    // à á â ã ä å æ ç è é ê ë ì í î ï ñ ò ó ô õ ö ø ù ú û ü ý ß and the capitals of the
    // most common ones.
    for c in "àáâãäåæçèéêëìíîïñòóôõöøùúûüýßÀÄÇÉÈÖÜÑ€".chars()
    {
        out.extend(crate::keys::char_keysym(c));
    }
    out
}

/// A keymap and where each of its keysyms sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    /// The keymap text, without the terminating NUL the protocol wants.
    pub text: String,
    codes: HashMap<u32, u32>,
}

impl Keymap {
    /// A keymap holding the modifier keys and `keysyms` (duplicates are placed once).
    /// `None` when they do not fit in [`MAX_KEYS`] keys.
    pub fn new(keysyms: &[Keysym]) -> Option<Keymap> {
        let mut order: Vec<Keysym> = Modifier::ALL.iter().map(|m| m.keysym()).collect();
        for &sym in keysyms {
            if !order.contains(&sym) {
                order.push(sym);
            }
        }
        if order.len() > MAX_KEYS {
            return None;
        }
        let mut codes = HashMap::new();
        let mut keycodes = String::new();
        let mut symbols = String::new();
        for (i, sym) in order.iter().enumerate() {
            let evdev = 1 + i as u32;
            let xkb = evdev + 8;
            codes.insert(sym.raw(), evdev);
            keycodes.push_str(&format!("    <K{xkb}> = {xkb};\n"));
            let levels = match upper_of(*sym) {
                // A letter has its capital on the Shift level, as on a physical keyboard,
                // so a chord with Shift (`ctrl+shift+t`) reaches the application as `T`.
                Some(upper) => format!("0x{:x}, 0x{:x}", sym.raw(), upper.raw()),
                None => format!("0x{:x}", sym.raw()),
            };
            symbols.push_str(&format!("    key <K{xkb}> {{ [ {levels} ] }};\n"));
        }
        for (i, m) in Modifier::ALL.iter().enumerate() {
            symbols.push_str(&format!(
                "    modifier_map {} {{ <K{}> }};\n",
                m.xkb_name(),
                9 + i
            ));
        }
        let max = 8 + order.len();
        let text = format!(
            "xkb_keymap {{\n  xkb_keycodes \"utter\" {{\n    minimum = 8;\n    maximum = {max};\n{keycodes}  }};\n  \
             xkb_types \"utter\" {{ include \"complete\" }};\n  \
             xkb_compatibility \"utter\" {{ include \"complete\" }};\n  \
             xkb_symbols \"utter\" {{\n{symbols}  }};\n}};\n"
        );
        Some(Keymap { text, codes })
    }

    /// The evdev code that types `sym` under this keymap.
    pub fn code(&self, sym: Keysym) -> Option<u32> {
        self.codes.get(&sym.raw()).copied()
    }

    /// How many keys it carries.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether it carries no key (never: the modifiers are always there).
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

/// The capital of a lower-case letter keysym, when it has a keysym of its own.
fn upper_of(sym: Keysym) -> Option<Keysym> {
    let c = sym.key_char().filter(|c| c.is_lowercase())?;
    let mut upper = c.to_uppercase();
    let (Some(u), None) = (upper.next(), upper.next()) else {
        return None;
    };
    let upper = crate::keys::char_keysym(u)?;
    (upper != sym).then_some(upper)
}

/// Split a run of keysyms into pieces that each fit one keymap, in order.
pub fn chunks(keysyms: &[Keysym]) -> Vec<&[Keysym]> {
    let room = MAX_KEYS - Modifier::ALL.len();
    let mut out = Vec::new();
    let mut start = 0;
    let mut seen: Vec<u32> = Vec::new();
    for (i, sym) in keysyms.iter().enumerate() {
        if !seen.contains(&sym.raw()) {
            if seen.len() == room {
                out.push(&keysyms[start..i]);
                start = i;
                seen.clear();
            }
            seen.push(sym.raw());
        }
    }
    if start < keysyms.len() {
        out.push(&keysyms[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_come_first_and_keys_are_placed_once() {
        let map = Keymap::new(&[Keysym::a, Keysym::b, Keysym::a, Keysym::Control_L]).unwrap();
        assert_eq!(map.len(), 6);
        assert_eq!(map.code(Keysym::Control_L), Some(1));
        assert_eq!(map.code(Keysym::Super_L), Some(4));
        assert_eq!(map.code(Keysym::a), Some(5));
        assert_eq!(map.code(Keysym::b), Some(6));
        assert_eq!(map.code(Keysym::c), None);
        assert!(map.text.contains("maximum = 14;"));
        assert!(map.text.contains("key <K13> { [ 0x61, 0x41 ] };"));
        let digits = Keymap::new(&[Keysym::_1, Keysym::Return]).unwrap();
        assert!(digits.text.contains("key <K13> { [ 0x31 ] };"));
        assert!(map.text.contains("modifier_map Control { <K9> };"));
        assert!(map.text.contains("modifier_map Mod4 { <K12> };"));
    }

    #[test]
    fn the_base_keymap_fits_with_room_to_grow() {
        let base = base_keysyms();
        let map = Keymap::new(&base).unwrap();
        assert!(map.len() + 40 < MAX_KEYS, "{} keys", map.len());
        assert!(map.code(Keysym::a).is_some() && map.code(Keysym::F24).is_some());
    }

    #[test]
    fn too_many_keysyms_split_into_keymaps_that_fit() {
        let syms: Vec<Keysym> = (0..600u32).map(|i| Keysym::new(0x0100_4e00 + i)).collect();
        assert!(Keymap::new(&syms).is_none());
        let pieces = chunks(&syms);
        assert_eq!(pieces.iter().map(|p| p.len()).sum::<usize>(), 600);
        assert!(pieces.len() >= 3);
        for p in pieces {
            assert!(Keymap::new(p).is_some());
        }
        let repeated = vec![Keysym::a; 5000];
        assert_eq!(chunks(&repeated).len(), 1);
    }
}
