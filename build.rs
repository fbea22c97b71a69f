//! Writes each OpenAI encoding's vocabulary, taken from bpe-openai, as a
//! compact file the counter in `src/tokens/bpe.rs` embeds: every token by
//! rank, one length byte then its bytes. That is all a rank-merge count
//! needs (a few megabytes once indexed), where bpe-openai's whole encoder,
//! built for encoding and decoding too, holds some 70 MB.

use std::path::PathBuf;
use std::{env, fs};

use bpe_openai::byte_pair_encoding::BytePairEncoding;

fn main() {
    write_vocabulary("o200k_base", &bpe_openai::o200k_base().bpe);
    write_vocabulary("cl100k_base", &bpe_openai::cl100k_base().bpe);
    println!("cargo::rerun-if-changed=build.rs");
}

fn write_vocabulary(name: &str, bpe: &BytePairEncoding) {
    let mut out = Vec::new();
    for rank in 0..bpe.num_tokens() as u32 {
        let token = bpe.token_bytes(rank);
        let len = u8::try_from(token.len())
            .unwrap_or_else(|_| panic!("{name}: token {rank} is longer than 255 bytes"));
        out.push(len);
        out.extend_from_slice(token);
    }
    let dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(dir.join(format!("{name}.vocab")), out)
        .unwrap_or_else(|e| panic!("writing the {name} vocabulary: {e}"));
}
