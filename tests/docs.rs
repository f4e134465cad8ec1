//! The README and the book under `docs/` (built with mdBook by `docs/build.sh`): every
//! relative link and image of README.md, ARCHITECTURE.md, protocol/PROTOCOL.md and
//! docs/src/**/*.md names a file that exists, and every `#anchor` a heading of its file;
//! every `{{#include}}` of a chapter names a file (and anchor) that exists, since mdBook
//! renders a missing anchor as nothing at all; SUMMARY.md lists every chapter; and the
//! README stays short. Plain text processing, no markdown crate: fenced code and inline code
//! are skipped, headings are ATX (`## Title`), and anchors are the slugs GitHub and mdBook
//! both make (lowercase, spaces to `-`, punctuation but `-` and `_` dropped).

use crate::common::repo_root;

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// The README's longest allowed length: set-up, the first commands, what you can say and
/// pointers into the book.
const README_MAX_LINES: usize = 300;

/// One line of a file as mdBook sees it: a chapter's `{{#include}}`s are replaced by the
/// lines they include. `origin` is where the line is written.
struct Line {
    text: String,
    origin: (PathBuf, usize),
}

/// A markdown file and its lines, with a chapter's includes expanded.
struct Doc {
    path: PathBuf,
    lines: Vec<Line>,
}

fn root() -> PathBuf {
    repo_root()
}

/// `path` relative to the repository, for messages.
fn shown(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `a/b/../c` → `a/c`, without touching the file system (the file may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn book_src() -> PathBuf {
    root().join("docs/src")
}

fn in_book(path: &Path) -> bool {
    path.starts_with(book_src())
}

/// Every `.md` file under `dir`, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The files whose links are checked.
fn checked_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("protocol/PROTOCOL.md"),
    ];
    files.extend(markdown_under(&book_src()));
    files
}

/// The lines of `{{#include path:anchor}}` (or `path`, `path:N`, `path:N:M`, `path::M`,
/// `path:N:`) as mdBook takes them from `text`; `Err` says what is wrong.
fn select(text: &str, spec: &str) -> Result<Vec<(usize, String)>, String> {
    let numbered: Vec<(usize, String)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.to_owned()))
        .collect();
    if spec.is_empty() {
        return Ok(numbered);
    }
    let parts: Vec<&str> = spec.split(':').collect();
    let is_range = parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit()));
    if is_range {
        let number = |s: &str| s.parse::<usize>().ok();
        let (from, to) = match parts.as_slice() {
            [n] => (number(n), number(n)),
            [a, b] => (number(a), number(b)),
            _ => return Err(format!("cannot read the line range `{spec}`")),
        };
        let from = from.unwrap_or(1);
        let to = to.unwrap_or(usize::MAX);
        return Ok(numbered
            .into_iter()
            .filter(|(n, _)| *n >= from && *n <= to)
            .collect());
    }
    // An anchor: the lines between `ANCHOR: name` and `ANCHOR_END: name`, without any line
    // that marks an anchor.
    let marks = |line: &str, word: &str| {
        line.split(word).skip(1).any(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            name == spec
        })
    };
    let start = numbered.iter().position(|(_, l)| marks(l, "ANCHOR:"));
    let end = numbered.iter().position(|(_, l)| marks(l, "ANCHOR_END:"));
    match (start, end) {
        (Some(s), Some(e)) if s < e => Ok(numbered[s + 1..e]
            .iter()
            .filter(|(_, l)| !l.contains("ANCHOR:") && !l.contains("ANCHOR_END:"))
            .cloned()
            .collect()),
        _ => Err(format!(
            "no `ANCHOR: {spec}` ... `ANCHOR_END: {spec}` pair (mdBook would include nothing)"
        )),
    }
}

/// The target of an mdBook include directive filling the whole line, if it is one.
fn include_directive(line: &str) -> Option<&str> {
    let inner = line
        .trim()
        .strip_prefix("{{#include ")?
        .strip_suffix("}}")?;
    Some(inner.trim())
}

