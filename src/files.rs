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
                crate::log::size(limit)
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
    crate::log::TextLimit::current().bytes / 4
}
