//! Geospatial indexes: redis 7.0's geohash arithmetic (`geohash.c`,
//! `geohash_helper.c` and the search half of `geo.c`), ported line for
//! line, and the one read a search makes of a sorted set.
//!
//! A GEO key is an ordinary sorted set. A point's score is its 52-bit
//! geohash: the longitude and latitude each cut into 2^26 steps (latitude
//! over Web Mercator's -85.05112878..85.05112878, not -90..90), the two
//! step numbers interleaved bit by bit, latitude in the even bits. So
//! ZRANGE and ZSCORE on a GEO key answer what redis-server answers, and a
//! point's coordinates come back as the centre of its cell, as there.
//!
//! A search never walks the set. Interleaving makes a geohash prefix a
//! rectangular cell, and every point in a cell a contiguous run of scores.
//! [`areas`] picks, as `geohashCalculateAreasByShapeWGS84` does, a step
//! (cell size) from the radius, the cell around the centre and its eight
//! neighbours, and drops the neighbours the shape's bounding box does not
//! reach; [`View::geo_search`] then reads each cell's score range
//! `[min, max)` off the sorted set's score index (`zsets_by_score`), and
//! [`Search::within`] keeps the points inside the circle or box with their
//! distance. A search returning 50 points of a million reads those 9
//! ranges, whatever the set's size.
//!
//! Every float operation is the one redis does, in its order, with the
//! same constants, so distances and coordinates come out bit for bit:
//! `sin`, `cos` and `asin` are the C library's, as redis-server's are. The
//! casts of doubles to integers follow what gcc emits on x86-64 (a score
//! that is not a geohash, added by ZADD, decodes to the same clamped point
//! it decodes to in redis).

use rusqlite::params;

use crate::error::Result;
use crate::view::View;

/// Steps per coordinate: 26, so 52 bits.
pub const STEP_MAX: u8 = 26;
/// The southernmost latitude a point may have (Web Mercator's limit).
pub const LAT_MIN: f64 = -85.05112878;
/// The northernmost latitude.
pub const LAT_MAX: f64 = 85.05112878;
/// The westernmost longitude.
pub const LONG_MIN: f64 = -180.0;
/// The easternmost longitude.
pub const LONG_MAX: f64 = 180.0;
/// The earth's quadratic mean radius for WGS-84, redis's constant.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians, `M_PI / 180.0`.
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash of `step` bits per coordinate (`GeoHashBits`); step 0 with
/// no bits is the "zero" hash, a neighbour left out of a search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    /// The interleaved bits, latitude in the even positions.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl HashBits {
    /// `HASHISZERO`.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A closed interval of one coordinate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Range {
    /// Lower end.
    pub min: f64,
    /// Upper end.
    pub max: f64,
}

/// The cell a hash names (`GeoHashArea`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Area {
    /// The hash.
    pub hash: HashBits,
    /// Its longitudes.
    pub longitude: Range,
    /// Its latitudes.
    pub latitude: Range,
}

