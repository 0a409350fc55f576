//! Hostile payloads and files: whatever the bytes, decoding gives a value
//! or an error, never a panic or an allocation sized by a declared length.
//! The seeds are real redis-server 7.0 DUMP payloads (the fuzz corpus) and
//! payloads of every type encoded here; each is truncated at every length
//! and mutated at random with its footer recomputed, so the mutations
//! reach the parser instead of stopping at the checksum.

use rand::{Rng, SeedableRng};
use respite_rdb::{crc64, decode_dump, encode_dump, Error, RdbReader, RdbWriter, Value};

fn seeds() -> Vec<Vec<u8>> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/dump_payload"
    );
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("fuzz corpus") {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        // The first byte is the fuzz target's mode (0: payload as is).
        if bytes.first() == Some(&0) {
            out.push(bytes[1..].to_vec());
        }
    }
    assert!(out.len() >= 5, "corpus seeds");
    let b = |s: &str| s.as_bytes().to_vec();
    for v in [
        Value::String(b("x").repeat(100)),
        Value::String(b("-12345")),
        Value::List(vec![b("a"), b("1"), b("a").repeat(50)]),
        Value::Set(vec![b("a"), b("b")]),
        Value::Hash(vec![(b("f"), b("v")), (b("g"), b("w"))]),
        Value::ZSet(vec![(b("m"), 1.5), (b("n"), f64::NEG_INFINITY)]),
    ] {
        out.push(encode_dump(&v));
    }
    out
}

fn refooter(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn redis_payloads_decode() {
    for s in seeds() {
        let v = decode_dump(&s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(decode_dump(&encode_dump(&v)).unwrap(), v);
    }
}

#[test]
fn truncations_and_flips_are_errors() {
    for s in seeds() {
        for cut in 0..s.len() {
            assert!(decode_dump(&s[..cut]).is_err());
            // With a footer that passes: the parser sees a cut object.
            // Either an error or (a prefix that is itself whole) a value.
            let _ = decode_dump(&refooter(&s[..cut.min(s.len() - 10)]));
        }
        for bit in 0..s.len() * 8 {
            let mut p = s.clone();
            p[bit / 8] ^= 1 << (bit % 8);
            assert!(matches!(decode_dump(&p), Err(Error::VersionOrChecksum)));
        }
    }
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let seeds = seeds();
    for _ in 0..100_000 {
        let s = &seeds[rng.random_range(0..seeds.len())];
        let mut body = s[..s.len() - 10].to_vec();
        for _ in 0..rng.random_range(1..4) {
            match rng.random_range(0..4) {
                0 if !body.is_empty() => {
                    let i = rng.random_range(0..body.len());
                    body[i] = rng.random();
                }
                1 if !body.is_empty() => {
                    let i = rng.random_range(0..body.len());
                    body[i] ^= 1 << rng.random_range(0..8);
                }
                2 => {
                    let i = rng.random_range(0..=body.len());
                    body.insert(i, rng.random());
                }
                _ if !body.is_empty() => {
                    let i = rng.random_range(0..body.len());
                    body.remove(i);
                }
                _ => {}
            }
        }
        if let Ok(v) = decode_dump(&refooter(&body)) {
            assert_eq!(decode_dump(&encode_dump(&v)).unwrap(), v);
        }
    }
}

#[test]
fn huge_declared_lengths_are_refused_cheaply() {
    // Type 0 string of 2^62 bytes; list, set, hash, zset of 2^62 elements;
    // LZF string claiming 2^40 bytes out; quicklist of 2^62 nodes.
    let big = {
        let mut b = vec![0x81];
        b.extend_from_slice(&(1u64 << 62).to_be_bytes());
        b
    };
    for t in [0u8, 1, 2, 3, 4, 5, 14, 18] {
        let mut body = vec![t];
        body.extend_from_slice(&big);
        body.extend_from_slice(b"abc");
        assert!(decode_dump(&refooter(&body)).is_err(), "type {t}");
    }
    let mut body = vec![0u8, 0xc3, 0x02];
    body.push(0x81);
    body.extend_from_slice(&(1u64 << 40).to_be_bytes());
    body.extend_from_slice(&[0x00, b'a']);
    assert!(decode_dump(&refooter(&body)).is_err());
}

#[test]
fn rdb_files_truncated_or_mutated() {
    let mut w = RdbWriter::new(Vec::new(), &[(b"redis-ver", b"7.0.15")]).unwrap();
    for (i, s) in seeds().iter().enumerate() {
        let v = decode_dump(s).unwrap();
        w.entry(
            (i % 3) as u64,
            format!("k{i}").as_bytes(),
            &v,
            Some(1 << 42),
        )
        .unwrap();
    }
    let file = w.finish().unwrap();
    let all: Vec<_> = RdbReader::new(&file[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all.len(), seeds().len());
    for cut in 0..file.len() {
        let r: Result<Vec<_>, _> = match RdbReader::new(&file[..cut]) {
            Ok(rd) => rd.collect(),
            Err(e) => Err(e),
        };
        assert!(r.is_err(), "cut {cut}");
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..20_000 {
        let mut f = file.clone();
        let i = rng.random_range(9..f.len());
        f[i] = rng.random();
        if let Ok(rd) = RdbReader::new(&f[..]) {
            let r: Result<Vec<_>, _> = rd.collect();
            // A changed byte is caught: by the parser or by the checksum
            // (unless it changed nothing).
            if f != file {
                assert!(r.is_err());
            }
        }
    }
}
