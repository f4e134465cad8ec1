//! The plugins' `host.*` callbacks (PROTOCOL.md §9.6) and the handle methods every scope
//! shares (§10): what a plugin may ask of the runner, and `fd.pass`.
//!
//! The client socket serves the same handle methods in a client's scope through
//! [`handle_method`] and [`fd_pass`]; `host.action` passes the one gate of
//! [`crate::pipeline`] like every other acting path.

use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

use serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

use crate::audit::AuditEntry;
use crate::context::ContextRead;
use crate::events::Event;
use crate::handles::{Scope, b64_decode, b64_encode};
use crate::params::required_str;
use crate::pipeline::{Author, CommandOptions, ConfirmRequest, Pipeline, Target};
use crate::policy::Provenance;
use crate::runner::Runner;
use crate::supervisor::{Caller, HostHandler};

/// Serves plugins' `host.*` callbacks (PROTOCOL.md §9.6) on behalf of the runner.
pub(crate) struct RunnerHost {
    pub(crate) runner: Weak<Runner>,
}

impl HostHandler for RunnerHost {
    fn handle(
        &self,
        plugin: String,
        epoch: u64,
        method: String,
        params: Value,
        caller: Caller,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ErrorObject>> + Send>> {
        let runner = self.runner.clone();
        Box::pin(async move {
            let Some(runner) = runner.upgrade() else {
                return Err(ErrorObject::plugin("the runner is shutting down"));
            };
            let span = tracing::debug_span!("host", plugin = %plugin, epoch, method = %method);
            tracing::Instrument::instrument(
                runner.host_call(&plugin, epoch, &method, params, caller),
                span,
            )
            .await
        })
    }

    fn notify(&self, plugin: &str, _epoch: u64, method: &str, params: Value) {
        if let Some(runner) = self.runner.upgrade() {
            if method == crate::runner::voice::SPEECH_ENDED {
                runner.speech_ended(plugin, &params);
            }
            runner
                .streams
                .on_plugin_notification(plugin, method, params);
        }
    }

    fn fd_pass(
        &self,
        plugin: &str,
        params: &Value,
    ) -> Result<(Value, std::os::fd::OwnedFd), ErrorObject> {
        let Some(runner) = self.runner.upgrade() else {
            return Err(ErrorObject::plugin("the runner is shutting down"));
        };
        fd_pass(&runner, &Scope::Plugin(plugin.to_owned()), params)
    }
}

/// The provenance tag of a context field, by its key.
fn field_provenance(key: &str) -> Provenance {
    match key {
        "title" | "titles" => Provenance::Title,
        "clipboard" => Provenance::Clipboard,
        "ocr" | "ocr_text" => Provenance::Ocr,
        "a11y" | "accessibility" | "name" | "role" | "label" => Provenance::A11y,
        _ => Provenance::Screen,
    }
}

/// Tag every scalar of a context snapshot as untrusted: `{value, provenance}`, the
/// provenance chosen by the nearest key that says where it came from.
fn tag_untrusted(value: &Value, inherited: Provenance) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let p = match field_provenance(k) {
                        Provenance::Screen => inherited,
                        specific => specific,
                    };
                    (k.clone(), tag_untrusted(v, p))
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| tag_untrusted(v, inherited)).collect())
        }
        scalar => json!({"value": scalar, "provenance": inherited.as_str()}),
    }
}

/// The most candidates one `host.choose` offers.
pub const MAX_CHOICES: usize = 50;

