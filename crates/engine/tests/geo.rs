//! GEO searches on a real database of 100,000 points: each search finds
//! exactly the points a scan of the whole set finds inside the shape, and
//! reads only the members of the nine geohash cells around it (a few
//! hundred rows), never the set.

use std::collections::BTreeSet;
use std::time::Duration;

mod common;

use common::write;
use respite_engine::geo::{self, Search, Shape};
use respite_engine::zset::AddFlags;
use respite_engine::{Engine, EngineConfig, Kind, ReadNeeds, Txn, View};

/// A small deterministic generator (the test must not depend on luck).
struct Lcg(u64);

impl Lcg {
    /// A float in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `f` on a reader and returns what it gives.
fn read<T: Send + 'static>(
    engine: &Engine<()>,
    f: impl FnOnce(&View<'_, '_>) -> T + Send + 'static,
) -> T {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let job = Box::new(move |view: &View<'_, '_>| {
        let out = f(view);
        let done: respite_engine::ReadDone = Box::new(move || {
            let _ = tx.send(out);
        });
        done
    });
    assert!(engine
        .submit_read(
            job,
            ReadNeeds {
                snapshot: true,
                quick: false
            }
        )
        .is_ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("reader answered")
}

#[test]
fn searches_read_only_their_cells() {
    let dir = tempfile::tempdir().unwrap();
    let engine: Engine<()> = Engine::open(EngineConfig {
        path: dir.path().join("t.db"),
        readers: 1,
        ..EngineConfig::default()
    })
    .expect("open");
    // 100,000 points spread over two degrees by two around Sicily: about
    // 2.5 per square kilometre.
    let mut rng = Lcg(26);
    let mut points = Vec::new();
    for i in 0..100_000u32 {
        let lon = 12.0 + 2.0 * rng.unit();
        let lat = 37.0 + 2.0 * rng.unit();
        let score = geo::score_of(lon, lat).expect("inside the limits") as f64;
        points.push((score, format!("p{i}").into_bytes()));
    }
    for chunk in points.chunks(10_000) {
        let chunk = chunk.to_vec();
        write(
            &engine,
            Box::new(move |txn: &mut Txn<'_, '_>| {
                let mut slot = txn.open(0, b"pts", Kind::ZSet)?;
                txn.zset_add(&mut slot, &chunk, AddFlags::default())?;
                Ok(())
            }),
        );
    }
    let searches: Vec<Search> = (0..20)
        .map(|i| Search {
            centre: [12.3 + 1.4 * rng.unit(), 37.3 + 1.4 * rng.unit()],
            shape: if i % 2 == 0 {
                Shape::Radius(2.5)
            } else {
                Shape::Box {
                    width: 4.0,
                    height: 5.0,
                }
            },
            conversion: 1000.0,
        })
        .collect();
    let results = read(&engine, move |view| {
        let row = view.live(0, b"pts", Kind::ZSet).unwrap().expect("the set");
        assert_eq!(row.count, 100_000);
        let all = view.zset_all(row.id).unwrap();
        searches
            .iter()
            .map(|search| {
                let (found, examined) = view.geo_search(row.id, search, 0).unwrap();
                let found: BTreeSet<Vec<u8>> = found.into_iter().map(|p| p.member).collect();
                let scanned: BTreeSet<Vec<u8>> = all
                    .iter()
                    .filter(|(_, score)| search.within(*score).is_some())
                    .map(|(m, _)| m.clone())
                    .collect();
                (found, scanned, examined)
            })
            .collect::<Vec<_>>()
    });
    for (i, (found, scanned, examined)) in results.iter().enumerate() {
        assert_eq!(found, scanned, "search {i}");
        assert!(
            (20..200).contains(&found.len()),
            "search {i} found {}",
            found.len()
        );
        assert!(
            *examined < 3000,
            "search {i} read {examined} members for {} points",
            found.len()
        );
    }
}