/// Reads `path`; in the book, its includes are expanded (problems go to `errors`).
fn load(path: &Path, errors: &mut Vec<String>) -> Doc {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let here = (path.to_path_buf(), i + 1);
        let directive = if in_book(path) {
            include_directive(line)
        } else {
            None
        };
        let Some(directive) = directive else {
            lines.push(Line {
                text: line.to_owned(),
                origin: here,
            });
            continue;
        };
        let (file, spec) = directive.split_once(':').unwrap_or((directive, ""));
        let included = normalize(&path.parent().expect("a parent").join(file));
        let where_ = format!("{}:{}", shown(path), i + 1);
        let Ok(included_text) = std::fs::read_to_string(&included) else {
            errors.push(format!(
                "{where_}: {{{{#include {directive}}}}}: no such file {}",
                shown(&included)
            ));
            continue;
        };
        match select(&included_text, spec) {
            Ok(selected) => lines.extend(selected.into_iter().map(|(n, text)| Line {
                text,
                origin: (included.clone(), n),
            })),
            Err(why) => errors.push(format!("{where_}: {{{{#include {directive}}}}}: {why}")),
        }
    }
    Doc {
        path: path.to_path_buf(),
        lines,
    }
}

/// Whether `line` opens or closes a fenced code block: its fence character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The prose of a document, line by line (`None` for lines of fenced code), with inline
/// code spans (which may run over a line break) blanked out.
fn prose(doc: &Doc) -> Vec<Option<String>> {
    let mut out = Vec::new();
    let mut open_fence: Option<(char, usize)> = None;
    let mut code_span: Option<usize> = None;
    for line in &doc.lines {
        if let Some((c, n)) = open_fence {
            if let Some((c2, n2)) = fence(&line.text)
                && c2 == c
                && n2 >= n
                && line.text.trim().chars().all(|x| x == c)
            {
                open_fence = None;
            }
            out.push(None);
            continue;
        }
        if code_span.is_none()
            && let Some(f) = fence(&line.text)
        {
            open_fence = Some(f);
            out.push(None);
            continue;
        }
        if line.text.trim().is_empty() {
            code_span = None;
        }
        let mut visible = String::with_capacity(line.text.len());
        let chars: Vec<char> = line.text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '`' {
                let run = chars[i..].iter().take_while(|&&c| c == '`').count();
                match code_span {
                    Some(n) if n == run => code_span = None,
                    Some(_) => {}
                    None => code_span = Some(run),
                }
                visible.extend(std::iter::repeat_n(' ', run));
                i += run;
                continue;
            }
            visible.push(if code_span.is_some() { ' ' } else { chars[i] });
            i += 1;
        }
        out.push(Some(visible));
    }
    out
}

/// The anchor GitHub and mdBook give a heading's text.
fn slug(heading: &str) -> String {
    // A link in a heading counts by its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find("](") {
        let Some(len) = rest[start..].find(')') else {
            break;
        };
        text.push_str(&rest[..start]);
        rest = &rest[start + len + 1..];
    }
    text.push_str(rest);
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a document's headings (`slug`, then `slug-1`, `slug-2` for repeats), and
/// any `id="..."` or `name="..."` of its HTML.
fn anchors(doc: &Doc) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut found = BTreeSet::new();
    let prose = prose(doc);
    for (line, visible) in doc.lines.iter().zip(&prose) {
        if visible.is_none() {
            continue;
        }
        let text = line.text.trim_start();
        let level = text.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&level) && text[level..].starts_with(' ') {
            let title = text[level..].trim().trim_end_matches('#').trim();
            let id = match title.rsplit_once("{#") {
                Some((_, id)) if id.ends_with('}') => id.trim_end_matches('}').to_owned(),
                _ => {
                    let base = slug(title);
                    let count = seen.entry(base.clone()).or_insert(0);
                    let id = if *count == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{count}")
                    };
                    *count += 1;
                    id
                }
            };
            found.insert(id);
        }
        for attribute in ["id=\"", "name=\""] {
            for piece in line.text.split(attribute).skip(1) {
                if let Some((value, _)) = piece.split_once('"') {
                    found.insert(value.to_owned());
                }
            }
        }
    }
    found
}