impl Runner {
    /// `host.choose {op, candidates: [{id, summary}], utterance?, method?}` → `{choice_id,
    /// chooser, probability?}`: ask the running chooser (`llm.choose`, or `perception.choose`
    /// when `method` says so) to pick one of a plugin's prepared candidates. The chooser is
    /// called as untrusted (provenance `screen`) and may answer only an offered id
    /// ([`crate::pipeline::check_choice`]); the plugin acts on the candidate it holds under
    /// that id, so nothing the chooser writes becomes an argument.
    ///
    /// # Errors
    /// `-32602` malformed params (2 to [`MAX_CHOICES`] candidates with unique ids of at most
    /// 64 characters and summaries of at most 300); `-32005` no chooser runs; `-32006` the
    /// chooser answered something else than an offered id; the chooser's own error.
    async fn host_choose(
        &self,
        plugin: &str,
        params: &Value,
        timeout: std::time::Duration,
    ) -> Result<Value, ErrorObject> {
        let bad = |why: &str| ErrorObject::invalid_params(format!("host.choose: {why}"));
        let op = params.get("op").and_then(Value::as_str).unwrap_or("");
        if op.is_empty() || op.len() > 64 {
            return Err(bad(
                "\"op\" (what the candidates are for) must be a string of 1 to 64 characters",
            ));
        }
        let Some(offered) = params.get("candidates").and_then(Value::as_array) else {
            return Err(bad("\"candidates\" must be an array of {id, summary}"));
        };
        if offered.len() < 2 || offered.len() > MAX_CHOICES {
            return Err(bad(&format!(
                "offers {} candidates; it takes 2 to {MAX_CHOICES}",
                offered.len()
            )));
        }
        let mut ids: Vec<&str> = Vec::with_capacity(offered.len());
        let mut shown = Vec::with_capacity(offered.len());
        for (i, c) in offered.iter().enumerate() {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            let summary = c.get("summary").and_then(Value::as_str).unwrap_or("");
            if id.is_empty() || id.chars().count() > 64 || ids.contains(&id) {
                return Err(bad(&format!(
                    "candidate {} needs a unique string id of 1 to 64 characters",
                    i + 1
                )));
            }
            if summary.chars().count() > 300 {
                return Err(bad(&format!(
                    "candidate {} has a summary over 300 characters",
                    i + 1
                )));
            }
            ids.push(id);
            shown.push(json!({"id": id, "op": op, "args": {}, "summary": summary}));
        }
        let method = match params.get("method").and_then(Value::as_str) {
            None => "llm.choose",
            Some(m @ ("llm.choose" | "perception.choose")) => m,
            Some(_) => {
                return Err(bad(
                    "\"method\" must be \"llm.choose\" or \"perception.choose\"",
                ));
            }
        };
        let utterance = params
            .get("utterance")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(1000)
            .collect::<String>();
        let Some(chooser) = self.supervisor.find_provider(method, method) else {
            return Err(ErrorObject::new(
                ErrorCode::CapabilityMissing,
                format!("no running plugin provides {method}@1 to choose between the candidates"),
            ));
        };
        let answer = self
            .supervisor
            .call_as(
                &chooser,
                method,
                json!({"utterance": utterance, "context": null, "candidates": shown}),
                timeout,
                Provenance::Screen,
            )
            .await?;
        let choice = crate::pipeline::check_choice(&answer, &ids).map_err(|why| {
            ErrorObject::new(
                ErrorCode::UntrustedArgument,
                format!("chooser {chooser:?} {why}; a chooser may only answer {{\"choice_id\": <id of an offered candidate>}}"),
            )
        })?;
        self.audit_trail().record(
            AuditEntry::new(
                &format!("host.choose from plugin {plugin}"),
                method,
                &json!({"choice_id": choice}),
                Provenance::Screen,
                "chosen",
            )
            .plugin(chooser.clone()),
        );
        let mut reply = json!({"choice_id": choice, "chooser": chooser});
        if let Some(p) = answer.get("probability").filter(|p| p.is_number()) {
            reply["probability"] = p.clone();
        }
        Ok(reply)
    }

