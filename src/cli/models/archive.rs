//! The archives `utter models import` reads a model from: a tar file, plain or
//! gzip-compressed (`.tar`, `.tar.gz`, `.tgz`), or a zip file (`.zip`, and `.whl`: a Python
//! wheel is a zip). Told apart by their first bytes, not their names.
//!
//! An archive is read twice: once to list its members ([`list`]), which checks every one as it
//! is met (so a hostile archive is refused before anything is written), then to hand the
//! chosen members' bytes to the caller ([`read`]). Only regular files and directories are
//! accepted: a member with an absolute path or a `..` component, a link, a device, a FIFO or a
//! sparse file refuses the whole archive. Nothing in here writes to the disk.
//!
//! Tar's extension headers (GNU long names, pax records) are read here, each at most
//! [`MAX_EXTENSION`] bytes, rather than by the `tar` crate, which would read one of any
//! declared length into memory (a gzip bomb could make that gigabytes). A pax `size` that
//! disagrees with its header's is refused: two readers of such an archive would see different
//! files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{Failure, exit, fail};
use crate::cli::output::sanitize;

/// The most members an archive may have (a model has a handful of files; a wheel a few more).
const MAX_MEMBERS: usize = 100_000;

/// The longest GNU long name or pax extension header read.
const MAX_EXTENSION: u64 = 64 * 1024;

/// What kind of archive a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Tar,
    TarGz,
    Zip,
}

impl Kind {
    /// Its name in sentences.
    pub(super) fn what(self) -> &'static str {
        match self {
            Kind::Tar => "tar archive",
            Kind::TarGz => "gzip-compressed tar archive",
            Kind::Zip => "zip archive",
        }
    }
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MemberKind {
    File,
    Dir,
}

/// One member of an archive.
#[derive(Debug, Clone)]
pub(super) struct Member {
    /// Its place among the archive's members (the same in [`list`] and [`read`]).
    pub index: usize,
    /// Its path as the archive writes it (not valid UTF-8 replaced), for messages.
    pub path: String,
    /// Its path's components (`.` and empty ones left out).
    pub parts: Vec<String>,
    pub kind: MemberKind,
    /// The size its header declares, in bytes.
    pub size: u64,
}

/// A member's path in quotes, escaped for the terminal.
fn shown(path: &str) -> String {
    format!("\"{}\"", sanitize(path))
}

/// What `path` is, from its first bytes.
///
/// # Errors
/// Exit 2 with a sentence for a file that is no archive `import` reads (naming the
/// compression it has, when it is a known one).
pub(super) fn detect(path: &Path) -> Result<Kind, Failure> {
    let mut head = Vec::with_capacity(512);
    File::open(path)
        .and_then(|f| f.take(512).read_to_end(&mut head))
        .or_else(|e| {
            fail(
                exit::NOT_DONE,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
    let unpack = "unpack it (e.g. `tar xf FILE`) and import the directory";
    let other = |what: &str| {
        fail(
            exit::USAGE,
            format!(
                "{} is {what}, which `utter models import` does not read; {unpack}",
                path.display()
            ),
        )
    };
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Kind::TarGz)
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Ok(Kind::Zip)
    } else if head.len() >= 262 && &head[257..262] == b"ustar" {
        Ok(Kind::Tar)
    } else if head.len() == 512 && tar_checksum_ok(&head) {
        // An old (v7) tar header: no magic, but a valid checksum.
        Ok(Kind::Tar)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        other("xz-compressed (.xz)")
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        other("zstd-compressed (.zst)")
    } else if head.starts_with(b"BZh") {
        other("bzip2-compressed (.bz2)")
    } else if head.starts_with(&[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c]) {
        other("a 7-Zip archive")
    } else if head.starts_with(b"Rar!") {
        other("a RAR archive")
    } else {
        fail(
            exit::USAGE,
            format!(
                "{} is neither a directory nor an archive `utter models import` reads (.tar, .tar.gz/.tgz, .zip, .whl); give a faster-whisper model directory (holding model.bin, config.json, tokenizer.json, vocabulary.*) or an archive of one",
                path.display()
            ),
        )
    }
}

/// Whether a 512-byte block is a tar header by its checksum (the sum of its bytes with the
/// checksum field read as spaces).
fn tar_checksum_ok(block: &[u8]) -> bool {
    let field = String::from_utf8_lossy(&block[148..156]);
    let Ok(stored) = u32::from_str_radix(field.trim_matches(|c: char| c == ' ' || c == '\0'), 8)
    else {
        return false;
    };
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    sum == stored
}

/// Why an archive at `path` is refused because of `member` (`None` when it is acceptable): an
/// absolute path, `..`, or a member that is not a file or directory (`not_plain`).
fn hostile(path: &Path, raw: &str, not_plain: Option<String>) -> Option<String> {
    let archive = path.display();
    let pieces: Vec<&str> = raw.split(['/', '\\']).collect();
    let drive = pieces
        .first()
        .is_some_and(|p| p.len() == 2 && p.ends_with(':'));
    if raw.starts_with(['/', '\\']) || drive {
        return Some(format!(
            "{archive}: member {} has an absolute path; refused (an archive to import holds relative paths only: a hostile or broken archive); nothing was written",
            shown(raw)
        ));
    }
    if pieces.contains(&"..") {
        return Some(format!(
            "{archive}: member {} climbs out of the archive with '..'; refused (a hostile or broken archive); nothing was written",
            shown(raw)
        ));
    }
    not_plain.map(|what| {
        format!(
            "{archive}: member {} is {what}; refused: an archive to import holds only files and directories (if you trust it, unpack it and import the directory); nothing was written",
            shown(raw)
        )
    })
}

fn parts_of(raw: &str) -> Vec<String> {
    raw.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_owned)
        .collect()
}

