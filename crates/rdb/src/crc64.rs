//! CRC-64 as Redis computes it for RDB files and DUMP payloads.
//!
//! The "Jones" polynomial 0xad93d23594c935a9, reflected input and output,
//! starting from zero with no final xor: Redis calls `crc64(0, buf, len)`
//! and chains calls by passing the previous result back in, which is what
//! [`Crc64::update`] does. The table is built at compile time from the
//! bit-reversed polynomial, and the bytes go through it eight at a time
//! (slicing-by-8), which keeps the checksum far from the bottleneck of a
//! file import.

/// The Jones polynomial, bit-reversed for the reflected algorithm.
const POLY_REFLECTED: u64 = 0xad93d23594c935a9u64.reverse_bits();

const fn make_tables() -> [[u64; 256]; 8] {
    let mut tables = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut t = 1;
    while t < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        t += 1;
    }
    tables
}

static TABLES: [[u64; 256]; 8] = make_tables();

/// A running CRC-64 (Redis's `crc64`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crc64(u64);

impl Crc64 {
    /// A checksum of nothing yet (0, as Redis starts).
    pub const fn new() -> Self {
        Crc64(0)
    }

    /// Feeds `data` into the checksum.
    pub fn update(&mut self, data: &[u8]) {
        let mut crc = self.0;
        let mut chunks = data.chunks_exact(8);
        for c in &mut chunks {
            let word = crc ^ u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            crc = TABLES[7][(word & 0xff) as usize]
                ^ TABLES[6][((word >> 8) & 0xff) as usize]
                ^ TABLES[5][((word >> 16) & 0xff) as usize]
                ^ TABLES[4][((word >> 24) & 0xff) as usize]
                ^ TABLES[3][((word >> 32) & 0xff) as usize]
                ^ TABLES[2][((word >> 40) & 0xff) as usize]
                ^ TABLES[1][((word >> 48) & 0xff) as usize]
                ^ TABLES[0][(word >> 56) as usize];
        }
        for &b in chunks.remainder() {
            crc = TABLES[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
        }
        self.0 = crc;
    }

    /// The checksum of everything fed so far.
    pub const fn value(&self) -> u64 {
        self.0
    }
}

/// The CRC-64 of `data` in one call.
pub fn crc64(data: &[u8]) -> u64 {
    let mut c = Crc64::new();
    c.update(data);
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_check_value() {
        // The value redis's crc64.c tests itself against.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn chained_equals_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let mut c = Crc64::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), crc64(&data), "split at {split}");
        }
        // Byte at a time against the table path.
        let mut c = Crc64::new();
        for b in &data {
            c.update(std::slice::from_ref(b));
        }
        assert_eq!(c.value(), crc64(&data));
    }
}