    /// Serve one `host.*` callback of plugin `plugin` on behalf of `caller` (what the plugin
    /// is serving, and the least trusted provenance among it).
    pub(crate) async fn host_call(
        &self,
        plugin: &str,
        epoch: u64,
        method: &str,
        params: Value,
        caller: Caller,
    ) -> Result<Value, ErrorObject> {
        let provenance = caller.provenance;
        let timeout = self.supervisor.rpc_timeout();
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match method {
            "host.context" => {
                let read = self
                    .context
                    .read(&self.supervisor, timeout, Some(plugin))
                    .await;
                match read {
                    ContextRead::NoPlugin => Ok(json!({"snapshot": null, "provenance": "screen"})),
                    ContextRead::Fresh { source, snapshot } => Ok(json!({
                        "snapshot": tag_untrusted(&snapshot, Provenance::Screen),
                        "provenance": "screen",
                        "source": source,
                        "stale": false,
                    })),
                    // The context plugin failed: serve the last good snapshot, marked stale.
                    ContextRead::Failed { source, error } => match self.context.last() {
                        Some((_, snapshot)) => {
                            tracing::warn!(plugin = %source, %error, "serving the last good context snapshot");
                            Ok(json!({
                                "snapshot": tag_untrusted(&snapshot, Provenance::Screen),
                                "provenance": "screen",
                                "source": source,
                                "stale": true,
                            }))
                        }
                        None => Err(ErrorObject::plugin(format!(
                            "the context plugin {source:?} failed: {error}"
                        ))),
                    },
                }
            }
            "host.perceive" => {
                let wanted = text("method");
                if !wanted.starts_with("perception.") {
                    return Err(ErrorObject::invalid_params(format!(
                        "host.perceive needs a \"method\" of the perception.* family, got {wanted:?}"
                    )));
                }
                let family = wanted.clone();
                let Some(target) = self
                    .supervisor
                    .find_provider(&family, &wanted)
                    .or_else(|| self.supervisor.find_provider("perception", &wanted))
                else {
                    return Err(ErrorObject::new(
                        ErrorCode::CapabilityMissing,
                        format!("no running plugin provides {wanted}"),
                    ));
                };
                let inner = params.get("params").cloned().unwrap_or_else(|| json!({}));
                let result = self
                    .supervisor
                    .call_as(&target, &wanted, inner, timeout, Provenance::Screen)
                    .await?;
                Ok(json!({"value": result, "provenance": "screen", "plugin": target}))
            }
            "host.action" => {
                let op = text("op");
                if op.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.action needs {op, args}: \"op\" is missing",
                    ));
                }
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                let confirm_requested = crate::params::optional_bool(&params, "confirm")?;
                // Asked of the person who gave the command the plugin is serving (their door
                // first), else of the passive doors.
                let confirmer = match caller.serving.as_ref().and_then(|s| s.confirmer.clone()) {
                    Some(confirmer) => confirmer,
                    None => self.confirmer(None, None),
                };
                let policy = || self.policy();
                let label = format!("host.action from plugin {plugin} (epoch {epoch})");
                // The action gets the desktop context as a plan's step does (the input
                // plugin needs the outputs to place the pointer). Read without the asking
                // plugin, which may itself be the context plugin and is busy asking.
                let options = CommandOptions {
                    context: self
                        .context
                        .read(&self.supervisor, timeout, Some(plugin))
                        .await
                        .snapshot()
                        .cloned(),
                    ..Default::default()
                };
                let result = Pipeline {
                    supervisor: &self.supervisor,
                    policy: &policy,
                    confirmer: &confirmer,
                    audit: Some(self.audit_trail()),
                    context: &self.context,
                    input_rate: &self.input_rate,
                    history: None,
                    dictation: None,
                }
                .run_one(
                    &label,
                    &op,
                    &args,
                    provenance,
                    confirm_requested,
                    Target::Action,
                    Author::Plugin {
                        plugin: plugin.to_owned(),
                        serving: caller.serving.as_ref().map(|s| s.step.clone()),
                    },
                    &options,
                )
                .await;
                match &result.error {
                    Some(e) if result.plugin.is_none() => Err(e.clone()),
                    _ => Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
                }
            }
            "host.confirm" => {
                let op = text("op");
                if op.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.confirm needs {op, args, summary}: \"op\" is missing",
                    ));
                }
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                // The plugin's own words, shown escaped: its question binds to nothing the
                // runner runs (an acting step goes through host.action, which asks itself).
                let summary = format!(
                    "plugin {plugin} asks: {}",
                    utter_protocol::text::clip(&text("summary"), 300)
                );
                let request = ConfirmRequest::new(&op, &args, provenance, &summary);
                let resolution = self.confirmations.ask(request, None).await;
                self.audit_trail().record(
                    AuditEntry::new(
                        &format!("host.confirm from plugin {plugin}"),
                        &op,
                        &args,
                        provenance,
                        if resolution.approved {
                            "confirmed"
                        } else {
                            "denied"
                        },
                    )
                    .by(resolution.by.clone())
                    .plugin(plugin),
                );
                Ok(json!({"approved": resolution.approved, "by": resolution.by}))
            }
            // A plugin's own tie: several prepared candidates (elements of an app that match
            // the person's words equally well), one of which an untrusted chooser picks.
            "host.choose" => self.host_choose(plugin, &params, timeout).await,
            "host.emit" => {
                let event = text("event");
                if event.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.emit needs {event, data}: \"event\" is missing",
                    ));
                }
                self.publish(Event::PluginEvent {
                    plugin: plugin.to_owned(),
                    event,
                    data: params.get("data").cloned().unwrap_or(Value::Null),
                });
                Ok(json!({"delivered": true}))
            }
            // The plugin's own handle scope (PROTOCOL.md §10.1).
            "handle.create" | "handle.fetch" | "handle.stat" | "handle.retain"
            | "handle.release" => {
                handle_method(self, &Scope::Plugin(plugin.to_owned()), method, &params)
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// Handles adopted from one reply at most.
const MAX_ADOPTED: usize = 16;

/// Handles in a plugin's reply that the store does not hold are fetched from the plugin
/// (`handle.fetch {handle}` → `{data_b64}`) and adopted into its scope, but only when the
/// bytes hash to the digest the handle names (the older runner trusted the plugin's word).
pub(crate) async fn adopt_handles(
    supervisor: &crate::supervisor::Supervisor,
    store: &crate::handles::HandleStore,
    plugin: &str,
    scope: &Scope,
    result: &Value,
) {
    for digest in store.unknown(result).into_iter().take(MAX_ADOPTED) {
        let handle = format!("{}{digest}", crate::handles::PREFIX);
        let timeout = supervisor.effective_timeout(None);
        let outcome = match supervisor
            .call(plugin, "handle.fetch", json!({"handle": handle}), timeout)
            .await
        {
            Ok(reply) => match reply
                .get("data_b64")
                .and_then(Value::as_str)
                .and_then(b64_decode)
            {
                Some(bytes) => store
                    .adopt(scope, &digest, &bytes)
                    .map_err(ErrorObject::from),
                None => Err(ErrorObject::invalid_params(
                    "its handle.fetch reply has no valid data_b64",
                )),
            },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => tracing::debug!(plugin, %handle, "handle adopted from a plugin"),
            Err(e) => {
                tracing::warn!(plugin, %handle, error = %e.message, "a plugin's handle was not adopted")
            }
        }
    }
}

/// `handle.create`, `handle.fetch`, `handle.stat`, `handle.retain` and `handle.release`
/// (PROTOCOL.md §10) in `scope`.
///
/// # Errors
/// `-32005` when the store is unavailable or a quota is exceeded, `-32602` for bad params,
/// the store's errors for an unknown or foreign handle.
pub fn handle_method(
    runner: &Runner,
    scope: &Scope,
    method: &str,
    params: &Value,
) -> Result<Value, ErrorObject> {
    let store = runner.handles.as_ref().ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::CapabilityMissing,
            "the handle store is unavailable (its directory could not be made; see the runner log)",
        )
    })?;
    if method == "handle.create" {
        let bytes = create_bytes(params, store.share())?;
        return Ok(store.create(scope, &bytes)?);
    }
    let handle = required_str(params, "handle", method)?;
    match method {
        "handle.fetch"
            if params.get("offset").is_some_and(|v| !v.is_null())
                || params.get("length").is_some_and(|v| !v.is_null()) =>
        {
            let number = |key: &str| match params.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    ErrorObject::invalid_params(format!(
                        "handle.fetch: {key} must be a whole number of bytes"
                    ))
                }),
            };
            let offset = number("offset")?.unwrap_or(0);
            let length = number("length")?.unwrap_or(crate::handles::MAX_INLINE);
            let (size, bytes) = store.read_range(scope, handle, offset, length)?;
            let digest = crate::handles::parse(handle).unwrap_or_default();
            Ok(json!({
                "offset": offset,
                "length": bytes.len(),
                "size": size,
                "sha256": digest,
                "data_b64": b64_encode(&bytes),
            }))
        }
        "handle.fetch" => {
            let bytes = store.fetch(scope, handle)?;
            let digest = crate::handles::digest_hex(&bytes);
            Ok(json!({"size": bytes.len(), "sha256": digest, "data_b64": b64_encode(&bytes)}))
        }
        "handle.stat" => Ok(store.stat(scope, handle)?),
        "handle.retain" => Ok(store.retain(scope, handle)?),
        _ => Ok(store.release(scope, handle)?),
    }
}

