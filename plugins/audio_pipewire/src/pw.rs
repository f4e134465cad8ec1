//! The PipeWire side: one dedicated OS thread per connection runs PipeWire's main loop (its
//! objects are neither `Send` nor `Sync`); the rest of the plugin talks to it through a
//! [`Shared`] state behind a mutex, a one-shot reply and a `pipewire::channel` to stop it.
//!
//! Nothing in the callbacks may panic: they are called from C.

use crate::source::{AudioError, SourceInfo};
use pipewire as pw;
use pw::spa;
use spa::pod::Pod;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one registry round trip may take before the server counts as unresponsive.
const ROUNDTRIP_TIMEOUT: Duration = Duration::from_secs(5);

/// Channels and rate of a node, by id, as its info reports them.
type NodeDetails = HashMap<u32, (Option<u32>, Option<u32>)>;

/// A node seen in the registry.
#[derive(Debug, Clone)]
pub(crate) struct NodeEntry {
    pub name: String,
    pub description: String,
    pub class: String,
}

/// The stream's life as the async side sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamPhase {
    /// Connected, not yet running.
    Connecting,
    /// Linked but not running (no driver, or suspended).
    Paused,
    /// Buffers flow.
    Streaming,
    /// PipeWire reported an error or disconnected the stream.
    Failed(String),
}

/// State shared between the PipeWire thread and the async API.
pub(crate) struct Shared {
    pub phase: StreamPhase,
    /// Negotiated format (0 until known).
    pub rate: u32,
    pub channels: u32,
    /// Our stream's node id (`u32::MAX` until known).
    pub node_id: u32,
    /// Every node in the graph, by id.
    pub nodes: HashMap<u32, NodeEntry>,
    /// Every link, by id: (output node, input node).
    pub links: HashMap<u32, (u32, u32)>,
    /// Interleaved samples kept while armed: the last `ring_cap` of them.
    pub ring: VecDeque<f32>,
    pub ring_cap_ms: u32,
    /// `Some` while recording: the interleaved samples since `begin` (including the pre-roll).
    pub recording: Option<Vec<f32>>,
    pub max_ms: u32,
    /// Samples were dropped because `max_seconds` was reached.
    pub truncated: bool,
    /// Frames received since the stream started.
    pub frames_seen: u64,
}

impl Shared {
    /// The RMS in dBFS of the last [`crate::source::LEVEL_WINDOW_MS`] of samples (the
    /// recording's tail while recording, else the ring's), `None` while fewer are at hand.
    pub fn recent_level_db(&self) -> Option<f32> {
        let wanted = usize::try_from(
            u64::from(self.rate)
                * u64::from(self.channels.max(1))
                * u64::from(crate::source::LEVEL_WINDOW_MS)
                / 1000,
        )
        .ok()
        .filter(|n| *n > 0)?;
        let level = match &self.recording {
            Some(recording) if recording.len() >= wanted => {
                crate::dsp::rms_db(&recording[recording.len() - wanted..])
            }
            Some(_) => return None,
            None if self.ring.len() >= wanted => {
                let tail: Vec<f32> = self
                    .ring
                    .range(self.ring.len() - wanted..)
                    .copied()
                    .collect();
                crate::dsp::rms_db(&tail)
            }
            None => return None,
        };
        Some((level * 10.0).round() / 10.0)
    }

    pub fn new(pre_roll_ms: u32, max_seconds: u32) -> Shared {
        Shared {
            phase: StreamPhase::Connecting,
            rate: 0,
            channels: 0,
            node_id: u32::MAX,
            nodes: HashMap::new(),
            links: HashMap::new(),
            ring: VecDeque::new(),
            ring_cap_ms: pre_roll_ms,
            recording: None,
            max_ms: max_seconds.saturating_mul(1000),
            truncated: false,
            frames_seen: 0,
        }
    }

    fn samples_for(&self, ms: u32) -> usize {
        (u64::from(self.rate) * u64::from(self.channels.max(1)) * u64::from(ms) / 1000) as usize
    }

    /// The name of the node our stream is linked from, if a link exists.
    pub fn linked_source(&self) -> Option<String> {
        if self.node_id == u32::MAX {
            return None;
        }
        self.links
            .values()
            .filter(|(_, input)| *input == self.node_id)
            .find_map(|(output, _)| self.nodes.get(output).map(|n| n.name.clone()))
    }

