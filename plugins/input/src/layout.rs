//! Which key of the person's keyboard layout types a keysym: what a uinput keyboard needs,
//! since the compositor applies its own keymap to the evdev codes uinput sends (unlike the
//! Wayland virtual keyboard, which brings its own keymap).
//!
//! [`LayoutMap::from_names`] compiles the layout with libxkbcommon, loaded at run time
//! (`xkbcommon-dl`; Debian's `libxkbcommon0`, present wherever a Wayland compositor is), and
//! reads, for every key, the keysym it types with no modifier, with Shift, with AltGr
//! (`Mod5`, level 3) and with both. The layout comes from `UTTER_XKB_LAYOUT` /
//! `UTTER_XKB_VARIANT`, else `XKB_DEFAULT_LAYOUT` / `XKB_DEFAULT_VARIANT` (the variables
//! libxkbcommon itself reads), else `us`. Without libxkbcommon, [`LayoutMap::us`] is the US
//! layout from a table of its own.

use crate::wayland::Stroke;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::CString;
use xkeysym::Keysym;

/// A level's modifier: Shift.
pub const SHIFT: u8 = 1;
/// A level's modifier: AltGr (ISO_Level3_Shift, xkb `Mod5`).
pub const ALTGR: u8 = 2;

/// keysym → the evdev code and the level modifiers ([`SHIFT`], [`ALTGR`]) that type it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutMap {
    /// Where the map came from: `us (built in)`, `de (libxkbcommon)`.
    pub name: String,
    entries: BTreeMap<u32, (u16, u8)>,
}

/// evdev codes (`linux/input-event-codes.h`) of the US layout's keys, with the keysyms of
/// their first two levels.
const US: &[(u16, u32, u32)] = &[
    (2, '1' as u32, '!' as u32),
    (3, '2' as u32, '@' as u32),
    (4, '3' as u32, '#' as u32),
    (5, '4' as u32, '$' as u32),
    (6, '5' as u32, '%' as u32),
    (7, '6' as u32, '^' as u32),
    (8, '7' as u32, '&' as u32),
    (9, '8' as u32, '*' as u32),
    (10, '9' as u32, '(' as u32),
    (11, '0' as u32, ')' as u32),
    (12, '-' as u32, '_' as u32),
    (13, '=' as u32, '+' as u32),
    (16, 'q' as u32, 'Q' as u32),
    (17, 'w' as u32, 'W' as u32),
    (18, 'e' as u32, 'E' as u32),
    (19, 'r' as u32, 'R' as u32),
    (20, 't' as u32, 'T' as u32),
    (21, 'y' as u32, 'Y' as u32),
    (22, 'u' as u32, 'U' as u32),
    (23, 'i' as u32, 'I' as u32),
    (24, 'o' as u32, 'O' as u32),
    (25, 'p' as u32, 'P' as u32),
    (26, '[' as u32, '{' as u32),
    (27, ']' as u32, '}' as u32),
    (30, 'a' as u32, 'A' as u32),
    (31, 's' as u32, 'S' as u32),
    (32, 'd' as u32, 'D' as u32),
    (33, 'f' as u32, 'F' as u32),
    (34, 'g' as u32, 'G' as u32),
    (35, 'h' as u32, 'H' as u32),
    (36, 'j' as u32, 'J' as u32),
    (37, 'k' as u32, 'K' as u32),
    (38, 'l' as u32, 'L' as u32),
    (39, ';' as u32, ':' as u32),
    (40, '\'' as u32, '"' as u32),
    (41, '`' as u32, '~' as u32),
    (43, '\\' as u32, '|' as u32),
    (44, 'z' as u32, 'Z' as u32),
    (45, 'x' as u32, 'X' as u32),
    (46, 'c' as u32, 'C' as u32),
    (47, 'v' as u32, 'V' as u32),
    (48, 'b' as u32, 'B' as u32),
    (49, 'n' as u32, 'N' as u32),
    (50, 'm' as u32, 'M' as u32),
    (51, ',' as u32, '<' as u32),
    (52, '.' as u32, '>' as u32),
    (53, '/' as u32, '?' as u32),
    (57, ' ' as u32, ' ' as u32),
];