/// The link and image targets of one line of prose: `](target)` and `[label]: target`.
fn targets(visible: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = visible;
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        // The target ends at the `)` that balances the `(`.
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        // `<target>` and `target "title"`.
        let target = if let Some(quoted) = inner.strip_prefix('<') {
            quoted.split('>').next().unwrap_or("")
        } else {
            inner.split_whitespace().next().unwrap_or("")
        };
        found.push(target.to_owned());
        rest = &after[end..];
    }
    let trimmed = visible.trim_start();
    if let Some(label_end) = trimmed.strip_prefix('[').and_then(|t| t.find("]:"))
        && let Some(target) = trimmed[1 + label_end + 2..].split_whitespace().next()
    {
        found.push(target.trim_matches(['<', '>']).to_owned());
    }
    found
}

/// Whether a link leaves the repository (`https:`, `mailto:`, ...).
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// `%20` and friends, as a browser reads a link.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && let Ok(hex) = std::str::from_utf8(hex)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every broken link of the checked files, as `file:line: why`, and how many relative links
/// there were.
fn broken_links() -> (Vec<String>, usize) {
    let mut errors = Vec::new();
    let mut docs: HashMap<PathBuf, Doc> = HashMap::new();
    for path in checked_files() {
        let doc = load(&path, &mut errors);
        docs.insert(path, doc);
    }
    let mut anchor_cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut anchors_of = |path: &Path, errors: &mut Vec<String>| -> BTreeSet<String> {
        if let Some(known) = anchor_cache.get(path) {
            return known.clone();
        }
        let found = match docs.get(path) {
            Some(doc) => anchors(doc),
            None => anchors(&load(path, errors)),
        };
        anchor_cache.insert(path.to_path_buf(), found.clone());
        found
    };

    let mut paths: Vec<&PathBuf> = docs.keys().collect();
    paths.sort();
    let mut found = Vec::new();
    let mut checked = 0;
    for path in paths {
        let doc = &docs[path];
        for (line, visible) in doc.lines.iter().zip(prose(doc)) {
            let Some(visible) = visible else { continue };
            for target in targets(&visible) {
                if target.is_empty() || has_scheme(&target) {
                    continue;
                }
                checked += 1;
                let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let file = percent_decode(file);
                let resolved = if file.is_empty() {
                    doc.path.clone()
                } else {
                    normalize(&doc.path.parent().expect("a parent").join(&file))
                };
                let (origin, n) = &line.origin;
                let place = if *origin == doc.path {
                    format!("{}:{n}", shown(&doc.path))
                } else {
                    format!("{} (included from {}:{n})", shown(&doc.path), shown(origin))
                };
                if !resolved.exists() {
                    found.push(format!(
                        "{place}: ({target}): no such file {}",
                        shown(&resolved)
                    ));
                    continue;
                }
                let is_markdown = resolved.extension().is_some_and(|e| e == "md");
                if anchor.is_empty() || !is_markdown {
                    continue;
                }
                let known = anchors_of(&resolved, &mut errors);
                if !known.contains(anchor) {
                    found.push(format!(
                        "{place}: ({target}): {} has no heading with the anchor #{anchor}",
                        shown(&resolved)
                    ));
                }
            }
        }
    }
    errors.extend(found);
    (errors, checked)
}