    fn push(&mut self, samples: &[f32]) {
        self.frames_seen += (samples.len() / self.channels.max(1) as usize) as u64;
        if let Some(rec) = &mut self.recording {
            let cap =
                (u64::from(self.rate) * u64::from(self.channels.max(1)) * u64::from(self.max_ms)
                    / 1000) as usize;
            let room = cap.saturating_sub(rec.len());
            if room < samples.len() {
                self.truncated = true;
            }
            rec.extend_from_slice(&samples[..room.min(samples.len())]);
        } else {
            let cap = self.samples_for(self.ring_cap_ms);
            self.ring.extend(samples.iter().copied());
            let excess = self.ring.len().saturating_sub(cap);
            self.ring.drain(..excess);
        }
    }
}

/// What the capture thread is asked to do.
pub(crate) struct StreamRequest {
    /// `node.name` to capture from; empty = the default source.
    pub source: String,
}

fn connect() -> Result<
    (
        pw::main_loop::MainLoopRc,
        pw::context::ContextRc,
        pw::core::CoreRc,
    ),
    AudioError,
> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None)
        .map_err(|e| AudioError::PipeWire(format!("cannot create a PipeWire main loop: {e}")))?;
    let context = pw::context::ContextRc::new(&mainloop, None)
        .map_err(|e| AudioError::PipeWire(format!("cannot create a PipeWire context: {e}")))?;
    let core = context
        .connect_rc(None)
        .map_err(|e| AudioError::NotRunning(e.to_string()))?;
    Ok((mainloop, context, core))
}

/// Run the main loop until the server has answered everything asked so far.
fn roundtrip(
    mainloop: &pw::main_loop::MainLoopRc,
    core: &pw::core::CoreRc,
) -> Result<(), AudioError> {
    let done = Rc::new(Cell::new(false));
    let pending = core
        .sync(0)
        .map_err(|e| AudioError::PipeWire(format!("PipeWire sync failed: {e}")))?;
    let _listener = core
        .add_listener_local()
        .done({
            let done = done.clone();
            let mainloop = mainloop.clone();
            move |id, seq| {
                if id == pw::core::PW_ID_CORE && seq == pending {
                    done.set(true);
                    mainloop.quit();
                }
            }
        })
        .register();
    let timer = mainloop.loop_().add_timer({
        let mainloop = mainloop.clone();
        move |_| mainloop.quit()
    });
    timer.update_timer(Some(ROUNDTRIP_TIMEOUT), None);
    mainloop.run();
    if done.get() {
        Ok(())
    } else {
        Err(AudioError::PipeWire(format!(
            "the PipeWire server did not answer within {} s",
            ROUNDTRIP_TIMEOUT.as_secs()
        )))
    }
}

fn node_entry(props: &spa::utils::dict::DictRef) -> NodeEntry {
    NodeEntry {
        name: props.get("node.name").unwrap_or_default().to_owned(),
        description: props
            .get("node.description")
            .or_else(|| props.get("node.nick"))
            .unwrap_or_default()
            .to_owned(),
        class: props.get("media.class").unwrap_or_default().to_owned(),
    }
}

/// Whether a `media.class` is a capture source (`Audio/Source`, `Audio/Source/Virtual`).
pub(crate) fn is_source_class(class: &str) -> bool {
    class == "Audio/Source" || class.starts_with("Audio/Source/")
}