/// Keys outside the character block: the same on every layout.
const FIXED: &[(u16, Keysym)] = &[
    (1, Keysym::Escape),
    (14, Keysym::BackSpace),
    (15, Keysym::Tab),
    (28, Keysym::Return),
    (29, Keysym::Control_L),
    (42, Keysym::Shift_L),
    (56, Keysym::Alt_L),
    (58, Keysym::Caps_Lock),
    (99, Keysym::Print),
    (100, Keysym::ISO_Level3_Shift),
    (102, Keysym::Home),
    (103, Keysym::Up),
    (104, Keysym::Prior),
    (105, Keysym::Left),
    (106, Keysym::Right),
    (107, Keysym::End),
    (108, Keysym::Down),
    (109, Keysym::Next),
    (110, Keysym::Insert),
    (111, Keysym::Delete),
    (113, Keysym::XF86_AudioMute),
    (114, Keysym::XF86_AudioLowerVolume),
    (115, Keysym::XF86_AudioRaiseVolume),
    (119, Keysym::Pause),
    (125, Keysym::Super_L),
    (127, Keysym::Menu),
    (163, Keysym::XF86_AudioNext),
    (164, Keysym::XF86_AudioPlay),
    (165, Keysym::XF86_AudioPrev),
    (166, Keysym::XF86_AudioStop),
    (224, Keysym::XF86_MonBrightnessDown),
    (225, Keysym::XF86_MonBrightnessUp),
];

/// evdev codes of F1–F24.
const F_KEYS: [u16; 24] = [
    59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 87, 88, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194,
];

/// Which of two keys that type a keysym to press: a key of the main block (evdev codes up
/// to 83) before the keypad and extra keys, then fewer level modifiers, then the lower code.
/// So `(` is Shift+8 on a German layout, not the keypad's parenthesis key.
fn rank((code, level): (u16, u8)) -> (bool, u32, u16) {
    (code > 83, level.count_ones(), code)
}

impl LayoutMap {
    /// The US layout from the built-in table.
    pub fn us() -> LayoutMap {
        let mut entries = BTreeMap::new();
        for &(code, plain, shifted) in US {
            entries.entry(plain).or_insert((code, 0));
            entries.entry(shifted).or_insert((code, SHIFT));
        }
        for &(code, sym) in FIXED {
            entries.entry(sym.raw()).or_insert((code, 0));
        }
        for (i, code) in F_KEYS.iter().enumerate() {
            entries
                .entry(Keysym::F1.raw() + i as u32)
                .or_insert((*code, 0));
        }
        entries.insert(Keysym::ISO_Left_Tab.raw(), (15, SHIFT));
        LayoutMap {
            name: "us (built in)".into(),
            entries,
        }
    }

