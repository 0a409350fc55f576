//! How the read pool hands results back: quick jobs that queued up are
//! handed back together, and nothing is held back behind a job that may
//! take long.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use respite_engine::{Delivery, Engine, EngineConfig, ReadDone, View};

#[test]
fn quick_jobs_in_a_row_are_handed_back_together_but_never_behind_a_slow_one() {
    let dir = tempfile::tempdir().unwrap();
    // Every call of the delivery: the ids of the jobs it carried.
    let calls: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
    let (ids_tx, ids_rx) = crossbeam_channel::unbounded::<u32>();
    let recorded = calls.clone();
    let delivery: Delivery<()> = Delivery {
        writes: respite_engine::deliver_inline(),
        reads: Arc::new(move |done: Vec<ReadDone>| {
            for d in done {
                d();
            }
            recorded.lock().unwrap().push(ids_rx.try_iter().collect());
        }),
    };
    let engine: Engine<()> = Engine::open_with_delivery(
        EngineConfig {
            path: dir.path().join("t.db"),
            readers: 1,
            ..EngineConfig::default()
        },
        delivery,
    )
    .expect("open");
    // Job 0 holds the only reader until the others are queued.
    let (gate_tx, gate_rx) = crossbeam_channel::bounded::<()>(1);
    let (all_tx, all_rx) = crossbeam_channel::unbounded::<()>();
    // (id, quick): 3 is a slow job (KEYS, say) between quick ones.
    for (id, quick) in [(0, true), (1, true), (2, true), (3, false), (4, true)] {
        let gate_rx = gate_rx.clone();
        let ids_tx = ids_tx.clone();
        let all_tx = all_tx.clone();
        let job = Box::new(move |view: &View<'_, '_>| -> ReadDone {
            if id == 0 {
                gate_rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the others were queued");
            }
            assert_eq!(view.get_string(0, b"missing").expect("read"), None);
            Box::new(move || {
                let _ = ids_tx.send(id);
                let _ = all_tx.send(());
            })
        });
        assert!(engine
            .submit_read(
                job,
                respite_engine::ReadNeeds {
                    snapshot: false,
                    quick
                }
            )
            .is_ok());
    }
    gate_tx.send(()).unwrap();
    for _ in 0..5 {
        all_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("every job answered");
    }
    // The delivery records a call after completing it: wait for the last.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.lock().unwrap().iter().map(Vec::len).sum::<usize>() < 5 {
        assert!(std::time::Instant::now() < deadline, "every call recorded");
        std::thread::sleep(Duration::from_millis(1));
    }
    // 0-2 together; before the slow job runs they are already handed back;
    // the slow one alone; then the last.
    assert_eq!(
        *calls.lock().unwrap(),
        vec![vec![0, 1, 2], vec![3], vec![4]]
    );
}
