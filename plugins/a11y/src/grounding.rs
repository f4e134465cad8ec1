//! T3 screen grounding: when accessibility names no element that matches a description,
//! a vision model the person runs locally looks at a screenshot of the focused window and
//! points at the element.
//!
//! The steps, each bounded: the focused window's rectangle from the desktop context
//! ([`Rect::from_context`]); a PNG of it from `grim` ([`screenshot`], at most [`MAX_PNG`]
//! bytes, its size read from the IHDR header by [`png_size`]), or where grim cannot, the
//! xdg-desktop-portal's whole screen cropped to the window ([`screenshot_any`], [`crop`]; the
//! result's `screenshot` says which); one OpenAI-compatible chat
//! completion to `UTTER_GROUNDING_URL` with the screenshot as a `data:` URL ([`request_body`],
//! [`ask`]); the point read from the answer ([`parse_answer`]) and mapped back to layout
//! pixels ([`to_layout`]).
//!
//! The model's answer is untrusted: it only selects a point inside the focused window's
//! screenshot (a point outside it is refused); nothing else of it becomes an argument.

use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

/// The chat-completions endpoint (`http://HOST:PORT/v1/chat/completions`); unset or empty
/// switches screen grounding off.
pub const URL_VAR: &str = "UTTER_GROUNDING_URL";
/// The model name sent in the request (default [`DEFAULT_MODEL`]).
pub const MODEL_VAR: &str = "UTTER_GROUNDING_MODEL";
/// How long one grounding request may take, in milliseconds (default [`DEFAULT_TIMEOUT`]).
pub const TIMEOUT_VAR: &str = "UTTER_GROUNDING_TIMEOUT_MS";
/// The model named when [`MODEL_VAR`] is not set.
pub const DEFAULT_MODEL: &str = "ui-tars";
/// How long a grounding request may take when [`TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(20_000);
/// The accepted range of [`TIMEOUT_VAR`], in milliseconds.
pub const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;
/// The largest screenshot sent, in bytes.
pub const MAX_PNG: usize = 32 << 20;
/// The most pixels a portal screenshot may have (more than four 4K screens) to be cut.
pub const MAX_PIXELS: u64 = 40_000_000;
/// The largest HTTP answer read, in bytes.
pub const MAX_RESPONSE: u64 = 4 << 20;
/// How much of the model's text [`parse_answer`] looks at, in bytes.
pub const MAX_SCAN: usize = 64 * 1024;
/// How many `{` of the model's text [`parse_answer`] tries to read an object at.
const MAX_OBJECTS: usize = 256;
/// How long `grim` may take.
const SCREENSHOT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest window side accepted from the context, in layout pixels.
const MAX_SIDE: i64 = 1 << 16;
/// The largest window coordinate accepted from the context, in layout pixels.
const MAX_COORDINATE: i64 = 1 << 20;

/// Screen grounding's settings, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The chat-completions endpoint, a plain `http://` URL.
    pub url: String,
    /// The model name sent in the request.
    pub model: String,
    /// The bound on one request, connection to the answer's last byte.
    pub timeout: Duration,
}

impl Config {
    /// The settings from this process's environment: `Ok(None)` when [`URL_VAR`] is unset
    /// or empty, an error naming the variable when one is malformed.
    pub fn from_env() -> Result<Option<Config>, String> {
        Config::from_vars(|k| std::env::var(k).ok())
    }

    /// The settings from `get` (a variable's value by its name); see [`Config::from_env`].
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
        let Some(url) = get(URL_VAR).map(|u| u.trim().to_owned()) else {
            return Ok(None);
        };
        if url.is_empty() {
            return Ok(None);
        }
        let url = checked_url(&url)?;
        let model = match get(MODEL_VAR).map(|m| m.trim().to_owned()) {
            None => DEFAULT_MODEL.to_owned(),
            Some(m) if m.is_empty() => DEFAULT_MODEL.to_owned(),
            Some(m) if m.chars().count() > 256 || m.chars().any(char::is_control) => {
                return Err(format!(
                    "{MODEL_VAR} must be at most 256 printable characters"
                ));
            }
            Some(m) => m,
        };
        let timeout = match get(TIMEOUT_VAR).map(|t| t.trim().to_owned()) {
            None => DEFAULT_TIMEOUT,
            Some(t) if t.is_empty() => DEFAULT_TIMEOUT,
            Some(t) => match t.parse::<u64>() {
                Ok(ms) if TIMEOUT_RANGE_MS.contains(&ms) => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "{TIMEOUT_VAR} must be a number of milliseconds from {} to {}, got {:?}",
                        TIMEOUT_RANGE_MS.start(),
                        TIMEOUT_RANGE_MS.end(),
                        utter_protocol::text::escape_unprintable(&t, 40).0
                    ));
                }
            },
        };
        Ok(Some(Config {
            url,
            model,
            timeout,
        }))
    }
}

