//! ASCII sparklines, as redis draws them for LATENCY GRAPH.
//!
//! This is redis 7.0's `sparkline.c`, ported line for line so that a graph
//! of the same samples is the same text, byte for byte. A sequence of
//! samples (each a value and an optional label) is drawn `rows` characters
//! high: the range from the smallest to the largest value is cut into
//! `rows * 3` steps, and each row uses three characters (`_`, `-`, `` ` ``,
//! or with the fill option `_`, `o`, `#` and `|` below the curve) to tell
//! three heights apart. Under the graph, after one blank row, each sample's
//! label is written downwards, one character a row. A sequence longer than
//! `columns` is drawn as several such blocks, separated by an empty line.
//!
//! Redis's arithmetic is kept on purpose, quirks included: the step of a
//! sample is `(int)(relval * steps) / relmax` in C, an integer truncation
//! before a floating division, and a flat sequence (every value equal) is
//! drawn on the lowest step.

/// The characters of one row, lowest first (redis's `charset`).
const CHARSET: &[u8; 3] = b"_-`";
/// The same with the fill option (`charset_fill`); `|` fills below.
const CHARSET_FILL: &[u8; 3] = b"_o#";
/// Blank rows between the graph and the labels (`label_margin_top`).
const LABEL_MARGIN_TOP: usize = 1;

/// One sample: its value, and the label written under it.
struct Sample {
    value: f64,
    label: Option<Vec<u8>>,
}

/// Samples to draw, with their range (redis's `struct sequence`).
#[derive(Default)]
pub struct Sequence {
    samples: Vec<Sample>,
    labels: usize,
    min: f64,
    max: f64,
}

impl Sequence {
    /// An empty sequence.
    pub fn new() -> Sequence {
        Sequence::default()
    }