    /// The layout the environment names (see the module docs), compiled with
    /// libxkbcommon; the built-in US table when libxkbcommon cannot be loaded or the layout
    /// does not compile (the error says why).
    pub fn from_environment() -> (LayoutMap, Option<String>) {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        };
        let layout =
            var(&["UTTER_XKB_LAYOUT", "XKB_DEFAULT_LAYOUT"]).unwrap_or_else(|| "us".into());
        let variant = var(&["UTTER_XKB_VARIANT", "XKB_DEFAULT_VARIANT"]).unwrap_or_default();
        match LayoutMap::from_names(&layout, &variant) {
            Ok(map) => (map, None),
            Err(e) => (LayoutMap::us(), Some(e)),
        }
    }

    /// Compile `layout` (`de`, `fr`, `us`; several joined by commas use the first) and
    /// `variant` (`""`, `nodeadkeys`, `dvorak`) with libxkbcommon and read its keys.
    ///
    /// # Errors
    /// libxkbcommon is missing, or the names do not compile (an unknown layout).
    pub fn from_names(layout: &str, variant: &str) -> Result<LayoutMap, String> {
        let bad = |s: &str| {
            s.len() > 64
                || s.chars()
                    .any(|c| !(c.is_ascii_alphanumeric() || "_-,()".contains(c)))
        };
        if layout.is_empty() || bad(layout) || bad(variant) {
            return Err(format!("{layout:?}/{variant:?} is no xkb layout name"));
        }
        let xkb = xkbcommon_dl::xkbcommon_option()
            .ok_or("libxkbcommon.so.0 cannot be loaded (Debian: libxkbcommon0)")?;
        let c = |s: &str| CString::new(s).map_err(|_| "a name holds NUL".to_owned());
        let (rules, model, layout_c, variant_c) =
            (c("evdev")?, c("pc105")?, c(layout)?, c(variant)?);
        let names = xkbcommon_dl::xkb_rule_names {
            rules: rules.as_ptr(),
            model: model.as_ptr(),
            layout: layout_c.as_ptr(),
            variant: variant_c.as_ptr(),
            options: std::ptr::null(),
        };
        // SAFETY: every pointer passed is either one libxkbcommon returned (checked for null
        // before use) or a CString that outlives the call; each object is unreferenced once.
        unsafe {
            let ctx = quiet_context(xkb)?;
            let keymap = (xkb.xkb_keymap_new_from_names)(
                ctx,
                &names,
                xkbcommon_dl::xkb_keymap_compile_flags::XKB_KEYMAP_COMPILE_NO_FLAGS,
            );
            if keymap.is_null() {
                (xkb.xkb_context_unref)(ctx);
                return Err(format!(
                    "the xkb layout {layout:?} (variant {variant:?}) does not compile (Debian: xkb-data)"
                ));
            }
            let label = if variant.is_empty() {
                layout.to_owned()
            } else {
                format!("{layout}({variant})")
            };
            read_keymap(xkb, ctx, keymap, &format!("{label} (libxkbcommon)"))
        }
    }

    /// Read the keys of a keymap in xkb's text format (`XKB_KEYMAP_FORMAT_TEXT_V1`), as an
    /// EIS server sends it for its keyboard (`ei_keyboard.keymap`); `label` names it.
    ///
    /// # Errors
    /// libxkbcommon is missing, the text holds NUL, or it does not compile.
    pub fn from_keymap_text(text: &str, label: &str) -> Result<LayoutMap, String> {
        let xkb = xkbcommon_dl::xkbcommon_option()
            .ok_or("libxkbcommon.so.0 cannot be loaded (Debian: libxkbcommon0)")?;
        let text = CString::new(text.trim_end_matches('\0'))
            .map_err(|_| "the keymap holds NUL".to_owned())?;
        // SAFETY: as in `from_names`: the text outlives the call, every returned pointer is
        // checked for null, and each object is unreferenced once (in `read_keymap`).
        unsafe {
            let ctx = quiet_context(xkb)?;
            let keymap = (xkb.xkb_keymap_new_from_string)(
                ctx,
                text.as_ptr(),
                xkbcommon_dl::xkb_keymap_format::XKB_KEYMAP_FORMAT_TEXT_V1,
                xkbcommon_dl::xkb_keymap_compile_flags::XKB_KEYMAP_COMPILE_NO_FLAGS,
            );
            if keymap.is_null() {
                (xkb.xkb_context_unref)(ctx);
                return Err(format!("the keymap of {label} does not compile"));
            }
            read_keymap(xkb, ctx, keymap, label)
        }
    }

    /// The evdev code and level modifiers that type `sym`, if a key of the layout does.
    pub fn lookup(&self, sym: Keysym) -> Option<(u16, u8)> {
        self.entries.get(&sym.raw()).copied()
    }

    /// How many keysyms the layout types.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it types none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One key event: an evdev code going down (`true`) or up.
pub type KeyEvent = (u16, bool);