/// A plain `http://` URL with a host, or why not.
fn checked_url(url: &str) -> Result<String, String> {
    let shown = utter_protocol::text::escape_unprintable(url, 120).0;
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Err(format!(
            "{URL_VAR} is {shown:?}, but only plain http to a local server is supported (this build has no TLS): \
             use e.g. http://127.0.0.1:8080/v1/chat/completions"
        ));
    }
    let Some(rest) = lower.strip_prefix("http://") else {
        return Err(format!(
            "{URL_VAR} is {shown:?}; it must be a plain http:// URL of a local server, \
             e.g. http://127.0.0.1:8080/v1/chat/completions"
        ));
    };
    if url.len() > 2048 || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{URL_VAR} must be at most 2048 characters without spaces or control characters"
        ));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return Err(format!(
            "{URL_VAR} is {shown:?}; it needs a host (and no user name), e.g. http://127.0.0.1:8080/v1/chat/completions"
        ));
    }
    // The screenshot travels unencrypted: only to this machine.
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    let local = name == "localhost"
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !local {
        return Err(format!(
            "{URL_VAR} is {shown:?}, which is not this machine; a screenshot goes only to a server \
             on this machine (127.0.0.1, localhost or [::1]), since plain http would carry it \
             unencrypted"
        ));
    }
    match url.parse::<ureq::http::Uri>() {
        Ok(_) => Ok(url.to_owned()),
        Err(e) => Err(format!("{URL_VAR} is {shown:?}, not a valid URL: {e}")),
    }
}

/// A window's rectangle in layout pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// The left edge.
    pub x: i64,
    /// The top edge.
    pub y: i64,
    /// The width, at least 1.
    pub width: i64,
    /// The height, at least 1.
    pub height: i64,
}

impl Rect {
    /// The focused window's content rectangle from the desktop context (`focused.rect`,
    /// else the `rect` of the `windows[]` entry with the focused window's `id`); `None`
    /// when the compositor gives none (niri) or its numbers are out of bounds.
    pub fn from_context(context: Option<&Value>) -> Option<Rect> {
        let context = context?;
        let focused = context.get("focused")?;
        let own = focused.get("rect").and_then(Rect::from_value);
        own.or_else(|| {
            let id = focused.get("id").filter(|v| !v.is_null())?;
            context
                .get("windows")?
                .as_array()?
                .iter()
                .find(|w| w.get("id") == Some(id))
                .and_then(|w| w.get("rect"))
                .and_then(Rect::from_value)
        })
    }

    fn from_value(rect: &Value) -> Option<Rect> {
        let n = |k: &str| rect.get(k).and_then(Value::as_i64);
        let r = Rect {
            x: n("x")?,
            y: n("y")?,
            width: n("width")?,
            height: n("height")?,
        };
        let side = 1..=MAX_SIDE;
        (side.contains(&r.width)
            && side.contains(&r.height)
            && (-MAX_COORDINATE..=MAX_COORDINATE).contains(&r.x)
            && (-MAX_COORDINATE..=MAX_COORDINATE).contains(&r.y))
        .then_some(r)
    }

    /// The geometry argument of `grim -g`: `"X,Y WxH"`.
    pub fn grim_geometry(&self) -> String {
        format!("{},{} {}x{}", self.x, self.y, self.width, self.height)
    }
}

