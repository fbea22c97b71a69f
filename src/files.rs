//! Files a user names, read whole but never past a bound: a policy file, the
//! configuration or a transcript may be a device or a pipe that never ends
//! (`/dev/zero`), and nothing a user names gets ctxlens killed for memory.

use std::io::{self, Read};
use std::path::Path;

/// The most a policy file or the configuration is read of (1 MiB: the
/// shipped policies are a few hundred bytes).
pub const SMALL: u64 = 1 << 20;

/// The bytes of `path`, a text file: an error when it holds more than
/// `limit` (`what` names the kind of file in it: "a policy file"), or a NUL
/// byte where `nul` says it cannot be (`/dev/zero` is refused at once).
pub fn read(path: &Path, limit: u64, what: &str, nul: Nul) -> io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {}, the most ctxlens reads of {what}",
                size(limit)
            ),
        )
    };
    // A regular file says its size; a device or a pipe is read to the bound.
    let known = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if known.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(known.unwrap_or(0) as usize);
    let mut chunk = vec![0; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let refused = match nul {
            Nul::Refused => true,
            Nul::InFilesOnly => known.is_none(),
        };
        if let Some(at) = chunk[..n].iter().position(|&b| b == 0).filter(|_| refused) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a NUL byte at offset {}: binary data, not {what}",
                    bytes.len() + at
                ),
            ));
        }
        if (bytes.len() + n) as u64 > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// Where a NUL byte may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nul {
    /// Nowhere: a policy or a configuration never holds one.
    Refused,
    /// In a regular file (a transcript a crash padded with zeros is read,
    /// its broken line warned about), not in a device or a pipe.
    InFilesOnly,
}

/// As [`read`], as text, a NUL byte refused: bytes that are not UTF-8 are an error.
pub fn read_text(path: &Path, limit: u64, what: &str) -> io::Result<String> {
    String::from_utf8(read(path, limit, what, Nul::Refused)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The most an import reads of one transcript: a quarter of what a load
/// may hold (a transcript's JSON takes a few times its size once parsed).
pub fn transcript_limit() -> u64 {
    TextLimit::current().bytes / 4
}

/// The most text (event contents and meta, summaries, model calls' records)
/// one load holds in memory, and where that figure comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextLimit {
    pub bytes: u64,
    pub source: String,
}

/// The variable that sets the text limit, in bytes or with a K, M or G suffix.
pub const TEXT_LIMIT_VAR: &str = "CTXLENS_MAX_TEXT";

/// The limit when the memory available cannot be read.
const DEFAULT_TEXT_LIMIT: u64 = 16 << 30;

impl TextLimit {
    /// `CTXLENS_MAX_TEXT` when set; otherwise half the memory available now
    /// (the lower of the system's MemAvailable and what the cgroup allows),
    /// at most 16 GiB. A load peaks at about 1.4 times its text, so half
    /// leaves room for the work after it.
    pub fn current() -> TextLimit {
        if let Some(bytes) = std::env::var(TEXT_LIMIT_VAR)
            .ok()
            .and_then(|v| parse_size(&v))
        {
            return TextLimit {
                bytes,
                source: format!("set by {TEXT_LIMIT_VAR}"),
            };
        }
        match available_memory() {
            Some(available) if available / 2 < DEFAULT_TEXT_LIMIT => TextLimit {
                bytes: available / 2,
                source: format!(
                    "half the {} of memory available; {TEXT_LIMIT_VAR} sets another limit",
                    size(available)
                ),
            },
            _ => TextLimit {
                bytes: DEFAULT_TEXT_LIMIT,
                source: format!("the default; {TEXT_LIMIT_VAR} sets another limit"),
            },
        }
    }
}

/// "12345", "64K", "300M" or "2G" as bytes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (at, 'k' | 'K') => (&text[..at], 10),
        (at, 'm' | 'M') => (&text[..at], 20),
        (at, 'g' | 'G') => (&text[..at], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Bytes of memory this process could still take: MemAvailable, lowered to
/// what the cgroup (v2) still allows where it sets a limit. `None` where
/// neither can be read (outside Linux).
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let system = meminfo.as_deref().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    });
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let cgroup =
        read("memory.max").map(|max| max.saturating_sub(read("memory.current").unwrap_or(0)));
    match (system, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Bytes in the largest unit that keeps a whole number in front: "1.5 GiB".
pub fn size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            return format!("{:.1} {unit}", bytes as f64 / scale as f64);
        }
    }
    format!("{bytes} bytes")
}