/// `fd.pass {kind, meta}`: the result and the descriptor its response frame carries.
///
/// * `handle`: a read-only descriptor of `meta.handle`'s blob; `{kind, handle, size}`.
/// * `memfd`: a sealed memfd (close-on-exec; it cannot grow or shrink) holding `meta.data`
///   (a string) or `meta.data_b64`, at least `meta.size` bytes; `{kind, size}`.
/// * `memfd.ring`: a ring of `meta.capacity` slots of `meta.frame_size` bytes (PROTOCOL.md
///   §10.4), holding the frames of `meta.frames` (strings) if given, closed when
///   `meta.close` is true; `{kind, capacity, frame_size}`.
///
/// # Errors
/// `-32602` for bad params, `-32005` over the quota or without a store.
pub fn fd_pass(
    runner: &Runner,
    scope: &Scope,
    params: &Value,
) -> Result<(Value, std::os::fd::OwnedFd), ErrorObject> {
    let kind = required_str(params, "kind", "fd.pass")?;
    let meta = match params.get("meta") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "fd.pass: params.meta must be an object",
            ));
        }
    };
    let quota = runner
        .handles
        .as_ref()
        .map_or(crate::handles::DEFAULT_QUOTA, |h| h.share());
    match kind {
        "handle" => {
            let store = runner.handles.as_ref().ok_or_else(|| {
                ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    "the handle store is unavailable",
                )
            })?;
            let handle = required_str(&meta, "handle", "fd.pass {kind: \"handle\"} (meta)")?;
            let file = store.open_blob(scope, handle)?;
            let size = file
                .metadata()
                .map_err(|e| ErrorObject::internal(format!("fd.pass: {e}")))?
                .len();
            Ok((
                json!({"kind": "handle", "handle": handle, "size": size}),
                file.into(),
            ))
        }
        "memfd" => {
            let data = if let Some(text) = meta.get("data_b64").and_then(Value::as_str) {
                b64_decode(text).ok_or_else(|| {
                    ErrorObject::invalid_params("fd.pass: meta.data_b64 is not valid base64")
                })?
            } else {
                match meta.get("data") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(_) => {
                        return Err(ErrorObject::invalid_params(
                            "fd.pass: meta.data must be a string",
                        ));
                    }
                }
            };
            let size = match meta.get("size") {
                None | Some(Value::Null) => data.len() as u64,
                Some(v) => v.as_u64().ok_or_else(|| {
                    ErrorObject::invalid_params(
                        "fd.pass: meta.size must be a whole number of bytes",
                    )
                })?,
            }
            .max(data.len() as u64);
            if size > quota {
                return Err(ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    format!("fd.pass: a memfd of {size} bytes is more than the {quota} byte quota"),
                ));
            }
            let fd = sealed_memfd(&data, size).map_err(|e| {
                ErrorObject::internal(format!("fd.pass: the memfd could not be made: {e}"))
            })?;
            Ok((json!({"kind": "memfd", "size": size}), fd))
        }
        "memfd.ring" => {
            let number = |key: &str| {
                meta.get(key)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!(
                            "fd.pass {{kind: \"memfd.ring\"}} needs meta.{key}, a whole number"
                        ))
                    })
            };
            let capacity = number("capacity")?;
            let frame_size = number("frame_size")?;
            let total = 256 + u64::from(capacity) * (4 + u64::from(frame_size));
            if total > quota {
                return Err(ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    format!("fd.pass: a ring of {total} bytes is more than the {quota} byte quota"),
                ));
            }
            let (mut writer, fd) = utter_protocol::ring::create(capacity, frame_size)
                .map_err(|e| ErrorObject::invalid_params(format!("fd.pass: {e}")))?;
            if let Some(frames) = meta.get("frames").and_then(Value::as_array) {
                for frame in frames {
                    let bytes = frame.as_str().ok_or_else(|| {
                        ErrorObject::invalid_params("fd.pass: meta.frames must hold strings")
                    })?;
                    let pushed = writer.push(bytes.as_bytes()).map_err(|e| {
                        ErrorObject::invalid_params(format!("fd.pass: meta.frames: {e}"))
                    })?;
                    if !pushed {
                        return Err(ErrorObject::invalid_params(
                            "fd.pass: meta.frames holds more frames than the ring's capacity",
                        ));
                    }
                }
            }
            if meta.get("close") == Some(&Value::Bool(true)) {
                writer.close();
            }
            Ok((
                json!({"kind": "memfd.ring", "capacity": capacity, "frame_size": frame_size}),
                fd,
            ))
        }
        other => Err(ErrorObject::invalid_params(format!(
            "fd.pass: unknown kind {other:?} (handle, memfd or memfd.ring)"
        ))),
    }
}