/// The width and height of a PNG from its IHDR chunk, `None` when `png` is not one (or a
/// side is zero).
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    if png.len() < 24 || png[..8] != SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(png[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(png[20..24].try_into().ok()?);
    (width > 0 && height > 0).then_some((width, height))
}

/// A screenshot of `rect` (layout pixels) as PNG bytes, taken with `grim -g "X,Y WxH" -` on
/// the Wayland display this process inherited; an error says why there is none (`grim`
/// missing or failing, no PNG, more than [`MAX_PNG`] bytes, slower than 10 s).
pub async fn screenshot(rect: Rect) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    if std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty()) {
        return Err("WAYLAND_DISPLAY is not set, so grim cannot reach the compositor".into());
    }
    let mut child = tokio::process::Command::new("grim")
        .arg("-g")
        .arg(rect.grim_geometry())
        .arg("-")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "grim is not installed (Debian: grim)".to_owned(),
            _ => format!("grim could not start: {e}"),
        })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("grim's output could not be read".into());
    };
    let run = async {
        let mut png = Vec::new();
        let mut err = Vec::new();
        let limit = u64::try_from(MAX_PNG).unwrap_or(u64::MAX).saturating_add(1);
        let mut stdout = stdout.take(limit);
        let mut stderr = stderr.take(4096);
        let (out, _) = tokio::join!(stdout.read_to_end(&mut png), stderr.read_to_end(&mut err));
        out.map_err(|e| format!("reading grim's output failed: {e}"))?;
        if png.len() > MAX_PNG {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(format!(
                "grim's screenshot is larger than {} MiB",
                MAX_PNG >> 20
            ));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| format!("waiting for grim failed: {e}"))?;
        if !status.success() {
            let said = String::from_utf8_lossy(&err);
            return Err(format!(
                "grim failed ({status}): {}",
                utter_protocol::text::escape_unprintable(said.trim(), 200).0
            ));
        }
        Ok(png)
    };
    let png = tokio::time::timeout(SCREENSHOT_TIMEOUT, run)
        .await
        .map_err(|_| "grim took longer than 10 s".to_owned())??;
    if png_size(&png).is_none() {
        return Err(format!("grim's output ({} bytes) is not a PNG", png.len()));
    }
    Ok(png)
}

/// The layout's bounding box: the union of the context's `outputs` that have a position and
/// a size (`None` when none has, or the numbers are out of bounds).
pub fn layout_from_context(context: Option<&Value>) -> Option<Rect> {
    let outputs = context?.get("outputs")?.as_array()?;
    let rects: Vec<Rect> = outputs.iter().filter_map(Rect::from_value).collect();
    let left = rects.iter().map(|r| r.x).min()?;
    let top = rects.iter().map(|r| r.y).min()?;
    let right = rects.iter().map(|r| r.x + r.width).max()?;
    let bottom = rects.iter().map(|r| r.y + r.height).max()?;
    Rect::from_value(&json!({"x": left, "y": top, "width": right - left, "height": bottom - top}))
}

/// Which tool took a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `grim` (wlr-screencopy: sway, Hyprland, niri).
    Grim,
    /// The xdg-desktop-portal's Screenshot, cropped to the window.
    Portal,
}

impl Tool {
    /// `"grim"` or `"portal"`, as results name it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Grim => "grim",
            Tool::Portal => "portal",
        }
    }
}

/// A screenshot of `rect` with whichever tool works: `grim` first, else the
/// xdg-desktop-portal's whole screen cropped to `rect`, which needs `layout` (the outputs'
/// bounding box in layout pixels, which the portal's image covers) to place it.
///
/// # Errors
/// Why neither worked, both reasons given.
pub async fn screenshot_any(rect: Rect, layout: Option<Rect>) -> Result<(Vec<u8>, Tool), String> {
    let grim = match screenshot(rect).await {
        Ok(png) => return Ok((png, Tool::Grim)),
        Err(why) => why,
    };
    let portal = async {
        let layout = layout.ok_or("the context gives no output geometry to place the window in")?;
        let (conn, _) = utter_desktop::bus::connect()
            .await
            .map_err(|e| e.to_string())?;
        let path = match utter_desktop::portal::screenshot(&conn).await {
            Ok(path) => path,
            Err(utter_desktop::portal::Failure::Cancelled) => {
                return Err("the person refused the screenshot".to_owned());
            }
            Err(utter_desktop::portal::Failure::Failed(why)) => return Err(why),
        };
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_PNG as u64 {
            return Err(format!(
                "its screenshot is larger than {} MiB",
                MAX_PNG >> 20
            ));
        }
        let whole = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        crop(&whole, rect, layout)
    };
    match portal.await {
        Ok(png) => Ok((png, Tool::Portal)),
        Err(why) => Err(format!("{grim}; and the screenshot portal: {why}")),
    }
}