fn unreadable(path: &Path, kind: Kind, e: impl std::fmt::Display) -> Failure {
    let hint = match kind {
        Kind::TarGz => {
            "a damaged or truncated archive, or a compressed file that is not a tar archive"
        }
        _ => "a damaged or truncated archive",
    };
    Failure {
        code: exit::NOT_DONE,
        message: format!(
            "cannot read {} as a {}: {e} ({hint}); nothing was written",
            path.display(),
            kind.what()
        ),
    }
}

/// Every member of the archive at `path`, each checked (hostile paths and kinds) and passed to
/// `check` as it is met, so a member declaring more bytes than there is room for stops the
/// reading at once.
///
/// # Errors
/// Exit 1: a member refused (the sentence says which and why), `check`'s failure, or an archive
/// that cannot be read.
pub(super) fn list(
    path: &Path,
    kind: Kind,
    mut check: impl FnMut(&Member) -> Result<(), Failure>,
) -> Result<Vec<Member>, Failure> {
    let mut members = Vec::new();
    let mut keep = |member: Member, _: &mut dyn Read| {
        check(&member)?;
        members.push(member);
        Ok(true)
    };
    match kind {
        Kind::Zip => walk_zip(path, None, &mut keep)?,
        _ => walk_tar(path, kind, &mut keep)?,
    }
    Ok(members)
}

/// Read the archive at `path` again and hand each member of `wanted` (as [`list`] found it)
/// with its bytes to `visit`; stops after the last one.
///
/// # Errors
/// `visit`'s failure; exit 1 for an archive that cannot be read or that changed since
/// [`list`] (a member missing, or of another path or size).
pub(super) fn read(
    path: &Path,
    kind: Kind,
    wanted: &[&Member],
    mut visit: impl FnMut(&Member, &mut dyn Read) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let by_index: BTreeMap<usize, &Member> = wanted.iter().map(|m| (m.index, *m)).collect();
    let Some(&last) = by_index.keys().next_back() else {
        return Ok(());
    };
    let mut seen = 0;
    let changed = |m: &Member| Failure {
        code: exit::NOT_DONE,
        message: format!(
            "{} changed while it was read (member {} is not as it was a moment ago); nothing was installed",
            path.display(),
            shown(&m.path)
        ),
    };
    let mut each = |member: Member, data: &mut dyn Read| {
        if let Some(listed) = by_index.get(&member.index) {
            if listed.path != member.path || listed.size != member.size {
                return Err(changed(listed));
            }
            visit(listed, data)?;
            seen += 1;
        }
        Ok(member.index < last)
    };
    match kind {
        Kind::Zip => walk_zip(path, Some(&by_index), &mut each)?,
        _ => walk_tar(path, kind, &mut each)?,
    }
    if seen != by_index.len() {
        let missing = by_index.values().next().copied();
        return Err(missing.map_or_else(
            || Failure {
                code: exit::NOT_DONE,
                message: format!("{} changed while it was read", path.display()),
            },
            changed,
        ));
    }
    Ok(())
}

/// What `visit` is handed: each member, with a reader of its bytes; it answers whether to go
/// on.
type Visit<'a> = dyn FnMut(Member, &mut dyn Read) -> Result<bool, Failure> + 'a;