/// The ranges of the index redis keeps: all longitudes, Mercator's
/// latitudes.
pub const WGS84: (Range, Range) = (
    Range {
        min: LONG_MIN,
        max: LONG_MAX,
    },
    Range {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// The ranges of a standard geohash (GEOHASH's strings): latitudes -90..90.
pub const STANDARD: (Range, Range) = (
    Range {
        min: -180.0,
        max: 180.0,
    },
    Range {
        min: -90.0,
        max: 90.0,
    },
);

/// Spreads `x`'s bits to the even positions and `y`'s to the odd ones.
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse: even bits to the low half, odd bits to the high half.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// C's conversion of a double to a 64-bit signed integer on x86-64
/// (`cvttsd2si`): truncation, and the "integer indefinite" value for NaN
/// and anything out of range.
pub fn c_double_to_i64(x: f64) -> i64 {
    if x.is_nan() || !(-9223372036854775808.0..9223372036854775808.0).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// C's conversion of a double to `uint64_t` as gcc emits it on x86-64:
/// below 2^63 through the signed conversion, from there after taking
/// 2^63 off and putting the top bit back.
pub fn c_double_to_u64(x: f64) -> u64 {
    const TWO63: f64 = 9223372036854775808.0;
    if x < TWO63 {
        c_double_to_i64(x) as u64
    } else {
        (c_double_to_i64(x - TWO63) as u64) ^ (1 << 63)
    }
}

/// `geohashEncode`: the cell of `step` bits holding the point, or `None`
/// outside the ranges (or with a step out of 1..=32).
pub fn encode(ranges: (Range, Range), longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    let (long_range, lat_range) = ranges;
    let zero = |r: Range| r.max == 0.0 && r.min == 0.0;
    if step > 32 || step == 0 || zero(lat_range) || zero(long_range) {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    // The implicit conversions to `uint32_t` truncate.
    let to_u32 = |x: f64| c_double_to_i64(x) as u32;
    Some(HashBits {
        bits: interleave64(to_u32(lat_offset), to_u32(long_offset)),
        step,
    })
}

/// `geohashEncodeWGS84`.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(WGS84, longitude, latitude, step)
}

/// `geohashDecode`: the cell of a hash (`None` for the zero hash).
pub fn decode(ranges: (Range, Range), hash: HashBits) -> Option<Area> {
    let (long_range, lat_range) = ranges;
    let zero = |r: Range| r.max == 0.0 && r.min == 0.0;
    if hash.is_zero() || zero(lat_range) || zero(long_range) {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    let cells = (1u64 << step) as f64;
    Some(Area {
        hash,
        latitude: Range {
            min: lat_range.min + (ilato as f64 * 1.0 / cells) * lat_scale,
            max: lat_range.min + (ilato.wrapping_add(1) as f64 * 1.0 / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 * 1.0 / cells) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 * 1.0 / cells) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: a cell's centre, clamped to the limits.
fn area_centre(area: &Area) -> [f64; 2] {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// `decodeGeohash`: the point a score stands for, `[longitude, latitude]`.
/// Any score decodes (a step-26 hash is never the zero hash).
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    decode(WGS84, hash).map_or([0.0, 0.0], |a| area_centre(&a))
}

/// `geohashAlign52Bits`: a hash as a 52-bit score.
pub fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - hash.step as u32 * 2)
}

/// The score of a point (GEOADD's), or `None` outside the limits.
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(align52)
}

/// The 11-character standard geohash of a score (GEOHASH's reply): the
/// point decoded, encoded again over -90..90, the last character `0`.
pub fn standard_hash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let bits = encode(STANDARD, lon, lat, 26).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaa >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

/// A hash's eight neighbours (`geohashNeighbors`).
#[derive(Clone, Copy, Debug, Default)]
struct Neighbors {
    north: HashBits,
    east: HashBits,
    west: HashBits,
    south: HashBits,
    north_east: HashBits,
    south_east: HashBits,
    north_west: HashBits,
    south_west: HashBits,
}

fn neighbors(hash: HashBits) -> Neighbors {
    let moved = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: moved(1, 0),
        west: moved(-1, 0),
        south: moved(0, -1),
        north: moved(0, 1),
        north_west: moved(-1, 1),
        north_east: moved(1, 1),
        south_east: moved(1, -1),
        south_west: moved(-1, -1),
    }
}

/// `geohashEstimateStepsByRadius`: the step whose cells are about as big
/// as the search, fewer bits towards the poles.
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// `geohashGetLatDistance`: the distance along a meridian.
pub fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// `geohashGetDistance`: the haversine distance in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The shape of a search (`GeoShape`'s type and sizes, in its unit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// BYRADIUS: a circle of this radius.
    Radius(f64),
    /// BYBOX: a rectangle, axis-aligned, this wide and high.
    Box {
        /// East-west size.
        width: f64,
        /// North-south size.
        height: f64,
    },
}

/// A search: centre, shape, and the unit's size in meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Search {
    /// `[longitude, latitude]` of the centre.
    pub centre: [f64; 2],
    /// The shape, in the unit.
    pub shape: Shape,
    /// Meters per unit.
    pub conversion: f64,
}

impl Search {
    /// `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]`.
    fn bounding_box(&self) -> [f64; 4] {
        let [longitude, latitude] = self.centre;
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let southern = latitude < 0.0;
        let delta = if southern {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - delta,
            latitude - lat_delta,
            longitude + delta,
            latitude + lat_delta,
        ]
    }

    /// `geoWithinShape`: the point a score stands for and its distance
    /// from the centre (in meters), if it lies in the shape.
    pub fn within(&self, score: f64) -> Option<([f64; 2], f64)> {
        let xy = decode_score(score);
        self.within_point(xy).map(|d| (xy, d))
    }

    /// [`Search::within`] of a decoded point: its distance, if inside.
    fn within_point(&self, [x2, y2]: [f64; 2]) -> Option<f64> {
        let [x1, y1] = self.centre;
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(x1, y1, x2, y2);
                (d <= r * self.conversion || d.is_nan()).then_some(d)
            }
            Shape::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(y2, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }

    /// `[min_lon, min_lat, max_lon, max_lat]` outside which no point can
    /// be in the shape, with a margin: a cheap test that spares most of a
    /// cell's points the trigonometry of [`Search::within`], which still
    /// decides every point inside it (so the answer is redis's, bit for
    /// bit). Latitudes differ by at most the half-height over the earth's
    /// radius (haversine's distance is at least that); longitudes by at
    /// most the half-width over the radius, divided by the cosine of the
    /// latitude farthest from the equator, to first order: the margin (1%
    /// and a hair) covers the higher orders. `None` where that reasoning
    /// is not held to (shapes over 100 km across, past 70 degrees of
    /// latitude, or across the antimeridian): every point is measured.
    fn prefilter(&self) -> Option<[f64; 4]> {
        let (half_h, half_w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (half_h, half_w) = (half_h * self.conversion, half_w * self.conversion);
        // (NaN fails these comparisons, and so gets no prefilter.)
        let within_limits = |v: f64, limit: f64| v <= limit;
        if !within_limits(half_h, 100_000.0) || !within_limits(half_w, 100_000.0) {
            return None;
        }
        let [lon, lat] = self.centre;
        let lat_delta = rad_deg(half_h / EARTH_RADIUS_IN_METERS) * 1.01 + 1e-9;
        let far = lat.abs() + lat_delta;
        if !within_limits(far, 70.0) {
            return None;
        }
        let lon_delta = rad_deg(half_w / EARTH_RADIUS_IN_METERS / deg_rad(far).cos()) * 1.01 + 1e-9;
        if !within_limits(LONG_MIN, lon - lon_delta) || !within_limits(lon + lon_delta, LONG_MAX) {
            return None;
        }
        Some([
            lon - lon_delta,
            lat - lat_delta,
            lon + lon_delta,
            lat + lat_delta,
        ])
    }
}

/// Whether `xy` lies outside the [`Search::prefilter`] box (a NaN never
/// does: it goes on to be measured).
fn outside([min_lon, min_lat, max_lon, max_lat]: &[f64; 4], [x, y]: [f64; 2]) -> bool {
    x < *min_lon || x > *max_lon || y < *min_lat || y > *max_lat
}

/// `geohashCalculateAreasByShapeWGS84` with `membersOfAllNeighbors`'s
/// order: the centre's cell, then north, south, east, west, north-east,
/// north-west, south-east, south-west; a neighbour the search cannot
/// reach is the zero hash.
pub fn areas(search: &Search) -> [HashBits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = search.bounding_box();
    let [longitude, latitude] = search.centre;
    let radius_meters = match search.shape {
        Shape::Radius(r) => r,
        Shape::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * search.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let cell = |steps: u8| {
        let hash = encode(WGS84, longitude, latitude, steps).unwrap_or_default();
        (
            hash,
            neighbors(hash),
            decode(WGS84, hash).unwrap_or_default(),
        )
    };
    let (mut hash, mut around, mut area) = cell(steps);
    // Too coarse near an edge of the cell: a neighbour does not reach as
    // far as the bounding box.
    let side = |h: HashBits| decode(WGS84, h).unwrap_or_default();
    let decrease = side(around.north).latitude.max < max_lat
        || side(around.south).latitude.min > min_lat
        || side(around.east).longitude.max < max_lon
        || side(around.west).longitude.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (hash, around, area) = cell(steps);
    }
    if steps >= 2 {
        let zero = HashBits::default();
        if area.latitude.min < min_lat {
            around.south = zero;
            around.south_west = zero;
            around.south_east = zero;
        }
        if area.latitude.max > max_lat {
            around.north = zero;
            around.north_east = zero;
            around.north_west = zero;
        }
        if area.longitude.min < min_lon {
            around.west = zero;
            around.south_west = zero;
            around.north_west = zero;
        }
        if area.longitude.max > max_lon {
            around.east = zero;
            around.south_east = zero;
            around.north_east = zero;
        }
    }
    [
        hash,
        around.north,
        around.south,
        around.east,
        around.west,
        around.north_east,
        around.north_west,
        around.south_east,
        around.south_west,
    ]
}

/// `scoresOfGeoHashBox`: the scores `[min, max)` of the points in a cell.
pub fn box_scores(hash: HashBits) -> (f64, f64) {
    let min = align52(hash);
    let max = align52(HashBits {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    });
    (min as f64, max as f64)
}

/// One point a search found (`geoPoint`).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The member.
    pub member: Vec<u8>,
    /// Its score (its geohash).
    pub score: f64,
    /// Its longitude and latitude, decoded.
    pub xy: [f64; 2],
    /// Its distance from the centre, in meters until the reply converts it.
    pub dist: f64,
}

impl View<'_, '_> {
    /// `membersOfAllNeighbors`: the points of the set under `id` inside
    /// the search, cell by cell in [`areas`]' order, each cell in score
    /// order (one range `[min, max)` of the score index per cell); with a
    /// `limit` (COUNT ... ANY), it stops as soon as it has that many. Also
    /// says how many members it read (the cells' members, in or out of the
    /// shape): never the whole set. A row's member is read only for a
    /// point inside the shape, and a point outside the search's
    /// [`Search::prefilter`] box is not measured.
    pub fn geo_search(
        &self,
        id: i64,
        search: &Search,
        limit: usize,
    ) -> Result<(Vec<Point>, usize)> {
        let cells = areas(search);
        let prefilter = search.prefilter();
        let mut found: Vec<Point> = Vec::new();
        let mut examined = 0;
        let full = |found: &Vec<Point>| limit > 0 && found.len() >= limit;
        let mut stmt = self.stmt(
            "SELECT score, member FROM zsets WHERE id = ?1 AND score >= ?2 AND score < ?3
             ORDER BY score, member",
        )?;
        // redis compares a cell with the last one it read, skipping a
        // repeat (huge radii make neighbours coincide); "none yet" is its
        // index 0, so the north cell is never compared with the centre's.
        let mut last_processed = 0;
        for (i, cell) in cells.iter().enumerate() {
            if cell.is_zero() {
                continue;
            }
            if last_processed != 0 && *cell == cells[last_processed] {
                continue;
            }
            if full(&found) {
                break;
            }
            let (min, max) = box_scores(*cell);
            let mut rows = stmt.query(params![id, min, max])?;
            while let Some(r) = rows.next()? {
                examined += 1;
                let score: f64 = r.get(0)?;
                let xy = decode_score(score);
                if prefilter.is_some_and(|b| outside(&b, xy)) {
                    continue;
                }
                let Some(dist) = search.within_point(xy) else {
                    continue;
                };
                found.push(Point {
                    member: r.get(1)?,
                    score,
                    xy,
                    dist,
                });
                if full(&found) {
                    break;
                }
            }
            last_processed = i;
        }
        Ok((found, examined))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefilter never drops a point the exact test keeps: random
    /// circles and boxes up to 100 km across, up to 70 degrees of
    /// latitude, against points around and just past their edges.
    #[test]
    fn prefilter_keeps_every_point_within() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let (mut checked, mut dropped) = (0u64, 0u64);
        for _ in 0..2000 {
            let centre = [next() * 340.0 - 170.0, next() * 140.0 - 70.0];
            let size = next() * 100_000.0 + 1.0;
            let shape = if next() < 0.5 {
                Shape::Radius(size / 2.0)
            } else {
                Shape::Box {
                    width: size,
                    height: next() * 100_000.0 + 1.0,
                }
            };
            let search = Search {
                centre,
                shape,
                conversion: 1.0,
            };
            let Some(b) = search.prefilter() else {
                continue;
            };
            let (w, h) = (b[2] - b[0], b[3] - b[1]);
            for _ in 0..200 {
                let xy = [
                    b[0] - w * 0.02 + next() * w * 1.04,
                    b[1] - h * 0.02 + next() * h * 1.04,
                ];
                checked += 1;
                if outside(&b, xy) {
                    dropped += 1;
                    assert!(
                        search.within_point(xy).is_none(),
                        "{search:?} keeps {xy:?}, outside {b:?}"
                    );
                }
            }
        }
        assert!(checked > 100_000 && dropped > 1000, "{checked} {dropped}");
    }

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ffffff, 0x1234567),
            (u32::MAX, 7),
        ] {
            let i = interleave64(x, y);
            assert_eq!(deinterleave64(i), x as u64 | ((y as u64) << 32));
        }
    }

    #[test]
    fn palermo_scores_as_in_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo"; ZSCORE: 3479099956230698.
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(score_of(15.087269, 37.502669), Some(3479447370796909));
        assert_eq!(&standard_hash(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(score_of(181.0, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
        let d = distance(
            13.361389338970184,
            38.1155563954963,
            15.087267458438873,
            37.50266842333162,
        );
        assert!((d - 166274.1516).abs() < 0.001, "{d}");
    }

    #[test]
    fn casts_follow_x86_64() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(1.5), 1);
        assert_eq!(c_double_to_u64(1e19), 10000000000000000000);
    }

    #[test]
    fn steps_follow_the_radius() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(f64::INFINITY, 0.0), 1);
        assert!(estimate_steps_by_radius(1000.0, 0.0) > estimate_steps_by_radius(1000.0, 85.0));
    }
}