/// A close-on-exec memfd of `size` bytes starting with `data`, sealed against growing,
/// shrinking and further sealing; its offset is back at 0.
fn sealed_memfd(data: &[u8], size: u64) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::{Seek, Write};
    let fd = memfd_create(
        c"utter-memfd",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.set_len(size)?;
    file.write_all(data)?;
    file.rewind()?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(std::io::Error::from)?;
    Ok(file.into())
}

/// The bytes of `handle.create`: `data_b64` (strict base64), else `data` (a string, as
/// UTF-8), else `size` zero bytes (a whole number no larger than the quota).
fn create_bytes(params: &Value, quota: u64) -> Result<Vec<u8>, ErrorObject> {
    if let Some(v) = params.get("data_b64").filter(|v| !v.is_null()) {
        let text = v.as_str().ok_or_else(|| {
            ErrorObject::invalid_params("handle.create: params.data_b64 must be a string")
        })?;
        return b64_decode(text).ok_or_else(|| {
            ErrorObject::invalid_params(
                "handle.create: params.data_b64 is not valid base64 (standard alphabet, padded, no whitespace)",
            )
        });
    }
    if let Some(v) = params.get("data").filter(|v| !v.is_null()) {
        let text = v.as_str().ok_or_else(|| {
            ErrorObject::invalid_params("handle.create: params.data must be a string")
        })?;
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(v) = params.get("size").filter(|v| !v.is_null()) {
        let size = v.as_u64().ok_or_else(|| {
            ErrorObject::invalid_params(
                "handle.create: params.size must be a whole number of bytes",
            )
        })?;
        if size > quota {
            return Err(ErrorObject::new(
                ErrorCode::CapabilityMissing,
                format!("handle quota exceeded: {size} bytes is more than the {quota} byte quota"),
            )
            .with_data(json!({"size": size, "quota": quota})));
        }
        return Ok(vec![0; size as usize]);
    }
    Err(ErrorObject::invalid_params(
        "handle.create needs params.data_b64 (base64), params.data (a string) or params.size (bytes)",
    ))
}