/// The part of `whole` (a PNG of the whole layout `layout`, at any scale) that shows `rect`,
/// as a PNG of its own.
///
/// # Errors
/// A PNG that cannot be read, or a `rect` outside the image.
pub fn crop(whole: &[u8], rect: Rect, layout: Rect) -> Result<Vec<u8>, String> {
    let mut decoder = png::Decoder::new(whole);
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("the screenshot is not a readable PNG: {e}"))?;
    // A few bytes can claim any size: the pixels are only allocated for a believable screen.
    let (width, height) = (reader.info().width, reader.info().height);
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!(
            "the screenshot claims {width}x{height} pixels, more than any screen this reads"
        ));
    }
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader
        .next_frame(&mut pixels)
        .map_err(|e| format!("the screenshot is not a readable PNG: {e}"))?;
    let (color, depth) = reader.output_color_type();
    let channels = color.samples();
    if depth != png::BitDepth::Eight {
        return Err("the screenshot's pixels are not 8 bits".into());
    }
    let scale = f64::from(frame.width) / layout.width as f64;
    let px = |v: i64| (v as f64 * scale).round() as i64;
    let left = px(rect.x - layout.x).max(0);
    let top = px(rect.y - layout.y).max(0);
    let right = px(rect.x + rect.width - layout.x).min(i64::from(frame.width));
    let bottom = px(rect.y + rect.height - layout.y).min(i64::from(frame.height));
    if right <= left || bottom <= top {
        return Err("the window lies outside the screenshot".into());
    }
    let (w, h) = ((right - left) as usize, (bottom - top) as usize);
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, w as u32, h as u32);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder
            .write_header()
            .map_err(|e| format!("encoding the crop: {e}"))?;
        let mut data = Vec::with_capacity(w * h * channels);
        for row in top as usize..bottom as usize {
            let start = row * frame.line_size + left as usize * channels;
            data.extend_from_slice(&pixels[start..start + w * channels]);
        }
        writer
            .write_image_data(&data)
            .map_err(|e| format!("encoding the crop: {e}"))?;
    }
    Ok(out)
}

/// The prompt: the person's description (user provenance) quoted, the image's size, and
/// the one answer form wanted.
pub fn prompt(description: &str, image: (u32, u32)) -> String {
    let quoted = serde_json::to_string(description).unwrap_or_else(|_| "\"\"".into());
    format!(
        "The image is a screenshot of one application window, {w}x{h} pixels. A person asked \
         to click the element they described, in their own words, as {quoted}. Find that \
         element in the screenshot and give the single point to click on it. Answer ONLY a JSON \
         object {{\"x\": <int>, \"y\": <int>, \"confidence\": <number from 0 to 1>}}, with x and \
         y in pixels of this image (0,0 is its top left corner). If the element is not in the \
         screenshot, answer {{\"x\": -1, \"y\": -1, \"confidence\": 0}}.",
        w = image.0,
        h = image.1
    )
}

/// The chat-completion request: [`prompt`] and the PNG as a `data:image/png;base64,` URL,
/// temperature 0.
pub fn request_body(model: &str, description: &str, png: &[u8], image: (u32, u32)) -> Value {
    let data = base64::engine::general_purpose::STANDARD.encode(png);
    json!({
        "model": model,
        "messages": [{
            "role": "user",
            "content": [
                {"type": "text", "text": prompt(description, image)},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}
            ]
        }],
        "temperature": 0
    })
}

/// POST `body` to the endpoint (no proxy, no redirects, within the configured timeout) and
/// return the model's text, `choices[0].message.content` (a string, or the text parts of an
/// array of parts); an error says what went wrong, with the server's words escaped and cut.
pub async fn ask(config: &Config, body: Value) -> Result<String, String> {
    let url = config.url.clone();
    let timeout = config.timeout;
    let call = tokio::task::spawn_blocking(move || post(&url, timeout, &body));
    match tokio::time::timeout(timeout + Duration::from_secs(1), call).await {
        Err(_) => Err(format!(
            "the grounding server gave no answer within {} ms",
            timeout.as_millis()
        )),
        Ok(Err(e)) => Err(format!("the grounding request failed: {e}")),
        Ok(Ok(answer)) => answer,
    }
}

fn post(url: &str, timeout: Duration, body: &Value) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let shown = utter_protocol::text::escape_unprintable(url, 120).0;
    let mut response = agent.post(url).send_json(body).map_err(|e| match e {
        ureq::Error::Timeout(_) => format!(
            "the grounding server at {shown} gave no answer within {} ms",
            timeout.as_millis()
        ),
        e => format!("the grounding server at {shown} could not be reached: {e}"),
    })?;
    let status = response.status();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => format!(
                "the grounding server's answer is larger than {} MiB",
                MAX_RESPONSE >> 20
            ),
            e => format!("reading the grounding server's answer failed: {e}"),
        })?;
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        return Err(format!(
            "the grounding server at {shown} answered HTTP {}: {}",
            status.as_u16(),
            utter_protocol::text::escape_unprintable(text.trim(), 200).0
        ));
    }
    let answer: Value = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "the grounding server's answer is not JSON ({e}): {}",
            utter_protocol::text::escape_unprintable(text.trim(), 200).0
        )
    })?;
    content_of(&answer).ok_or_else(|| {
        format!(
            "the grounding server's answer has no choices[0].message.content: {}",
            utter_protocol::text::escape_unprintable(&answer.to_string(), 200).0
        )
    })
}

