//! Content digests of files: SHA-256 and XXH3 (64-bit) for drover, MD5 and XXHash32 for
//! clients written for Cassandra Sidecar. Each is written as Sidecar writes it, so that a
//! Sidecar client compares drover's with its own: MD5 in standard Base64 with padding,
//! XXHash32 as Java's `Long.toHexString` (lower-case hex, no leading zeros); SHA-256 and
//! XXH3 (drover's) in lower-case hex of their full width.

use std::io::Read;
use std::path::Path;

use sha2::Digest as _;

/// A digest algorithm, as named in `?digestAlgorithm=` (case-insensitive).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// SHA-256.
    Sha256,
    /// XXH3, 64-bit (fast, not cryptographic).
    Xxh3,
    /// MD5 (for Sidecar clients).
    Md5,
    /// XXHash32, seed 0 (for Sidecar clients).
    Xxhash32,
}

/// A digest algorithm drover does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown digest algorithm {0:?}; expected sha256, xxh3, md5 or xxhash32")]
pub struct UnknownAlgorithm(pub String);

impl std::str::FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "sha256" => Ok(Self::Sha256),
            "xxh3" => Ok(Self::Xxh3),
            "md5" => Ok(Self::Md5),
            "xxhash32" | "xxh32" => Ok(Self::Xxhash32),
            _ => Err(UnknownAlgorithm(s.to_string())),
        }
    }
}

/// The names `?digestAlgorithm=` and verification tasks accept, as the refusal of another
/// lists them (the Sidecar's two as it spells them, then drover's).
pub const ACCEPTED: [&str; 4] = ["MD5", "XXHash32", "sha256", "xxh3"];

/// The refusal of an algorithm no one knows: the Sidecar's text ("Unsupported digest algorithm
/// <name>") first, so its clients still match it, then the names accepted, which the Sidecar
/// does not say.
pub fn unsupported(name: &str) -> String {
    format!(
        "Unsupported digest algorithm {name}; accepted (any case): {}",
        ACCEPTED.join(", ")
    )
}

impl Algorithm {
    /// The name the API uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Xxh3 => "xxh3",
            Self::Md5 => "md5",
            Self::Xxhash32 => "xxhash32",
        }
    }

    /// A hasher for this algorithm.
    pub fn hasher(self) -> Hasher {
        match self {
            Self::Sha256 => Hasher::Sha256(Box::default()),
            Self::Xxh3 => Hasher::Xxh3(Box::default()),
            Self::Md5 => Hasher::Md5(Box::default()),
            Self::Xxhash32 => Hasher::Xxhash32(xxhash_rust::xxh32::Xxh32::new(0)),
        }
    }
}

/// A digest being computed, fed as bytes arrive (while a file is read or downloaded).
pub enum Hasher {
    /// SHA-256.
    Sha256(Box<sha2::Sha256>),
    /// XXH3-64.
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
    /// MD5.
    Md5(Box<md5::Md5>),
    /// XXHash32.
    Xxhash32(xxhash_rust::xxh32::Xxh32),
}

impl Hasher {
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Xxh3(h) => h.update(bytes),
            Self::Md5(h) => h.update(bytes),
            Self::Xxhash32(h) => h.update(bytes),
        }
    }

    /// The digest, written as Sidecar writes it (see the module's doc).
    pub fn finish(self) -> String {
        match self {
            Self::Sha256(h) => hex(&h.finalize()),
            Self::Xxh3(h) => format!("{:016x}", h.digest()),
            Self::Md5(h) => base64(&h.finalize()),
            Self::Xxhash32(h) => format!("{:x}", h.digest()),
        }
    }
}