/// Connect, list the audio sources with their details, disconnect. Blocking: call it on a
/// thread of its own.
pub(crate) fn list_sources_blocking() -> Result<Vec<SourceInfo>, AudioError> {
    let (mainloop, _context, core) = connect()?;
    let registry = core
        .get_registry()
        .map_err(|e| AudioError::PipeWire(format!("cannot get the PipeWire registry: {e}")))?;
    let globals: Rc<RefCell<Vec<pw::registry::GlobalObject<pw::properties::PropertiesBox>>>> =
        Rc::default();
    let _reg_listener = registry
        .add_listener_local()
        .global({
            let globals = globals.clone();
            move |global| match global.type_ {
                pw::types::ObjectType::Node | pw::types::ObjectType::Metadata => {
                    globals.borrow_mut().push(global.to_owned())
                }
                _ => {}
            }
        })
        .register();
    roundtrip(&mainloop, &core)?;

    // Second pass: bind the sources (for their channel count) and the "default" metadata
    // (for the default source's name).
    let details: Rc<RefCell<NodeDetails>> = Rc::default();
    let default_source: Rc<RefCell<Option<String>>> = Rc::default();
    let mut keep_nodes = Vec::new();
    let mut keep_metadata = Vec::new();
    let mut sources = Vec::new();
    for global in globals.borrow().iter() {
        let Some(props) = global.props.as_ref() else {
            continue;
        };
        let props: &spa::utils::dict::DictRef = props.as_ref();
        match global.type_ {
            pw::types::ObjectType::Node => {
                let entry = node_entry(props);
                if !is_source_class(&entry.class) {
                    continue;
                }
                sources.push(SourceInfo {
                    id: global.id,
                    name: entry.name,
                    description: entry.description,
                    media_class: entry.class,
                    channels: None,
                    rate: props.get("audio.rate").and_then(|c| c.parse().ok()),
                    is_default: false,
                });
                if let Ok(node) = registry.bind::<pw::node::Node, _>(global) {
                    let listener = node
                        .add_listener_local()
                        .info({
                            let details = details.clone();
                            move |info| {
                                let props = info.props();
                                // The channel map is what the node really produces
                                // (`audio.channels` can be a stale default, as with
                                // pw-loopback); then its ports; then the property.
                                let channels = props
                                    .and_then(|p| p.get("audio.position"))
                                    .map(position_count)
                                    .filter(|n| *n > 0)
                                    .or(Some(info.n_output_ports()).filter(|n| *n > 0))
                                    .or_else(|| {
                                        props
                                            .and_then(|p| p.get("audio.channels"))
                                            .and_then(|c| c.parse().ok())
                                    });
                                let rate = props
                                    .and_then(|p| p.get("audio.rate"))
                                    .and_then(|c| c.parse().ok());
                                details.borrow_mut().insert(info.id(), (channels, rate));
                            }
                        })
                        .register();
                    keep_nodes.push((node, listener));
                }
            }
            pw::types::ObjectType::Metadata if props.get("metadata.name") == Some("default") => {
                if let Ok(metadata) = registry.bind::<pw::metadata::Metadata, _>(global) {
                    let listener = metadata
                        .add_listener_local()
                        .property({
                            let default_source = default_source.clone();
                            move |_subject, key, _type, value| {
                                if key == Some("default.audio.source") {
                                    *default_source.borrow_mut() = value.and_then(default_name);
                                }
                                0
                            }
                        })
                        .register();
                    keep_metadata.push((metadata, listener));
                }
            }
            _ => {}
        }
    }
    roundtrip(&mainloop, &core)?;
    // Node info arrives after the bind is answered; one more trip makes sure it is in.
    roundtrip(&mainloop, &core)?;
    let details = details.borrow();
    let default_source = default_source.borrow();
    for source in &mut sources {
        if let Some((channels, rate)) = details.get(&source.id) {
            source.channels = *channels;
            source.rate = source.rate.or(*rate);
        }
        source.is_default = default_source.as_deref() == Some(source.name.as_str());
    }
    sources.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(sources)
}

/// The number of positions in an `audio.position` value such as `[MONO]`, `FL,FR` or
/// `[ FL FR ]`.
pub(crate) fn position_count(value: &str) -> u32 {
    value
        .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .count() as u32
}