/// Walk a zip's members in order (`only`: just those, by index).
fn walk_zip(
    path: &Path,
    only: Option<&BTreeMap<usize, &Member>>,
    visit: &mut Visit<'_>,
) -> Result<(), Failure> {
    let kind = Kind::Zip;
    let file = File::open(path).map_err(|e| unreadable(path, kind, e))?;
    let mut zip =
        zip::ZipArchive::new(BufReader::new(file)).map_err(|e| unreadable(path, kind, e))?;
    if zip.len() > MAX_MEMBERS {
        return fail(
            exit::NOT_DONE,
            format!(
                "{} has {} members, more than the {MAX_MEMBERS} a model archive may have; refused",
                path.display(),
                zip.len()
            ),
        );
    }
    for index in 0..zip.len() {
        if only.is_some_and(|o| !o.contains_key(&index)) {
            continue;
        }
        let member = {
            let entry = zip
                .by_index_raw(index)
                .map_err(|e| unreadable(path, kind, e))?;
            let raw = String::from_utf8_lossy(entry.name_raw()).into_owned();
            let file_type = entry.unix_mode().map(|m| m & 0o170000);
            let not_plain = if entry.is_symlink() {
                Some("a symbolic link".to_owned())
            } else {
                match file_type {
                    None | Some(0) | Some(0o100000) | Some(0o040000) => None,
                    Some(0o020000) => Some("a character device".to_owned()),
                    Some(0o060000) => Some("a block device".to_owned()),
                    Some(0o010000) => Some("a FIFO".to_owned()),
                    Some(0o140000) => Some("a socket".to_owned()),
                    Some(other) => Some(format!("of an unknown type ({other:o})")),
                }
            };
            if let Some(why) = hostile(path, &raw, not_plain) {
                return fail(exit::NOT_DONE, why);
            }
            Member {
                index,
                parts: parts_of(&raw),
                kind: if entry.is_dir() || file_type == Some(0o040000) {
                    MemberKind::Dir
                } else {
                    MemberKind::File
                },
                size: entry.size(),
                path: raw,
            }
        };
        let go_on = if only.is_some() {
            let mut data = zip.by_index(index).map_err(|e| unreadable(path, kind, e))?;
            visit(member, &mut data)?
        } else {
            visit(member, &mut std::io::empty())?
        };
        if !go_on {
            break;
        }
    }
    Ok(())
}

/// The extension headers met before a tar member, which describe it.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    pax_path: Option<Vec<u8>>,
    pax_size: Option<u64>,
}

/// Read all of a (small) extension header's data, at most [`MAX_EXTENSION`] bytes.
fn read_extension(entry: &mut impl Read, size: u64, path: &Path) -> Result<Vec<u8>, Failure> {
    if size > MAX_EXTENSION {
        return fail(
            exit::NOT_DONE,
            format!(
                "{}: an extension header (a long name or pax record) of {size} bytes, more than the {MAX_EXTENSION} one may have; refused (a hostile or broken archive); nothing was written",
                path.display()
            ),
        );
    }
    let mut data = Vec::with_capacity(size as usize);
    entry
        .take(MAX_EXTENSION)
        .read_to_end(&mut data)
        .map_err(|e| unreadable(path, Kind::Tar, e))?;
    Ok(data)
}

/// The `path` and `size` records of a pax extension header (`LEN key=value\n` each).
fn parse_pax(data: &[u8], pending: &mut Pending, path: &Path) -> Result<(), Failure> {
    let broken = || {
        fail(
            exit::NOT_DONE,
            format!(
                "{}: a pax extension header that is not `LENGTH key=value` records; refused (a broken archive); nothing was written",
                path.display()
            ),
        )
    };
    let mut rest = data;
    while !rest.is_empty() {
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            return broken();
        };
        let Some(len) = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|&l| l > space + 1 && l <= rest.len())
        else {
            return broken();
        };
        let record = &rest[space + 1..len];
        let Some(record) = record.strip_suffix(b"\n") else {
            return broken();
        };
        let Some(eq) = record.iter().position(|&b| b == b'=') else {
            return broken();
        };
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => pending.pax_path = Some(value.to_vec()),
            b"size" => {
                let Some(size) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok())
                else {
                    return broken();
                };
                pending.pax_size = Some(size);
            }
            _ => {}
        }
        rest = &rest[len..];
    }
    Ok(())
}

