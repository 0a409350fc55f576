//! Key selection.
//!
//! Which keys a workload touches matters as much as which commands it sends:
//! a uniform spread over a large keyspace defeats caches, a zipfian one
//! hammers a few hot keys, a sequential one mimics bulk loads. Every
//! connection owns a `KeyGen` (with its own RNG, so there is no shared state
//! on the hot path) that yields key indices in `0..keyspace`; the caller
//! formats them with the key prefix.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};

/// The distribution requested on the command line.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum KeyPattern {
    /// Every key equally likely: the cache-unfriendly baseline.
    Uniform,
    /// Each connection walks the keyspace in order, wrapping around.
    Sequential,
    /// A bell centred on the middle of the keyspace.
    Gaussian,
    /// A few hot keys and a long tail (exponent from `--key-zipf`).
    Zipf,
}

/// A `KeyPattern` made concrete for one keyspace, with the sampler built
/// once rather than per key.
enum Dist {
    Uniform,
    /// The next key this walker will return.
    Sequential(u64),
    Gaussian(Normal<f64>),
    Zipf(Zipf<f64>),
}

/// Yields key indices for one connection and one operation.
pub struct KeyGen {
    /// The keyspace size; never 0.
    n: u64,
    dist: Dist,
    /// Private to this generator, so keys are repeatable for a given seed.
    rng: SmallRng,
}

impl KeyGen {
    /// A generator over `0..keyspace`. `zipf_s` is only used by `Zipf`;
    /// `slot`/`slots` spread sequential walkers over the keyspace so that
    /// connections do not all write the same key at the same moment.
    ///
    /// Should a distribution still reject its (already clamped) parameters,
    /// the generator falls back to uniform rather than failing the run.
    pub fn new(
        pattern: KeyPattern,
        zipf_s: f64,
        keyspace: u64,
        seed: u64,
        slot: u64,
        slots: u64,
    ) -> KeyGen {
        let n = keyspace.max(1);
        let nf = n as f64;
        let dist = match pattern {
            KeyPattern::Uniform => Dist::Uniform,
            KeyPattern::Sequential => Dist::Sequential(n / slots.max(1) * slot % n),
            // memtier's default: centred, a sixth of the keyspace per sigma.
            KeyPattern::Gaussian => match Normal::new(nf / 2.0, (nf / 6.0).max(1.0)) {
                Ok(d) => Dist::Gaussian(d),
                Err(_) => Dist::Uniform,
            },
            KeyPattern::Zipf => match Zipf::new(nf, zipf_s.max(0.0)) {
                Ok(d) => Dist::Zipf(d),
                Err(_) => Dist::Uniform,
            },
        };
        KeyGen {
            n,
            dist,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// The next key index, always below the keyspace size: samples outside
    /// it (a Gaussian's tails) are clamped to the nearest end.
    #[inline]
    pub fn next_key(&mut self) -> u64 {
        match &mut self.dist {
            Dist::Uniform => self.rng.random_range(0..self.n),
            Dist::Sequential(next) => {
                let k = *next;
                *next = (k + 1) % self.n;
                k
            }
            Dist::Gaussian(d) => {
                let v = d.sample(&mut self.rng).round();
                (v.max(0.0) as u64).min(self.n - 1)
            }
            // Zipf samples ranks 1..=n; rank 1 (key 0) is the hottest.
            Dist::Zipf(d) => ((d.sample(&mut self.rng) as u64).max(1) - 1).min(self.n - 1),
        }
    }
}

/// Appends the decimal form of `v` without going through `fmt`.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_stay_in_range() {
        for p in [
            KeyPattern::Uniform,
            KeyPattern::Sequential,
            KeyPattern::Gaussian,
            KeyPattern::Zipf,
        ] {
            let mut g = KeyGen::new(p, 0.99, 100, 7, 1, 4);
            for _ in 0..10_000 {
                assert!(g.next_key() < 100);
            }
        }
        let mut z = KeyGen::new(KeyPattern::Zipf, 0.99, 1000, 1, 0, 1);
        let hot = (0..10_000).filter(|_| z.next_key() == 0).count();
        assert!(hot > 500, "zipf should favour key 0, got {hot}");
        let mut s = KeyGen::new(KeyPattern::Sequential, 0.0, 3, 1, 0, 1);
        let v: Vec<u64> = (0..4).map(|_| s.next_key()).collect();
        assert_eq!(v, vec![0, 1, 2, 0]);
    }

    #[test]
    fn decimal() {
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        push_u64(&mut v, 1234567890);
        assert_eq!(v, b"01234567890");
    }
}