/// The press/release events that type `strokes` under `layout` (what uinput and an EIS keyboard send): each stroke presses its
/// chord modifiers, then the level modifiers its key needs (Shift, AltGr) that the chord
/// does not already hold, then the key, and releases all of them in reverse order.
///
/// # Errors
/// The keysym the layout has no key for (named, so the message can say which).
pub fn key_events(layout: &LayoutMap, strokes: &[Stroke]) -> Result<Vec<KeyEvent>, Keysym> {
    let shift = layout.lookup(Keysym::Shift_L).map(|k| k.0).unwrap_or(42);
    let altgr = layout
        .lookup(Keysym::ISO_Level3_Shift)
        .filter(|k| k.1 == 0)
        .map(|k| k.0)
        .unwrap_or(100);
    let mut events = Vec::new();
    for stroke in strokes {
        let mut held: Vec<u16> = Vec::new();
        for m in &stroke.modifiers {
            let (code, _) = layout.lookup(m.keysym()).ok_or(m.keysym())?;
            if !held.contains(&code) {
                held.push(code);
            }
        }
        if let Some(key) = stroke.key {
            let (code, level) = layout.lookup(key).ok_or(key)?;
            if level & SHIFT != 0 && !held.contains(&shift) {
                held.push(shift);
            }
            if level & ALTGR != 0 && !held.contains(&altgr) {
                held.push(altgr);
            }
            events.extend(held.iter().map(|&c| (c, true)));
            events.push((code, true));
            events.push((code, false));
        } else {
            events.extend(held.iter().map(|&c| (c, true)));
        }
        events.extend(held.iter().rev().map(|&c| (c, false)));
    }
    Ok(events)
}

/// A libxkbcommon context that reads no environment names and logs only critical errors.
///
/// # Safety
/// The caller unreferences the context it gets.
unsafe fn quiet_context(
    xkb: &xkbcommon_dl::XkbCommon,
) -> Result<*mut xkbcommon_dl::xkb_context, String> {
    // SAFETY: plain calls into libxkbcommon; the context is checked for null.
    unsafe {
        let ctx = (xkb.xkb_context_new)(
            xkbcommon_dl::xkb_context_flags::XKB_CONTEXT_NO_ENVIRONMENT_NAMES,
        );
        if ctx.is_null() {
            return Err("libxkbcommon could not make a context".into());
        }
        (xkb.xkb_context_set_log_level)(ctx, xkbcommon_dl::xkb_log_level::XKB_LOG_LEVEL_CRITICAL);
        Ok(ctx)
    }
}