/// `default.audio.source` holds JSON such as `{ "name": "fake_mic" }`.
fn default_name(value: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(value)
        .ok()?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

/// The body of the capture thread. Sends exactly one message on `ready`: `Ok` once the stream
/// is connected (the caller then waits for it to run), or the error that stopped it. Returns
/// when `stop` receives a message.
pub(crate) fn capture_thread(
    request: StreamRequest,
    shared: Arc<Mutex<Shared>>,
    ready: tokio::sync::oneshot::Sender<Result<(), AudioError>>,
    stop: pw::channel::Receiver<()>,
) {
    let mut ready = Some(ready);
    let mut reply = |result: Result<(), AudioError>| {
        if let Some(ready) = ready.take() {
            let _ = ready.send(result);
        }
    };
    match run_capture(&request, &shared, &mut reply, stop) {
        Ok(()) => {}
        Err(e) => {
            if let Ok(mut s) = shared.lock() {
                s.phase = StreamPhase::Failed(e.to_string());
            }
            reply(Err(e));
        }
    }
}

fn run_capture(
    request: &StreamRequest,
    shared: &Arc<Mutex<Shared>>,
    reply: &mut dyn FnMut(Result<(), AudioError>),
    stop: pw::channel::Receiver<()>,
) -> Result<(), AudioError> {
    let (mainloop, _context, core) = connect()?;
    let registry = core
        .get_registry()
        .map_err(|e| AudioError::PipeWire(format!("cannot get the PipeWire registry: {e}")))?;
    // The registry listener stays for the whole session: it follows nodes and links, so the
    // plugin can tell which source the stream is really linked to, and when it goes away.
    let _reg_listener = registry
        .add_listener_local()
        .global({
            let shared = shared.clone();
            move |global| {
                let Some(props) = global.props else { return };
                let Ok(mut s) = shared.lock() else { return };
                match global.type_ {
                    pw::types::ObjectType::Node => {
                        s.nodes.insert(global.id, node_entry(props));
                    }
                    pw::types::ObjectType::Link => {
                        let id = |k| props.get(k).and_then(|v: &str| v.parse::<u32>().ok());
                        if let (Some(out), Some(inp)) =
                            (id("link.output.node"), id("link.input.node"))
                        {
                            s.links.insert(global.id, (out, inp));
                        }
                    }
                    _ => {}
                }
            }
        })
        .global_remove({
            let shared = shared.clone();
            move |id| {
                if let Ok(mut s) = shared.lock() {
                    s.nodes.remove(&id);
                    s.links.remove(&id);
                }
            }
        })
        .register();
    roundtrip(&mainloop, &core)?;

    if !request.source.is_empty() {
        let s = shared
            .lock()
            .map_err(|_| AudioError::PipeWire("state poisoned".into()))?;
        let found = s
            .nodes
            .values()
            .any(|n| n.name == request.source && is_source_class(&n.class));
        if !found {
            let mut available: Vec<String> = s
                .nodes
                .values()
                .filter(|n| is_source_class(&n.class))
                .map(|n| n.name.clone())
                .collect();
            available.sort();
            return Err(AudioError::SourceNotFound {
                name: request.source.clone(),
                available,
            });
        }
    }

    let mut props = pw::properties::properties! {
        *pw::keys::MEDIA_TYPE => "Audio",
        *pw::keys::MEDIA_CATEGORY => "Capture",
        *pw::keys::MEDIA_ROLE => "Communication",
        *pw::keys::NODE_NAME => "utter-capture",
        *pw::keys::APP_NAME => "Utter",
    };
    if !request.source.is_empty() {
        props.insert("target.object", request.source.as_str());
        // If the source disappears, the session manager must not move us to another one.
        props.insert(*pw::keys::NODE_DONT_RECONNECT, "true");
    }
    let stream = pw::stream::StreamBox::new(&core, "utter-capture", props)
        .map_err(|e| AudioError::PipeWire(format!("cannot create the capture stream: {e}")))?;
    let _stream_listener = stream
        .add_local_listener_with_user_data(())
        .state_changed({
            let shared = shared.clone();
            move |stream, _, _old, new| {
                let Ok(mut s) = shared.lock() else { return };
                s.node_id = stream.node_id();
                s.phase = match new {
                    pw::stream::StreamState::Streaming => StreamPhase::Streaming,
                    pw::stream::StreamState::Paused => StreamPhase::Paused,
                    pw::stream::StreamState::Connecting => StreamPhase::Connecting,
                    pw::stream::StreamState::Unconnected => {
                        StreamPhase::Failed(
                            "the stream was disconnected (did the source go away?); it is not moved to another device".into(),
                        )
                    }
                    pw::stream::StreamState::Error(e) => StreamPhase::Failed(e),
                };
            }
        })
        .param_changed({
            let shared = shared.clone();
            move |_, _, id, param| {
                let Some(param) = param else { return };
                if id != spa::param::ParamType::Format.as_raw() {
                    return;
                }
                let mut info = spa::param::audio::AudioInfoRaw::new();
                if info.parse(param).is_err() {
                    return;
                }
                let Ok(mut s) = shared.lock() else { return };
                if (s.rate, s.channels) != (info.rate(), info.channels()) {
                    s.rate = info.rate();
                    s.channels = info.channels();
                    s.ring.clear();
                    if let Some(rec) = &mut s.recording {
                        rec.clear();
                    }
                }
            }
        })
        .process({
            let shared = shared.clone();
            move |stream, _| {
                let Some(mut buffer) = stream.dequeue_buffer() else { return };
                let datas = buffer.datas_mut();
                let Some(data) = datas.first_mut() else { return };
                let chunk = data.chunk();
                let (offset, size) = (chunk.offset() as usize, chunk.size() as usize);
                let Some(bytes) = data.data() else { return };
                let end = (offset + size).min(bytes.len());
                // A NaN or an infinity from a misbehaving driver would poison the gate and
                // the speech-to-text input; it counts as silence.
                let samples: Vec<f32> = bytes[offset.min(end)..end]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .map(|v| if v.is_finite() { v } else { 0.0 })
                    .collect();
                if let Ok(mut s) = shared.lock() {
                    if s.rate != 0 {
                        s.push(&samples);
                    }
                }
            }
        })
        .register()
        .map_err(|e| AudioError::PipeWire(format!("cannot listen to the capture stream: {e}")))?;

    // F32 at the graph's native rate and the source's own channels; we resample ourselves.
    let mut audio_info = spa::param::audio::AudioInfoRaw::new();
    audio_info.set_format(spa::param::audio::AudioFormat::F32LE);
    let object = spa::pod::Object {
        type_: spa::utils::SpaTypes::ObjectParamFormat.as_raw(),
        id: spa::param::ParamType::EnumFormat.as_raw(),
        properties: audio_info.into(),
    };
    let bytes: Vec<u8> = spa::pod::serialize::PodSerializer::serialize(
        std::io::Cursor::new(Vec::new()),
        &spa::pod::Value::Object(object),
    )
    .map_err(|e| AudioError::PipeWire(format!("cannot build the stream format: {e:?}")))?
    .0
    .into_inner();
    let pod = Pod::from_bytes(&bytes)
        .ok_or_else(|| AudioError::PipeWire("cannot build the stream format".into()))?;
    stream
        .connect(
            spa::utils::Direction::Input,
            None,
            pw::stream::StreamFlags::AUTOCONNECT | pw::stream::StreamFlags::MAP_BUFFERS,
            &mut [pod],
        )
        .map_err(|e| AudioError::PipeWire(format!("cannot connect the capture stream: {e}")))?;

    let _stop = stop.attach(mainloop.loop_(), {
        let mainloop = mainloop.clone();
        move |()| mainloop.quit()
    });
    reply(Ok(()));
    mainloop.run();
    let _ = stream.disconnect();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_maps_and_default_metadata() {
        assert_eq!(position_count("[MONO]"), 1);
        assert_eq!(position_count("FL,FR"), 2);
        assert_eq!(position_count("[ FL FR LFE ]"), 3);
        assert_eq!(position_count(""), 0);
        assert_eq!(
            default_name(r#"{ "name": "fake_mic" }"#).as_deref(),
            Some("fake_mic")
        );
        assert_eq!(default_name("not json"), None);
        assert!(is_source_class("Audio/Source"));
        assert!(is_source_class("Audio/Source/Virtual"));
        assert!(!is_source_class("Audio/Sink"));
        assert!(!is_source_class("Audio/SourceX"));
    }

    #[test]
    fn ring_keeps_the_pre_roll_and_recording_stops_at_the_limit() {
        let mut s = Shared::new(100, 1);
        s.rate = 1000;
        s.channels = 2;
        s.push(&[0.5; 1000]); // 0.5 s of stereo at 1 kHz
        assert_eq!(s.ring.len(), 200, "100 ms × 1000 Hz × 2 channels");
        s.recording = Some(s.ring.drain(..).collect());
        s.push(&[0.1; 1000]);
        assert_eq!(s.recording.as_ref().map(Vec::len), Some(1200));
        assert!(!s.truncated);
        s.push(&[0.1; 1000]); // over the 1 s limit (2000 samples)
        assert_eq!(s.recording.as_ref().map(Vec::len), Some(2000));
        assert!(s.truncated);
        assert_eq!(s.frames_seen, 1500);
    }

    #[test]
    fn linked_source_follows_links_into_our_node() {
        let mut s = Shared::new(0, 1);
        assert_eq!(s.linked_source(), None);
        s.node_id = 50;
        let entry = |name: &str| NodeEntry {
            name: name.into(),
            description: String::new(),
            class: "Audio/Source".into(),
        };
        s.nodes.insert(10, entry("mic"));
        s.nodes.insert(11, entry("other"));
        s.links.insert(70, (11, 99));
        assert_eq!(s.linked_source(), None);
        s.links.insert(71, (10, 50));
        assert_eq!(s.linked_source().as_deref(), Some("mic"));
        s.nodes.remove(&10);
        assert_eq!(s.linked_source(), None);
    }
}