    /// Adds a sample; an empty label is no label
    /// (`sparklineSequenceAddSample`).
    pub fn add(&mut self, value: f64, label: &str) {
        if self.samples.is_empty() {
            self.min = value;
            self.max = value;
        } else if value < self.min {
            self.min = value;
        } else if value > self.max {
            self.max = value;
        }
        let label = (!label.is_empty()).then(|| label.as_bytes().to_vec());
        if label.is_some() {
            self.labels += 1;
        }
        self.samples.push(Sample { value, label });
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Draws the samples `offset..offset + len` (`sparklineRenderRange`).
    fn render_range(&self, out: &mut Vec<u8>, rows: usize, offset: usize, len: usize, fill: bool) {
        let mut relmax = self.max - self.min;
        if relmax == 0.0 {
            relmax = 1.0;
        }
        let steps = (CHARSET.len() * rows) as i64;
        let samples = &self.samples[offset..offset + len];
        let mut row = 0usize;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; len];
            for (j, s) in samples.iter().enumerate() {
                let relval = s.value - self.min;
                // C: `step = (int) (relval*steps)/relmax;`
                let step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    // The sample's character on this row, if its step
                    // falls in it; with fill, `|` below the curve.
                    more = true;
                    let idx = step - ((rows - row - 1) * CHARSET.len()) as i64;
                    if (0..CHARSET.len() as i64).contains(&idx) {
                        let set = if fill { CHARSET_FILL } else { CHARSET };
                        chars[j] = set[idx as usize];
                    } else if fill && idx >= CHARSET.len() as i64 {
                        chars[j] = b'|';
                    }
                } else {
                    // The blank rows above the labels.
                    if self.labels > 0 && row - rows < LABEL_MARGIN_TOP {
                        more = true;
                        break;
                    }
                    // The labels, one character a row.
                    if let Some(label) = &s.label {
                        let at = row - rows - LABEL_MARGIN_TOP;
                        if let Some(&c) = label.get(at) {
                            more = true;
                            chars[j] = c;
                        }
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.extend_from_slice(&chars);
            out.push(b'\n');
        }
    }

    /// Draws the whole sequence `rows` high, in blocks of at most
    /// `columns` samples (`sparklineRender`); `fill` is redis's
    /// `SPARKLINE_FILL`.
    pub fn render(&self, out: &mut Vec<u8>, columns: usize, rows: usize, fill: bool) {
        let columns = columns.max(1);
        for start in (0..self.samples.len()).step_by(columns) {
            let len = (self.samples.len() - start).min(columns);
            if start != 0 {
                out.push(b'\n');
            }
            self.render_range(out, rows, start, len, fill);
        }
    }
}

/// LATENCY GRAPH's width, in samples (`LATENCY_GRAPH_COLS`).
const LATENCY_GRAPH_COLS: usize = 80;

/// LATENCY GRAPH's text for an event (`latencyCommandGenSparkeline`):
/// a title with the highest and lowest sample and the all-time high, a
/// rule, and the samples (`(unix seconds, milliseconds)`, oldest first)
/// drawn four rows high, each labelled with how long ago it was, as of
/// `now` (unix seconds).
pub fn latency_graph(event: &str, samples: &[(u64, u64)], all_time_max: u64, now: u64) -> Vec<u8> {
    let mut seq = Sequence::new();
    let (mut min, mut max) = (0u64, 0u64);
    for &(time, ms) in samples {
        if seq.is_empty() {
            (min, max) = (ms, ms);
        } else {
            max = max.max(ms);
            min = min.min(ms);
        }
        // Redis's `int elapsed = time(NULL) - sample time`.
        let elapsed = now as i64 - time as i64;
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 3600 * 24 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / (3600 * 24))
        };
        seq.add(ms as f64, &label);
    }
    let mut out =
        format!("{event} - high {max} ms, low {min} ms (all time high {all_time_max} ms)\n")
            .into_bytes();
    out.extend_from_slice(&[b'-'; LATENCY_GRAPH_COLS]);
    out.push(b'\n');
    seq.render(&mut out, LATENCY_GRAPH_COLS, 4, true);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases drawn by redis 7.0's own `sparkline.c` and
    /// `latencyCommandGenSparkeline` (compiled with a fixed `now` in place
    /// of `time(NULL)`): each `.in` is `event all-time-max now` then one
    /// `time latency` line a sample; its `.out` is redis's text.
    const CASES: &[(&str, &str, &str)] = &[
        (
            "three",
            include_str!("testdata/sparkline/three.in"),
            include_str!("testdata/sparkline/three.out"),
        ),
        (
            "one",
            include_str!("testdata/sparkline/one.in"),
            include_str!("testdata/sparkline/one.out"),
        ),
        (
            "flat",
            include_str!("testdata/sparkline/flat.in"),
            include_str!("testdata/sparkline/flat.out"),
        ),
        (
            "ages",
            include_str!("testdata/sparkline/ages.in"),
            include_str!("testdata/sparkline/ages.out"),
        ),
        (
            "ramp85",
            include_str!("testdata/sparkline/ramp85.in"),
            include_str!("testdata/sparkline/ramp85.out"),
        ),
        (
            "wave160",
            include_str!("testdata/sparkline/wave160.in"),
            include_str!("testdata/sparkline/wave160.out"),
        ),
    ];

    fn numbers(line: &str) -> Vec<u64> {
        line.split_whitespace()
            .map(|n| n.parse().expect("number"))
            .collect()
    }

    #[test]
    fn latency_graph_is_redis_text_byte_for_byte() {
        for (name, input, expected) in CASES {
            let mut lines = input.lines();
            let head: Vec<&str> = lines.next().expect("head").split(' ').collect();
            let (event, max, now) = (
                head[0],
                head[1].parse().expect("max"),
                head[2].parse().expect("now"),
            );
            let samples: Vec<(u64, u64)> = lines
                .map(|l| {
                    let n = numbers(l);
                    (n[0], n[1])
                })
                .collect();
            let got = latency_graph(event, &samples, max, now);
            assert_eq!(
                String::from_utf8_lossy(&got),
                *expected,
                "case {name} differs from redis"
            );
        }
    }

    #[test]
    fn without_fill_only_the_curve_is_drawn() {
        // Values 0, 5, 11 over 2 rows (6 steps): steps 0, 2, 5 — the low
        // row shows `_` and `` ` ``, the high row `` ` ``.
        let mut seq = Sequence::new();
        for v in [0.0, 5.0, 11.0] {
            seq.add(v, "");
        }
        let mut out = Vec::new();
        seq.render(&mut out, 80, 2, false);
        assert_eq!(String::from_utf8_lossy(&out), "  `\n_` \n");
    }
}