/// Every keysym `keymap` types with no modifier, Shift, AltGr (`Mod5`) or both, with the
/// evdev code and level that type it; then unreference `keymap` and `ctx`.
///
/// # Safety
/// `ctx` and `keymap` are live objects of `xkb`, each owned by the caller, who gives them up.
unsafe fn read_keymap(
    xkb: &xkbcommon_dl::XkbCommon,
    ctx: *mut xkbcommon_dl::xkb_context,
    keymap: *mut xkbcommon_dl::xkb_keymap,
    label: &str,
) -> Result<LayoutMap, String> {
    let mut entries = BTreeMap::new();
    // SAFETY: the caller's promise; `state` is checked for null and unreferenced once.
    unsafe {
        let state = (xkb.xkb_state_new)(keymap);
        if !state.is_null() {
            let index = |name: &str| {
                let n = CString::new(name).expect("no NUL");
                (xkb.xkb_keymap_mod_get_index)(keymap, n.as_ptr())
            };
            let bit = |i: u32| {
                if i == xkbcommon_dl::XKB_MOD_INVALID {
                    0
                } else {
                    1u32 << i
                }
            };
            let (shift, mod5) = (bit(index("Shift")), bit(index("Mod5")));
            let min = (xkb.xkb_keymap_min_keycode)(keymap).max(9);
            let max = (xkb.xkb_keymap_max_keycode)(keymap).min(255 + 8);
            for (mask, level) in [
                (0, 0),
                (shift, SHIFT),
                (mod5, ALTGR),
                (shift | mod5, SHIFT | ALTGR),
            ] {
                if level != 0 && mask == 0 {
                    continue;
                }
                (xkb.xkb_state_update_mask)(state, mask, 0, 0, 0, 0, 0);
                for kc in min..=max {
                    let sym = (xkb.xkb_state_key_get_one_sym)(state, kc);
                    if sym == 0 {
                        continue;
                    }
                    let candidate = ((kc - 8) as u16, level);
                    let better = entries
                        .get(&sym)
                        .is_none_or(|&current| rank(candidate) < rank(current));
                    if better {
                        entries.insert(sym, candidate);
                    }
                }
            }
            // AltGr is the right Alt key (evdev 100) where the layout makes it
            // ISO_Level3_Shift; xkb also puts that keysym on a virtual key (<LVL3>) that
            // no keyboard has, which would otherwise come first.
            (xkb.xkb_state_update_mask)(state, 0, 0, 0, 0, 0, 0);
            if (xkb.xkb_state_key_get_one_sym)(state, 100 + 8) == Keysym::ISO_Level3_Shift.raw() {
                entries.insert(Keysym::ISO_Level3_Shift.raw(), (100, 0));
            }
            (xkb.xkb_state_unref)(state);
        }
        (xkb.xkb_keymap_unref)(keymap);
        (xkb.xkb_context_unref)(ctx);
    }
    if entries.is_empty() {
        return Err(format!("the keymap of {label} has no keys"));
    }
    Ok(LayoutMap {
        name: label.to_owned(),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_us_table_types_ascii() {
        let us = LayoutMap::us();
        assert_eq!(us.lookup(Keysym::a), Some((30, 0)));
        assert_eq!(us.lookup(Keysym::A), Some((30, SHIFT)));
        assert_eq!(us.lookup(Keysym::at), Some((3, SHIFT)));
        assert_eq!(us.lookup(Keysym::Return), Some((28, 0)));
        assert_eq!(us.lookup(Keysym::F13), Some((183, 0)));
        assert_eq!(us.lookup(Keysym::Super_L), Some((125, 0)));
        for c in (0x20u8..0x7f).map(char::from) {
            let sym = crate::keys::char_keysym(c).unwrap();
            assert!(us.lookup(sym).is_some(), "{c:?}");
        }
        assert_eq!(us.lookup(Keysym::eacute), None);
    }

    /// Real libxkbcommon with Debian's xkb-data (both come with sway, which the tests
    /// install): the German layout swaps y and z and puts @ on AltGr+q.
    #[test]
    fn libxkbcommon_gives_the_german_layout() {
        let de = LayoutMap::from_names("de", "").expect("libxkbcommon0 and xkb-data are installed");
        assert_eq!(de.name, "de (libxkbcommon)");
        assert_eq!(de.lookup(Keysym::z), Some((21, 0)), "z is on the US y key");
        assert_eq!(de.lookup(Keysym::y), Some((44, 0)), "y is on the US z key");
        assert_eq!(de.lookup(Keysym::at), Some((16, ALTGR)), "@ is AltGr+q");
        assert_eq!(de.lookup(Keysym::odiaeresis), Some((39, 0)));
        assert_eq!(de.lookup(Keysym::ISO_Level3_Shift).map(|k| k.1), Some(0));
        assert_eq!(
            de.lookup(Keysym::parenleft),
            Some((9, SHIFT)),
            "( is Shift+8"
        );
        let us = LayoutMap::from_names("us", "").unwrap();
        assert_eq!(us.lookup(Keysym::z), Some((44, 0)));
        assert_eq!(us.lookup(Keysym::at), Some((3, SHIFT)));
    }

    #[test]
    fn a_keymap_that_does_not_compile_is_an_error() {
        for text in ["", "xkb_keymap { nonsense", "\u{0}", "xkb_keymap {};"] {
            assert!(
                LayoutMap::from_keymap_text(text, "test").is_err(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn bad_layout_names_are_refused() {
        for (layout, variant) in [
            ("", ""),
            ("no-such-layout-xyz", ""),
            ("de;rm -rf", ""),
            ("de", "\"x"),
        ] {
            assert!(
                LayoutMap::from_names(layout, variant).is_err(),
                "{layout} {variant}"
            );
        }
    }
}