#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let (broken, checked) = broken_links();
    // The README and the book link to each other and to the source dozens of times; none
    // found would mean the checker no longer reads them.
    assert!(checked >= 100, "only {checked} relative links found");
    assert!(
        broken.is_empty(),
        "{} broken link(s) or include(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn summary_lists_every_chapter_and_every_entry_exists() {
    let src = book_src();
    let summary_path = src.join("SUMMARY.md");
    let summary = std::fs::read_to_string(&summary_path).expect("docs/src/SUMMARY.md");
    let doc = Doc {
        path: summary_path.clone(),
        lines: summary
            .lines()
            .enumerate()
            .map(|(i, l)| Line {
                text: l.to_owned(),
                origin: (summary_path.clone(), i + 1),
            })
            .collect(),
    };
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for (line, visible) in doc.lines.iter().zip(prose(&doc)) {
        let Some(visible) = visible else { continue };
        for target in targets(&visible) {
            if target.is_empty() {
                problems.push(format!(
                    "docs/src/SUMMARY.md:{}: a draft chapter (no file); mdBook would make an empty page",
                    line.origin.1
                ));
                continue;
            }
            let chapter = normalize(&src.join(target.split('#').next().unwrap_or("")));
            if !chapter.is_file() {
                problems.push(format!(
                    "docs/src/SUMMARY.md:{}: ({target}): no such chapter {}",
                    line.origin.1,
                    shown(&chapter)
                ));
            }
            listed.insert(chapter);
        }
    }
    for chapter in markdown_under(&src) {
        if chapter != summary_path && !listed.contains(&chapter) {
            problems.push(format!(
                "{}: not listed in docs/src/SUMMARY.md, so mdBook leaves it out of the book",
                shown(&chapter)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the details into a \
         chapter of the book (docs/src/) and link to it"
    );
}

#[test]
fn the_checker_reads_markdown_as_intended() {
    assert_eq!(slug("9. Trust model"), "9-trust-model");
    assert_eq!(
        slug("10. Streams, handles and `fd.pass`"),
        "10-streams-handles-and-fdpass"
    );
    assert_eq!(
        slug("Checking the installation: `utter doctor`"),
        "checking-the-installation-utter-doctor"
    );
    assert_eq!(
        slug("Inside apps (accessibility)"),
        "inside-apps-accessibility"
    );
    assert_eq!(
        slug("snake_case and kebab-case"),
        "snake_case-and-kebab-case"
    );
    assert_eq!(
        targets("see [a](b.md#c), ![pic](x.png \"title\") and [d](<e f.md>)"),
        ["b.md#c", "x.png", "e f.md"]
    );
    assert_eq!(targets("[label]: ../x.md"), ["../x.md"]);
    assert!(has_scheme("https://example.org") && has_scheme("mailto:a@b"));
    assert!(!has_scheme("docs/src/x.md") && !has_scheme("#anchor"));

    let path = root().join("docs/src/example.md");
    let doc = Doc {
        lines: [
            "# Title",
            "Code `[not](a-link.md)` and a span over",
            "two lines `a](b",
            "c)` done, then [a](real.md).",
            "```toml",
            "# not a heading, [nor](a-link.md)",
            "```",
            "## Title",
        ]
        .iter()
        .enumerate()
        .map(|(i, l)| Line {
            text: (*l).to_owned(),
            origin: (path.clone(), i + 1),
        })
        .collect(),
        path,
    };
    let links: Vec<String> = prose(&doc)
        .into_iter()
        .flatten()
        .flat_map(|l| targets(&l))
        .collect();
    assert_eq!(links, ["real.md"]);
    assert_eq!(
        anchors(&doc),
        BTreeSet::from(["title".to_owned(), "title-1".to_owned()])
    );

    let text = "a\n<!-- ANCHOR: part -->\nb\nc\n<!-- ANCHOR_END: part -->\nd\n";
    assert_eq!(
        select(text, "part").expect("the anchor"),
        [(3, "b".to_owned()), (4, "c".to_owned())]
    );
    assert!(select(text, "other").is_err());
    assert_eq!(
        select(text, "2:3").expect("a range"),
        [(2, "<!-- ANCHOR: part -->".to_owned()), (3, "b".to_owned())]
    );
}