/// Walk a tar's members in order, extension headers read here ([`Pending`]).
fn walk_tar(path: &Path, kind: Kind, visit: &mut Visit<'_>) -> Result<(), Failure> {
    let file = File::open(path).map_err(|e| unreadable(path, kind, e))?;
    let input: Box<dyn Read> = match kind {
        Kind::TarGz => Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file))),
        _ => Box::new(BufReader::new(file)),
    };
    let mut archive = tar::Archive::new(input);
    let entries = archive
        .entries()
        .map_err(|e| unreadable(path, kind, e))?
        .raw(true);
    let mut pending = Pending::default();
    let mut index = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| unreadable(path, kind, e))?;
        let header = entry.header();
        let entry_type = header.entry_type();
        let size = header.entry_size().map_err(|e| unreadable(path, kind, e))?;
        use tar::EntryType as T;
        match entry_type {
            T::GNULongName => {
                let mut name = read_extension(&mut entry, size, path)?;
                while name.last() == Some(&0) {
                    name.pop();
                }
                pending.long_name = Some(name);
                continue;
            }
            T::GNULongLink | T::XGlobalHeader => {
                // A link's target (links are refused anyway) and global records (none of
                // which says anything about a member's path or size).
                read_extension(&mut entry, size, path)?;
                continue;
            }
            T::XHeader => {
                let data = read_extension(&mut entry, size, path)?;
                parse_pax(&data, &mut pending, path)?;
                continue;
            }
            _ => {}
        }
        let described = std::mem::take(&mut pending);
        let raw_bytes = described
            .pax_path
            .or(described.long_name)
            .unwrap_or_else(|| header.path_bytes().into_owned());
        let raw = String::from_utf8_lossy(&raw_bytes).into_owned();
        if let Some(pax_size) = described.pax_size.filter(|&s| s != size) {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{}: member {} declares {size} bytes in its header and {pax_size} in its pax record; refused (a hostile or broken archive: readers would disagree on its contents); nothing was written",
                    path.display(),
                    shown(&raw)
                ),
            );
        }
        let not_plain = match entry_type {
            T::Regular | T::Continuous | T::Directory => None,
            T::Symlink | T::Link => {
                let target = header
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                let what = if entry_type == T::Symlink {
                    "a symbolic link"
                } else {
                    "a hard link"
                };
                Some(format!("{what} (to {})", shown(&target)))
            }
            T::Char => Some("a character device".to_owned()),
            T::Block => Some("a block device".to_owned()),
            T::Fifo => Some("a FIFO".to_owned()),
            T::GNUSparse => Some("a sparse file".to_owned()),
            other => Some(format!(
                "of an unknown type ({:?})",
                other.as_byte() as char
            )),
        };
        if let Some(why) = hostile(path, &raw, not_plain) {
            return fail(exit::NOT_DONE, why);
        }
        if index >= MAX_MEMBERS {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} has more than the {MAX_MEMBERS} members a model archive may have; refused",
                    path.display()
                ),
            );
        }
        let member = Member {
            index,
            parts: parts_of(&raw),
            kind: if entry_type == T::Directory || raw.ends_with('/') {
                MemberKind::Dir
            } else {
                MemberKind::File
            },
            size,
            path: raw,
        };
        index += 1;
        if !visit(member, &mut entry)? {
            break;
        }
    }
    if pending.long_name.is_some() || pending.pax_path.is_some() {
        return Err(unreadable(
            path,
            kind,
            "it ends with a header describing a member that is not there",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_named() {
        let p = Path::new("a.tar");
        assert!(hostile(p, "model/model.bin", None).is_none());
        assert!(hostile(p, "./model/", None).is_none());
        assert!(hostile(p, "a..b/c", None).is_none());
        for (raw, why) in [
            ("/etc/passwd", "absolute path"),
            ("\\x", "absolute path"),
            ("C:/x", "absolute path"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("a\\..\\x", "'..'"),
        ] {
            let e = hostile(p, raw, None).unwrap();
            assert!(e.contains(why), "{raw}: {e}");
        }
        let e = hostile(
            p,
            "m/model.bin",
            Some("a symbolic link (to \"/etc\")".into()),
        )
        .unwrap();
        assert!(e.contains("is a symbolic link"), "{e}");
        assert_eq!(parts_of("./a//b/"), ["a", "b"]);
    }

    #[test]
    fn pax_records_give_path_and_size() {
        let mut pending = Pending::default();
        let data = b"20 path=long/name.b\n11 size=42\n18 mtime=1.000000\n";
        parse_pax(data, &mut pending, Path::new("t")).unwrap();
        assert_eq!(pending.pax_path.as_deref(), Some(&b"long/name.b"[..]));
        assert_eq!(pending.pax_size, Some(42));
        for bad in [
            &b"99 path=x\n"[..],
            b"x path=x\n",
            b"9 pathx\n",
            b"8 path=x",
        ] {
            assert!(
                parse_pax(bad, &mut Pending::default(), Path::new("t")).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn v7_headers_are_known_by_their_checksum() {
        let mut block = vec![0u8; 512];
        block[..5].copy_from_slice(b"a.bin");
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum::<u32>() + 8 * 32;
        block[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        assert!(tar_checksum_ok(&block));
        block[0] = b'b';
        assert!(!tar_checksum_ok(&block));
    }
}