/// `choices[0].message.content` of a chat-completion answer: a string, or the `text` of
/// its parts joined.
pub fn content_of(answer: &Value) -> Option<String> {
    match answer.pointer("/choices/0/message/content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join(""))
        }
        _ => None,
    }
}

/// Which form of answer a point was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerForm {
    /// A JSON object with numeric `x` and `y` (and maybe `confidence`).
    Json,
    /// Integers in parentheses, UI-TARS style: `(x,y)` or a box `(x1,y1,x2,y2)` (its centre).
    Tuple,
}

/// A point the model named, in pixels of the screenshot (not yet checked against it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// Across, from the image's left edge.
    pub x: f64,
    /// Down, from the image's top edge.
    pub y: f64,
    /// The model's confidence, when it gave one from 0 to 1.
    pub confidence: Option<f64>,
    /// Where it was read from.
    pub form: AnswerForm,
}

/// Read the point from the model's text (its first [`MAX_SCAN`] bytes), or `None`.
///
/// Accepted, first match wins: the first JSON object in the text with numeric (finite) `x`
/// and `y`, wherever it sits (code fences, prose around it, nested in another object);
/// `confidence` counts only as a number from 0 to 1. Else the first UI-TARS-style integer
/// tuple in parentheses: `click(start_box='(x,y)')`, `<|box_start|>(x,y)<|box_end|>`, a bare
/// `(x, y)`, or a box `(x1,y1,x2,y2)` taken at its centre (no confidence). Coordinates are
/// taken as pixels of the image, never as fractions or a 0–1000 grid.
pub fn parse_answer(text: &str) -> Option<Answer> {
    let mut end = text.len().min(MAX_SCAN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    json_point(text).or_else(|| tuple_point(text))
}

fn json_point(text: &str) -> Option<Answer> {
    for (i, _) in text.match_indices('{').take(MAX_OBJECTS) {
        let mut values = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        let Some(Ok(Value::Object(map))) = values.next() else {
            continue;
        };
        let number = |k: &str| map.get(k).and_then(Value::as_f64).filter(|v| v.is_finite());
        if let (Some(x), Some(y)) = (number("x"), number("y")) {
            let confidence = number("confidence").filter(|c| (0.0..=1.0).contains(c));
            return Some(Answer {
                x,
                y,
                confidence,
                form: AnswerForm::Json,
            });
        }
    }
    None
}

fn tuple_point(text: &str) -> Option<Answer> {
    for (i, _) in text.match_indices('(') {
        if let Some(numbers) = integers_in_parens(&text[i + 1..]) {
            let (x, y) = match numbers[..] {
                [x, y] => (x as f64, y as f64),
                [x1, y1, x2, y2] => ((x1 as f64 + x2 as f64) / 2.0, (y1 as f64 + y2 as f64) / 2.0),
                _ => continue,
            };
            return Some(Answer {
                x,
                y,
                confidence: None,
                form: AnswerForm::Tuple,
            });
        }
    }
    None
}

/// `rest` starts right after a `(`: up to four comma-separated integers (optional sign, at
/// most 9 digits, spaces around) and then `)`.
fn integers_in_parens(rest: &str) -> Option<Vec<i64>> {
    // Only the next 64 bytes are looked at, so a text of many `(` stays linear.
    let close = rest.bytes().take(65).position(|b| b == b')')?;
    let inside = &rest[..close];
    let numbers: Option<Vec<i64>> = inside
        .split(',')
        .map(|part| {
            let part = part.trim();
            let digits = part.strip_prefix('-').unwrap_or(part);
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            part.parse::<i64>().ok()
        })
        .collect();
    numbers.filter(|n| n.len() == 2 || n.len() == 4)
}

/// The pixel of a `width`×`height` image an answer names (its coordinates rounded down),
/// or `None` when it lies outside the image.
pub fn image_pixel(answer: &Answer, image: (u32, u32)) -> Option<(u32, u32)> {
    let inside = |v: f64, side: u32| v >= 0.0 && v < f64::from(side);
    if !inside(answer.x, image.0) || !inside(answer.y, image.1) {
        return None;
    }
    // In range of u32 by the check above.
    Some((answer.x.floor() as u32, answer.y.floor() as u32))
}

/// A pixel of the window's screenshot in layout pixels: the window's origin plus the pixel
/// (its centre) scaled by window size / image size (grim scales on HiDPI outputs).
pub fn to_layout(rect: Rect, image: (u32, u32), pixel: (u32, u32)) -> (i64, i64) {
    let map = |origin: i64, side: i64, p: u32, image_side: u32| {
        let offset = (f64::from(p) + 0.5) * side as f64 / f64::from(image_side.max(1));
        origin + (offset.floor() as i64).clamp(0, side - 1)
    };
    (
        map(rect.x, rect.width, pixel.0, image.0),
        map(rect.y, rect.height, pixel.1, image.1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RGB PNG `width`×`height` whose pixel (x, y) is (x, y, 7).
    fn gradient(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        let data: Vec<u8> = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| [x as u8, y as u8, 7]))
            .collect();
        writer.write_image_data(&data).unwrap();
        drop(writer);
        out
    }

    fn pixels(png: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = png::Decoder::new(png).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut buf).unwrap();
        buf.truncate(frame.buffer_size());
        (frame.width, frame.height, buf)
    }

    #[test]
    fn a_portal_screenshot_is_cropped_to_the_window_at_its_scale() {
        // A layout of 40×20 logical pixels shot at scale 2 (80×40 pixels), starting at -10.
        let whole = gradient(80, 40);
        let layout = Rect {
            x: -10,
            y: 0,
            width: 40,
            height: 20,
        };
        let window = Rect {
            x: 0,
            y: 5,
            width: 3,
            height: 2,
        };
        let (w, h, data) = pixels(&crop(&whole, window, layout).unwrap());
        assert_eq!((w, h), (6, 4));
        assert_eq!(
            &data[..3],
            &[20, 10, 7],
            "the window's corner at (10, 5) × 2"
        );
        assert_eq!(&data[data.len() - 3..], &[25, 13, 7]);
        // Partly outside: cut to the image; wholly outside: an error.
        let (w, _, _) = pixels(
            &crop(
                &whole,
                Rect {
                    x: 25,
                    y: 0,
                    width: 10,
                    height: 1,
                },
                layout,
            )
            .unwrap(),
        );
        assert_eq!(w, 10);
        assert!(
            crop(
                &whole,
                Rect {
                    x: 40,
                    y: 0,
                    width: 5,
                    height: 5
                },
                layout
            )
            .is_err()
        );
        assert!(crop(b"not a png", window, layout).is_err());
        // A few bytes claiming a million pixels a side: refused before anything is allocated.
        let mut liar = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut liar, 1_000_000, 1_000_000);
            encoder.set_color(png::ColorType::Rgb);
            let mut writer = encoder.write_header().unwrap();
            // One IDAT chunk (an empty zlib stream): the header is read up to it.
            writer
                .write_chunk(
                    png::chunk::IDAT,
                    &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
                )
                .unwrap();
            drop(writer);
        }
        let e = crop(&liar, window, layout).unwrap_err();
        assert!(e.contains("1000000x1000000"), "{e}");
        let outputs = json!({"outputs": [
            {"x": 0, "y": 0, "width": 1920, "height": 1080},
            {"x": 1920, "y": -200, "width": 1280, "height": 1024},
            {"name": "off"}
        ]});
        assert_eq!(
            layout_from_context(Some(&outputs)),
            Some(Rect {
                x: 0,
                y: -200,
                width: 3200,
                height: 1280
            })
        );
        assert_eq!(layout_from_context(Some(&json!({}))), None);
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn configuration_from_the_environment() {
        assert_eq!(Config::from_vars(vars(&[])), Ok(None));
        assert_eq!(Config::from_vars(vars(&[(URL_VAR, "  ")])), Ok(None));
        let c = Config::from_vars(vars(&[(
            URL_VAR,
            "http://127.0.0.1:8080/v1/chat/completions",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(c.model, DEFAULT_MODEL);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        let c = Config::from_vars(vars(&[
            (URL_VAR, "http://localhost:1/x"),
            (MODEL_VAR, "qwen2.5-vl"),
            (TIMEOUT_VAR, "1500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.model, "qwen2.5-vl");
        assert_eq!(c.timeout, Duration::from_millis(1500));

        let e = Config::from_vars(vars(&[(URL_VAR, "https://example.com/v1")])).unwrap_err();
        assert!(e.contains("only plain http to a local server"), "{e}");
        for bad in [
            "ftp://x",
            "127.0.0.1:8080",
            "http://",
            "http://u@h/",
            "http://a b/",
        ] {
            assert!(Config::from_vars(vars(&[(URL_VAR, bad)])).is_err(), "{bad}");
        }
        // Only this machine: the screenshot would cross the network unencrypted.
        for remote in [
            "http://example.com/v1",
            "http://10.0.0.2:8080/x",
            "http://[2001:db8::1]/x",
            "http://127.0.0.1.evil.example/",
        ] {
            let e = Config::from_vars(vars(&[(URL_VAR, remote)])).unwrap_err();
            assert!(e.contains("not this machine"), "{remote}: {e}");
        }
        for local in [
            "http://127.0.0.1:8080/v1",
            "http://127.1.2.3/x",
            "http://localhost/x",
            "http://[::1]:9/x",
        ] {
            assert!(
                Config::from_vars(vars(&[(URL_VAR, local)])).is_ok(),
                "{local}"
            );
        }
        for bad in ["0", "-5", "abc", "99999999999999999999", "600001"] {
            let e = Config::from_vars(vars(&[(URL_VAR, "http://127.0.0.1/"), (TIMEOUT_VAR, bad)]))
                .unwrap_err();
            assert!(e.contains(TIMEOUT_VAR), "{e}");
        }
        assert!(
            Config::from_vars(vars(&[
                (URL_VAR, "http://127.0.0.1/"),
                (MODEL_VAR, "a\u{1b}b")
            ]))
            .is_err()
        );
    }

    #[test]
    fn the_rect_comes_from_the_focused_window() {
        let r = json!({"x": 10, "y": 20, "width": 300, "height": 200});
        let rect = Rect {
            x: 10,
            y: 20,
            width: 300,
            height: 200,
        };
        let want = Some(rect);
        assert_eq!(
            Rect::from_context(Some(&json!({"focused": {"rect": r}}))),
            want
        );
        let via_windows =
            json!({"focused": {"id": 7}, "windows": [{"id": 3}, {"id": 7, "rect": r}]});
        assert_eq!(Rect::from_context(Some(&via_windows)), want);
        assert_eq!(rect.grim_geometry(), "10,20 300x200");
        for bad in [
            json!({"focused": {"id": 7}}),
            json!({"focused": {"rect": {"x": 0, "y": 0, "width": 0, "height": 5}}}),
            json!({"focused": {"rect": {"x": 0, "y": 0, "width": 5, "height": 1e9}}}),
            json!({"focused": {"rect": {"x": "0", "y": 0, "width": 5, "height": 5}}}),
            json!({"focused": {"rect": {"x": 1i64 << 40, "y": 0, "width": 5, "height": 5}}}),
            json!({"focused": null}),
            json!([]),
        ] {
            assert_eq!(Rect::from_context(Some(&bad)), None, "{bad}");
        }
        assert_eq!(Rect::from_context(None), None);
    }

    #[test]
    fn png_sizes_come_from_the_header() {
        let mut png = vec![
            0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 13,
        ];
        png.extend_from_slice(b"IHDR");
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((640, 480)));
        assert_eq!(png_size(&png[..23]), None);
        assert_eq!(png_size(b""), None);
        let mut wrong = png.clone();
        wrong[12] = b'X';
        assert_eq!(png_size(&wrong), None);
        let mut zero = png.clone();
        zero[16..20].copy_from_slice(&[0; 4]);
        assert_eq!(png_size(&zero), None);
        assert_eq!(png_size(&[0u8; 100]), None);
    }

    #[test]
    fn the_request_quotes_the_description_and_carries_the_png() {
        let body = request_body("m", "the \"big\" red\nsquare", b"\x89PNG", (10, 20));
        assert_eq!(body["model"], "m");
        assert_eq!(body["temperature"], 0);
        let text = body
            .pointer("/messages/0/content/0/text")
            .unwrap()
            .as_str()
            .unwrap();
        assert!(text.contains(r#""the \"big\" red\nsquare""#), "{text}");
        assert!(text.contains("10x20"), "{text}");
        let url = body
            .pointer("/messages/0/content/1/image_url/url")
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!(url, "data:image/png;base64,iVBORw==");
    }

    #[test]
    fn the_content_is_a_string_or_text_parts() {
        let a = json!({"choices": [{"message": {"content": "hi"}}]});
        assert_eq!(content_of(&a).as_deref(), Some("hi"));
        let a = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]});
        assert_eq!(content_of(&a).as_deref(), Some("ab"));
        for bad in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"message": {"content": 5}}]}),
            json!("x"),
        ] {
            assert_eq!(content_of(&bad), None, "{bad}");
        }
    }

    fn point(text: &str) -> Option<(f64, f64, Option<f64>, AnswerForm)> {
        parse_answer(text).map(|a| (a.x, a.y, a.confidence, a.form))
    }

    #[test]
    fn answers_in_json() {
        use AnswerForm::*;
        assert_eq!(
            point(r#"{"x": 12, "y": 34, "confidence": 0.9}"#),
            Some((12.0, 34.0, Some(0.9), Json))
        );
        assert_eq!(
            point("Sure! Here it is:\n```json\n{\"x\": 5, \"y\": 6}\n```\nHope that helps."),
            Some((5.0, 6.0, None, Json))
        );
        // Nested in another object, after junk objects and broken JSON.
        assert_eq!(
            point(
                r#"{"a": {"b": [1, {"c": 2}]}} {"x": 1, "y": {broken {"point": {"x": 7.5, "y": 8, "confidence": 0.2}}}"#
            ),
            Some((7.5, 8.0, Some(0.2), Json))
        );
        // A confidence out of range or not a number counts as none.
        assert_eq!(
            point(r#"{"x": 1, "y": 2, "confidence": 7}"#),
            Some((1.0, 2.0, None, Json))
        );
        assert_eq!(
            point(r#"{"x": 1, "y": 2, "confidence": "high"}"#),
            Some((1.0, 2.0, None, Json))
        );
        // Negative numbers are read (and then refused as outside the image).
        assert_eq!(
            point(r#"{"x": -1, "y": -1, "confidence": 0}"#),
            Some((-1.0, -1.0, Some(0.0), Json))
        );
    }

    #[test]
    fn answers_in_the_ui_tars_form() {
        use AnswerForm::*;
        assert_eq!(
            point("click(start_box='(120,45)')"),
            Some((120.0, 45.0, None, Tuple))
        );
        assert_eq!(
            point(
                "Thought: the red one.\nAction: click(start_box='<|box_start|>(10, 20)<|box_end|>')"
            ),
            Some((10.0, 20.0, None, Tuple))
        );
        assert_eq!(
            point("click(start_box='(10,20,30,40)')"),
            Some((20.0, 30.0, None, Tuple))
        );
        assert_eq!(
            point("(see below) at (-3, 4)"),
            Some((-3.0, 4.0, None, Tuple))
        );
        assert_eq!(point("(1.5, 2)"), None);
        assert_eq!(point("(1, 2, 3)"), None);
        assert_eq!(point("(1234567890, 2)"), None);
    }

    #[test]
    fn hostile_answers_give_nothing_or_a_bounded_read() {
        for bad in [
            "",
            "I cannot see a red square.",
            r#"{"x": NaN, "y": 1}"#,
            r#"{"x": Infinity, "y": 1}"#,
            r#"{"x": "12", "y": "34"}"#,
            r#"{"x": 1e400, "y": 5}"#,
            r#"{"x": null, "y": 5}"#,
            r#"{"x": 1}"#,
            "{{{{{{{{",
            "((((((((",
            "\u{0}\u{1b}[2J{\"x\":",
        ] {
            assert_eq!(point(bad), None, "{bad:?}");
        }
        // Deep nesting: serde_json's recursion limit refuses it without overflowing.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(point(&deep), None);
        let deep_objects = "{\"a\":".repeat(50_000);
        assert_eq!(point(&deep_objects), None);
        // A huge answer: only the first MAX_SCAN bytes are looked at.
        let late = format!("{}{{\"x\": 1, \"y\": 2}}", "é".repeat(MAX_SCAN));
        assert_eq!(point(&late), None);
        let early = format!("{{\"x\": 1, \"y\": 2}}{}", "{".repeat(10 * MAX_SCAN));
        assert_eq!(point(&early), Some((1.0, 2.0, None, AnswerForm::Json)));
        let many = format!("{}(3,4)", "{\"x\": [".repeat(5_000));
        assert_eq!(point(&many), Some((3.0, 4.0, None, AnswerForm::Tuple)));
        let parens = "(".repeat(MAX_SCAN);
        assert_eq!(point(&parens), None);
    }

    #[test]
    fn points_must_lie_in_the_image_and_map_to_the_window() {
        let a = |x, y| Answer {
            x,
            y,
            confidence: None,
            form: AnswerForm::Json,
        };
        assert_eq!(image_pixel(&a(0.0, 0.0), (10, 20)), Some((0, 0)));
        assert_eq!(image_pixel(&a(9.9, 19.2), (10, 20)), Some((9, 19)));
        for (x, y) in [
            (10.0, 0.0),
            (0.0, 20.0),
            (-0.5, 3.0),
            (-1.0, -1.0),
            (1e300, 1.0),
        ] {
            assert_eq!(image_pixel(&a(x, y), (10, 20)), None, "{x},{y}");
        }
        let rect = Rect {
            x: 100,
            y: 50,
            width: 400,
            height: 300,
        };
        assert_eq!(to_layout(rect, (400, 300), (0, 0)), (100, 50));
        assert_eq!(to_layout(rect, (400, 300), (399, 299)), (499, 349));
        // A HiDPI screenshot (scale 2) maps back at half the size.
        assert_eq!(to_layout(rect, (800, 600), (201, 101)), (200, 100));
    }
}
