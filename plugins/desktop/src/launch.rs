//! The `launch_app` op: start an application from its desktop entry.
//!
//! The entry is found by desktop file id ([`crate::entry`]), its `Exec` line expanded
//! ([`crate::exec`]) and the program started detached ([`crate::spawn`]) in the entry's
//! `Path=` directory when it has one. No shell is involved at any point.

use crate::entry;
use crate::exec::{self, ExecContext};
use crate::spawn;
use crate::{invalid_params, plugin_error};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use utter_protocol::ErrorObject;

/// `{app_id, name?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchArgs {
    /// The desktop file id, e.g. `org.gnome.TextEditor` (a trailing `.desktop` is accepted).
    pub app_id: String,
    /// How the user called the app; used in `detail` only.
    #[serde(default)]
    pub name: Option<String>,
}

/// The JSON Schema of [`LaunchArgs`].
pub fn args_schema() -> Value {
    json!({
        "type": "object",
        "required": ["app_id"],
        "additionalProperties": false,
        "properties": {
            "app_id": {
                "type": "string",
                "minLength": 1,
                "pattern": "^[^/\\u0000]+$",
                "description": "Desktop file id: the .desktop file's path below applications/ with '/' as '-', without .desktop."
            },
            "name": {"type": "string", "description": "The app's name as spoken; informational."}
        }
    })
}

/// Everything needed to start the app, resolved but not yet run.
#[derive(Debug)]
struct Plan {
    entry_path: PathBuf,
    display_name: String,
    argv: Vec<String>,
    program: PathBuf,
    cwd: Option<PathBuf>,
}

/// Run `launch_app`.
///
/// Result: `{ok, dry_run, detail, argv: [..], entry: "<path of the .desktop file>",
/// program: "<resolved executable>", pid?}` (`pid` when started).
///
/// # Errors
///
/// `-32602` for a malformed `app_id`, an entry that does not parse or an invalid `Exec`;
/// `-32000` when no entry has the id, the file cannot be read, the entry is hidden, not an
/// application, needs a terminal or D-Bus activation, its program or `Path=` is missing, or
/// starting it failed.
pub async fn run(args: LaunchArgs, dry_run: bool) -> Result<Value, ErrorObject> {
    let plan = tokio::task::spawn_blocking(move || resolve(&args))
        .await
        .map_err(|e| plugin_error(format!("resolving the desktop entry failed: {e}")))??;
    let entry = plan.entry_path.display().to_string();
    let cwd_note = plan
        .cwd
        .as_ref()
        .map(|d| format!(" in {}", d.display()))
        .unwrap_or_default();
    if dry_run {
        return Ok(json!({
            "ok": true,
            "dry_run": true,
            "detail": format!(
                "would start {} ({entry}) as {:?}{cwd_note}",
                plan.display_name, plan.argv
            ),
            "argv": plan.argv,
            "entry": entry,
            "program": plan.program,
        }));
    }
    let what = spawn::Detached {
        program: &plan.program,
        argv: &plan.argv,
        cwd: plan.cwd.as_deref(),
    };
    let pid = Some(spawn::launch(&what).map_err(|e| {
        plugin_error(format!(
            "cannot start {} ({}) from {entry}: {e}",
            plan.display_name,
            plan.program.display()
        ))
    })?);
    Ok(json!({
        "ok": true,
        "dry_run": false,
        "detail": format!(
            "started {} ({entry}) as {:?}{cwd_note}, pid {}",
            plan.display_name,
            plan.argv,
            pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
        ),
        "argv": plan.argv,
        "entry": entry,
        "program": plan.program,
        "pid": pid,
    }))
}

/// Find the entry and work out exactly what would run. Blocking (file system).
fn resolve(args: &LaunchArgs) -> Result<Plan, ErrorObject> {
    let id = entry::normalize_id(&args.app_id).ok_or_else(|| {
        invalid_params(format!(
            "app_id {:?} is not a desktop file id (non-empty, no '/'; e.g. org.gnome.TextEditor)",
            args.app_id
        ))
    })?;
    let dirs = entry::application_dirs();
    let Some(path) = entry::find(id, &dirs) else {
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(plugin_error(format!(
            "no desktop entry with id {id} in {}",
            searched.join(", ")
        ))
        .with_data(json!({"searched": searched})));
    };
    let de = entry::read(&path).map_err(|e| match e {
        entry::ReadError::Io { .. } => plugin_error(e.to_string()),
        entry::ReadError::Invalid { .. } => invalid_params(e.to_string()),
    })?;
    let shown = path.display();

    if de.hidden() {
        return Err(plugin_error(format!(
            "the desktop entry {shown} has Hidden=true: it counts as deleted"
        )));
    }
    if let Some(kind) = de.type_() {
        if kind != "Application" {
            return Err(plugin_error(format!(
                "the desktop entry {shown} is Type={kind}, not an Application"
            )));
        }
    }
    let locales = entry::locale_candidates();
    let name = de
        .name(&locales)
        .map(|n| n.into_owned())
        .unwrap_or_default();
    let display_name = if name.is_empty() {
        id.to_owned()
    } else {
        name.clone()
    };
    if de.terminal() {
        return Err(plugin_error(format!(
            "{display_name} ({shown}) has Terminal=true: it needs a terminal; not supported yet"
        )));
    }
    if let Some(try_exec) = de.try_exec().filter(|t| !t.is_empty()) {
        if spawn::find_program(try_exec, None).is_none() {
            return Err(plugin_error(format!(
                "{display_name} is not installed: TryExec={try_exec} of {shown} is not an \
                 executable (in PATH or as a path)"
            )));
        }
    }
    let Some(exec_line) = de.exec().filter(|e| !e.trim().is_empty()) else {
        if de.dbus_activatable() {
            return Err(plugin_error(format!(
                "{shown} has no Exec and is DBusActivatable: starting apps over D-Bus is not \
                 supported yet"
            )));
        }
        return Err(invalid_params(format!(
            "the desktop entry {shown} has no Exec key"
        )));
    };
    let location = path.to_str().ok_or_else(|| {
        plugin_error(format!(
            "the path of {shown} is not UTF-8, so %k cannot be expanded"
        ))
    })?;
    let ctx = ExecContext {
        name: &name,
        icon: de.icon(),
        location,
    };
    let argv = exec::expand(exec_line, &ctx).map_err(|e| {
        invalid_params(format!("invalid Exec in the desktop entry {shown}: {e}"))
            .with_data(json!({"entry": location, "exec": exec_line}))
    })?;

    let cwd = match de.path().filter(|p| !p.is_empty()) {
        None => None,
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if !dir.is_dir() {
                return Err(plugin_error(format!(
                    "the working directory Path={} of {shown} does not exist",
                    dir.display()
                )));
            }
            Some(dir)
        }
    };
    let program = spawn::find_program(&argv[0], cwd.as_deref()).ok_or_else(|| {
        plugin_error(format!(
            "{display_name} cannot start: the program {:?} from {shown} is not an executable \
             {}",
            argv[0],
            where_looked(&argv[0])
        ))
    })?;
    let display_name = match &args.name {
        Some(asked) if !asked.is_empty() && !asked.eq_ignore_ascii_case(&display_name) => {
            format!("{display_name} (asked for {asked:?})")
        }
        _ => display_name,
    };
    Ok(Plan {
        entry_path: path,
        display_name,
        argv,
        program,
        cwd,
    })
}

fn where_looked(program: &str) -> &'static str {
    if Path::new(program).components().count() > 1 {
        "at that path"
    } else {
        "in PATH"
    }
}