/// Whether `text` is a digest as [`Hasher::finish`] writes one for `algorithm` (and so as
/// Sidecar writes MD5 and XXHash32): a destination takes nothing else from a source as a
/// digest.
pub fn well_formed(algorithm: Algorithm, text: &str) -> bool {
    let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match algorithm {
        Algorithm::Sha256 => text.len() == 64 && lower_hex(text),
        Algorithm::Xxh3 => text.len() == 16 && lower_hex(text),
        Algorithm::Md5 => {
            use base64::Engine as _;
            // The standard engine refuses missing padding and stray trailing bits.
            text.len() == 24
                && base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .is_ok_and(|b| b.len() == 16)
        }
        // Java's `Long.toHexString` of a 32-bit value: no leading zeros.
        Algorithm::Xxhash32 => {
            (1..=8).contains(&text.len())
                && lower_hex(text)
                && (text == "0" || !text.starts_with('0'))
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard Base64 with padding (RFC 4648 §4), as Java's `Base64.getEncoder()` writes it.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The digest of a file's content (blocking; 1 MiB reads).
pub fn of_file(path: &Path, algorithm: Algorithm) -> std::io::Result<String> {
    of_reader(std::fs::File::open(path)?, algorithm)
}

/// The digest of everything `reader` gives (blocking; 1 MiB reads): a file already opened
/// safely is hashed without being opened again by name.
pub fn of_reader(mut file: impl Read, algorithm: Algorithm) -> std::io::Result<String> {
    let mut hasher = algorithm.hasher();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from independent tools: SHA-256 and MD5 from Python's `hashlib` (MD5 then
    /// Base64-encoded with Python's `base64.b64encode`), XXHash32 from a pure-Python
    /// implementation of the xxHash spec (which also gives the earlier values of Python's
    /// `xxhash` package), XXH3 from Python's `xxhash` package. `161` is an input whose
    /// XXHash32 has two leading zero digits, which Sidecar's `Long.toHexString` drops.
    #[test]
    fn known_digests() {
        let digest = |a: Algorithm, data: &[u8]| {
            let mut h = a.hasher();
            h.update(data);
            h.finish()
        };
        assert_eq!(
            digest(Algorithm::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(Algorithm::Md5, b"abc"), "kAFQmDzST7DWlj99KOF/cg==");
        assert_eq!(digest(Algorithm::Md5, b""), "1B2M2Y8AsgTpgAmY7PhCfg==");
        assert_eq!(digest(Algorithm::Xxhash32, b""), "2cc5d05");
        assert_eq!(digest(Algorithm::Xxhash32, b"161"), "286208");
        assert_eq!(digest(Algorithm::Xxh3, b""), "2d06800538d394c2");
        assert_eq!(digest(Algorithm::Xxhash32, b"abc"), "32d153ff");
        assert_eq!(digest(Algorithm::Xxh3, b"abc"), "78af5f94892f3950");
    }

    /// Files are hashed as they stream, in chunks of any size: every algorithm must give the
    /// digest of the whole input whatever the split. The values come from other
    /// implementations (Python's `xxhash` package, coreutils' `md5sum` and `sha256sum`), so a
    /// hasher that drops or reorders bytes fails here even though both sides of a migration
    /// would agree with each other.
    #[test]
    fn known_digests_of_input_fed_in_pieces() {
        // 10,261 bytes: past XXH3's 240-byte short path and its 1,024-byte blocks, and not a
        // multiple of any algorithm's block.
        let mut data: Vec<u8> = (0..40).flat_map(|_| 0..=255u8).collect();
        data.extend_from_slice(b"drover live migration");
        for (algorithm, expected) in [
            (Algorithm::Xxh3, "12f073f966b98f1a"),
            (Algorithm::Xxhash32, "6d43fa48"),
            // hex 7c48a6558beb4e2789a327280bca3259 (coreutils' md5sum), in Base64.
            (Algorithm::Md5, "fEimVYvrTieJoycoC8oyWQ=="),
            (
                Algorithm::Sha256,
                "c0bcad7b31760edda26d648ced5c5ec79cbc128c87fe892f1c6dd0e41d94487a",
            ),
        ] {
            for splits in [
                vec![],
                vec![1, 2, 3],
                vec![7, 63, 256, 1000, 1024, 4096],
                vec![5000, 5000],
            ] {
                let mut h = algorithm.hasher();
                let mut rest = &data[..];
                for n in splits.iter().copied() {
                    let (piece, tail) = rest.split_at(n);
                    h.update(piece);
                    rest = tail;
                }
                h.update(rest);
                assert_eq!(
                    h.finish(),
                    expected,
                    "{algorithm:?} fed as {splits:?} + rest"
                );
            }
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), &data).unwrap();
            assert_eq!(of_file(file.path(), algorithm).unwrap(), expected);
        }
    }

    #[test]
    fn algorithm_names() {
        assert_eq!("XXHash32".parse::<Algorithm>(), Ok(Algorithm::Xxhash32));
        assert_eq!("MD5".parse::<Algorithm>(), Ok(Algorithm::Md5));
        assert_eq!("SHA-256".parse::<Algorithm>(), Ok(Algorithm::Sha256));
        assert!("crc32".parse::<Algorithm>().is_err());
    }
}
