//! GEO commands: GEOADD, GEOPOS, GEODIST, GEOHASH, and the searches
//! (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their
//! `_RO` forms), with redis 7.0's semantics and texts. A GEO key is a
//! sorted set whose scores are 52-bit geohashes; the geohash arithmetic
//! and the search's reads are `respite_engine::geo`.
//!
//! The searches are one function, redis's `georadiusGeneric`, walking the
//! arguments by index as redis walks `argv`: it looks the key up first (so
//! WRONGTYPE comes before any argument error), then reads the centre and
//! the options in order, some of them only when the key exists
//! (GEORADIUSBYMEMBER on a missing key never parses its radius). So a
//! search is parsed when it runs, against the snapshot it reads. GEORADIUS
//! and GEORADIUSBYMEMBER carry redis's `write` flag for their STORE
//! options; without one they run on the read pool (as SORT does), with one
//! on the writer.
//!
//! Numbers go out as redis formats them: distances with four decimals
//! (`fixedpoint_d2string`), coordinates as `%.17Lf` less its trailing
//! zeros (`addReplyHumanLongDouble`, a RESP3 double), hashes as integers.
//! Results come in redis's order: cell by cell as the engine finds them,
//! or sorted by distance with glibc's merge sort (ASC/DESC over the whole
//! result) or redis's partial quicksort `pqsort` (with COUNT below the
//! result's size), ported here so that equal distances come out in the
//! same order too.

use bytes::Bytes;
use respite_engine::geo::{self, Point, Search, Shape};
use respite_engine::notify::{GENERIC, ZSET};
use respite_engine::zset::{AddFlags, Scored};
use respite_engine::{KeyRow, Kind, Txn, View};

use super::zsets::parse_float;
use crate::args::{parse_i64, Args};
use crate::command::{read_job, write_op, Ctx, Plan, ReadCommand, Session, WriteCommand};
use crate::error::{c_str, CommandError};
use crate::reply::Reply;

fn err(text: impl Into<String>) -> CommandError {
    CommandError::Other(text.into())
}

/// The live sorted set under `key` (WRONGTYPE for another type).
fn zset(view: &View<'_, '_>, db: u32, key: &[u8]) -> Result<Option<KeyRow>, CommandError> {
    Ok(view.live(db, key, Kind::ZSet)?)
}

/// `strcasecmp` against an option name: the argument as C sees it, up to
/// a NUL.
fn is(arg: &[u8], name: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(name.as_bytes())
}

/// `getDoubleFromObjectOrReply` with its message (`None`: redis's default).
fn double(arg: &[u8], msg: Option<&str>) -> Result<f64, CommandError> {
    parse_float(arg).ok_or_else(|| match msg {
        Some(m) => err(m),
        None => CommandError::NotFloat,
    })
}

/// `extractLongLatOrReply`: a longitude and a latitude inside redis's
/// limits.
fn long_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CommandError> {
    let xy = [double(lon, None)?, double(lat, None)?];
    if !(geo::LONG_MIN..=geo::LONG_MAX).contains(&xy[0])
        || !(geo::LAT_MIN..=geo::LAT_MAX).contains(&xy[1])
    {
        return Err(err(format!(
            "invalid longitude,latitude pair {:.6},{:.6}",
            xy[0], xy[1]
        )));
    }
    Ok(xy)
}

/// `extractUnitOrReply`: meters per unit.
fn unit(arg: &[u8]) -> Result<f64, CommandError> {
    match () {
        _ if is(arg, "m") => Ok(1.0),
        _ if is(arg, "km") => Ok(1000.0),
        _ if is(arg, "ft") => Ok(0.3048),
        _ if is(arg, "mi") => Ok(1609.34),
        _ => Err(err("unsupported unit provided. please use M, KM, FT, MI")),
    }
}

/// `extractDistanceOrReply`: a radius and its unit's meters.
fn radius(args: &[Bytes]) -> Result<(f64, f64), CommandError> {
    let r = double(&args[0], Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(err("radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// `extractBoxOrReply`: width, height and the unit's meters.
fn rectangle(args: &[Bytes]) -> Result<(f64, f64, f64), CommandError> {
    let w = double(&args[0], Some("need numeric width"))?;
    let h = double(&args[1], Some("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(err("height or width cannot be negative"));
    }
    Ok((w, h, unit(&args[2])?))
}

/// `addReplyDoubleDistance`: four decimals, as redis's
/// `fixedpoint_d2string` writes them (rounded by `llrint`).
pub fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10000.0).round_ties_even();
    // `llrint` of NaN or out of range: x86-64's "integer indefinite".
    let svalue = geo::c_double_to_i64(scaled);
    let value = svalue.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if svalue < 0 { "-" } else { "" },
        value / 10000,
        value % 10000
    )
}

/// `addReplyHumanLongDouble`'s text: `%.17Lf` less its trailing zeros.
pub fn format_human(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

fn coords(xy: [f64; 2]) -> Reply {
    Reply::Array(vec![
        Reply::DoubleText(format_human(xy[0])),
        Reply::DoubleText(format_human(xy[1])),
    ])
}

/// `GEOADD key [NX | XX] [CH] longitude latitude member [longitude
/// latitude member ...]`: ZADD of the points' geohashes.
pub struct GeoAdd {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// Scores (geohashes) and members, in argument order.
    items: Vec<(f64, Bytes)>,
    /// NX or XX.
    flags: AddFlags,
    /// CH: count changed members too.
    ch: bool,
}

impl WriteCommand for GeoAdd {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let rest = args.rest();
        let mut flags = AddFlags::default();
        let mut ch = false;
        let mut i = 0;
        while let Some(opt) = rest.get(i) {
            if is(opt, "nx") {
                flags.nx = true;
            } else if is(opt, "xx") {
                flags.xx = true;
            } else if is(opt, "ch") {
                ch = true;
            } else {
                break;
            }
            i += 1;
        }
        // No element at all is ZADD's syntax error, the same text.
        if !(rest.len() - i).is_multiple_of(3) || (flags.xx && flags.nx) || rest.len() == i {
            return Err(CommandError::Syntax);
        }
        let items = rest[i..]
            .chunks_exact(3)
            .map(|e| {
                let [lon, lat] = long_lat(&e[0], &e[1])?;
                let score = geo::score_of(lon, lat).unwrap_or(0);
                Ok((score as f64, e[2].clone()))
            })
            .collect::<Result<_, CommandError>>()?;
        Ok(GeoAdd {
            db: s.db,
            key,
            items,
            flags,
            ch,
        })
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        let mut slot = txn.open(self.db, &self.key, Kind::ZSet)?;
        let done = txn.zset_add(&mut slot, &self.items, self.flags)?;
        // redis's GEOADD is a ZADD underneath, and sends ZADD's event.
        if done.added + done.updated > 0 {
            txn.notify(ZSET, "zadd", self.db, &self.key);
        }
        Ok(Reply::Int(if self.ch {
            done.added + done.updated
        } else {
            done.added
        }))
    }
}

/// Each member's score (its geohash) in the GEO key, `None` where the
/// member or the key is missing: what GEOPOS and GEOHASH answer from.
fn member_scores(
    view: &View<'_, '_>,
    db: u32,
    key: &[u8],
    members: &[Bytes],
) -> Result<Vec<Option<f64>>, CommandError> {
    let Some(row) = zset(view, db, key)? else {
        return Ok(vec![None; members.len()]);
    };
    members
        .iter()
        .map(|m| Ok(view.zset_score(row.id, m)?))
        .collect()
}

/// `GEOPOS key [member ...]`: each member's longitude and latitude, or a
/// null array.
pub struct GeoPos {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl ReadCommand for GeoPos {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.members.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(GeoPos {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let scores = member_scores(view, self.db, &self.key, &self.members)?;
        Ok(Reply::Array(
            scores
                .into_iter()
                .map(|s| s.map_or(Reply::NilArray, |s| coords(geo::decode_score(s))))
                .collect(),
        ))
    }
}

/// `GEOHASH key [member ...]`: each member's 11-character geohash, or nil.
pub struct GeoHash {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The members.
    members: Vec<Bytes>,
}

impl ReadCommand for GeoHash {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn is_quick(&self) -> bool {
        self.members.len() <= crate::command::QUICK_READ_LIMIT
    }
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(GeoHash {
            db: s.db,
            key: args.next()?,
            members: args.rest(),
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let scores = member_scores(view, self.db, &self.key, &self.members)?;
        Ok(Reply::Array(
            scores
                .into_iter()
                .map(|s| s.map_or(Reply::Nil, |s| Reply::bulk(geo::standard_hash(s).to_vec())))
                .collect(),
        ))
    }
}

/// `GEODIST key member1 member2 [M | KM | FT | MI]`: the distance, nil if
/// a member (or the key) is missing.
pub struct GeoDist {
    /// Selected database.
    db: u32,
    /// The key.
    key: Bytes,
    /// The two members.
    members: [Bytes; 2],
    /// Meters per unit.
    to_meter: f64,
}

impl ReadCommand for GeoDist {
    const QUICK: bool = true;
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        let key = args.next()?;
        let members = [args.next()?, args.next()?];
        let to_meter = match args.remaining() {
            0 => 1.0,
            1 => unit(&args.next()?)?,
            _ => return Err(CommandError::Syntax),
        };
        Ok(GeoDist {
            db: s.db,
            key,
            members,
            to_meter,
        })
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        let Some(row) = zset(view, self.db, &self.key)? else {
            return Ok(Reply::Nil);
        };
        let (Some(s1), Some(s2)) = (
            view.zset_score(row.id, &self.members[0])?,
            view.zset_score(row.id, &self.members[1])?,
        ) else {
            return Ok(Reply::Nil);
        };
        let [x1, y1] = geo::decode_score(s1);
        let [x2, y2] = geo::decode_score(s2);
        let d = geo::distance(x1, y1, x2, y2) / self.to_meter;
        Ok(Reply::bulk(format_distance(d)))
    }
}

/// Which search command (redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Flavor {
    /// Centre given as longitude and latitude (GEORADIUS).
    coords: bool,
    /// Centre given as a member (GEORADIUSBYMEMBER).
    member: bool,
    /// No STORE or STOREDIST (the `_RO` forms).
    nostore: bool,
    /// GEOSEARCH's arguments.
    search: bool,
    /// GEOSEARCHSTORE: the destination comes first.
    search_store: bool,
}

const fn flavor(kind: u8) -> Flavor {
    Flavor {
        coords: kind == RADIUS || kind == RADIUS_RO,
        member: kind == BY_MEMBER || kind == BY_MEMBER_RO,
        nostore: kind == RADIUS_RO || kind == BY_MEMBER_RO,
        search: kind == SEARCH || kind == SEARCH_STORE,
        search_store: kind == SEARCH_STORE,
    }
}

const RADIUS: u8 = 0;
const RADIUS_RO: u8 = 1;
const BY_MEMBER: u8 = 2;
const BY_MEMBER_RO: u8 = 3;
const SEARCH: u8 = 4;
const SEARCH_STORE: u8 = 5;

/// `GEORADIUS key longitude latitude radius M | KM | FT | MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE key |
/// STOREDIST key]`
pub type GeoRadius = GeoSearchGeneric<RADIUS>;
/// `GEORADIUS_RO key longitude latitude radius M | KM | FT | MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]`
pub type GeoRadiusRo = GeoSearchGeneric<RADIUS_RO>;
/// `GEORADIUSBYMEMBER key member radius M | KM | FT | MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE key |
/// STOREDIST key]`
pub type GeoRadiusByMember = GeoSearchGeneric<BY_MEMBER>;
/// `GEORADIUSBYMEMBER_RO key member radius M | KM | FT | MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]`
pub type GeoRadiusByMemberRo = GeoSearchGeneric<BY_MEMBER_RO>;
/// `GEOSEARCH key FROMMEMBER member | FROMLONLAT longitude latitude
/// BYRADIUS radius M | KM | FT | MI | BYBOX width height M | KM | FT | MI
/// [ASC | DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]`
pub type GeoSearch = GeoSearchGeneric<SEARCH>;
/// `GEOSEARCHSTORE destination source FROMMEMBER member | FROMLONLAT
/// longitude latitude BYRADIUS radius M | KM | FT | MI | BYBOX width
/// height M | KM | FT | MI [ASC | DESC] [COUNT count [ANY]] [STOREDIST]`
pub type GeoSearchStore = GeoSearchGeneric<SEARCH_STORE>;

/// A search, kept as its arguments until it runs (see the module docs).
pub struct GeoSearchGeneric<const KIND: u8> {
    /// Selected database.
    db: u32,
    /// The whole request as redis's `argv`: the name as sent, then the
    /// arguments.
    argv: Vec<Bytes>,
}

/// What a search comes to: a reply, or a sorted set to store (empty:
/// delete the destination) and its size as the reply.
enum Outcome {
    Reply(Reply),
    Store(Bytes, Vec<Scored>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

impl<const KIND: u8> GeoSearchGeneric<KIND> {
    fn parse_argv(args: &mut Args, s: &Ctx<'_>) -> GeoSearchGeneric<KIND> {
        let mut argv = vec![Bytes::copy_from_slice(args.name())];
        argv.extend(args.rest());
        GeoSearchGeneric { db: s.db, argv }
    }

    /// Whether the arguments name a destination: the options walked as
    /// redis walks them, without checking their values (a bad one is an
    /// error wherever the command runs).
    fn stores(&self) -> bool {
        let f = flavor(KIND);
        if f.search_store {
            return true;
        }
        if f.nostore || f.search {
            return false;
        }
        let base = if f.coords { 6 } else { 5 };
        let rest = self.argv.get(base..).unwrap_or_default();
        let mut i = 0;
        while i < rest.len() {
            let arg = &rest[i];
            if is(arg, "count") && i + 1 < rest.len() {
                i += 1;
            } else if (is(arg, "store") || is(arg, "storedist")) && i + 1 < rest.len() {
                return true;
            }
            i += 1;
        }
        false
    }

    /// redis's `georadiusGeneric`, up to what it replies or stores.
    fn run(&self, view: &View<'_, '_>) -> Result<Outcome, CommandError> {
        let f = flavor(KIND);
        let argv = &self.argv;
        let argc = argv.len();
        let src = if f.search_store { 2 } else { 1 };
        let zobj = zset(view, self.db, &argv[src])?;
        let mut storekey: Option<Bytes> = None;
        let mut storedist = false;
        let mut centre = [0.0; 2];
        let mut shape: Option<Shape> = None;
        let mut conversion = 0.0;
        let from_member = |member: &[u8]| -> Result<[f64; 2], CommandError> {
            let row = zobj.as_ref().ok_or_else(|| err("internal error: no key"))?;
            match view.zset_score(row.id, member)? {
                Some(score) => Ok(geo::decode_score(score)),
                None => Err(err("could not decode requested zset member")),
            }
        };
        let base;
        if f.coords {
            base = 6;
            centre = long_lat(&argv[2], &argv[3])?;
            let (r, c) = radius(&argv[4..6])?;
            shape = Some(Shape::Radius(r));
            conversion = c;
        } else if f.member && zobj.is_none() {
            base = 5;
        } else if f.member {
            base = 5;
            centre = from_member(&argv[2])?;
            let (r, c) = radius(&argv[3..5])?;
            shape = Some(Shape::Radius(r));
            conversion = c;
        } else {
            base = if f.search_store { 3 } else { 2 };
            if f.search_store {
                storekey = Some(argv[1].clone());
            }
        }

        let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
        let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
        let mut sort = Sort::None;
        let mut any = false;
        let mut count: i64 = 0;
        let remaining = argc.saturating_sub(base);
        let mut i = 0;
        while i < remaining {
            let at = |k: usize| &argv[base + k];
            let arg = at(i);
            if is(arg, "withdist") {
                withdist = true;
            } else if is(arg, "withhash") {
                withhash = true;
            } else if is(arg, "withcoord") {
                withcoords = true;
            } else if is(arg, "any") {
                any = true;
            } else if is(arg, "asc") {
                sort = Sort::Asc;
            } else if is(arg, "desc") {
                sort = Sort::Desc;
            } else if is(arg, "count") && i + 1 < remaining {
                count = parse_i64(at(i + 1)).ok_or(CommandError::NotInteger)?;
                if count <= 0 {
                    return Err(err("COUNT must be > 0"));
                }
                i += 1;
            } else if is(arg, "store") && i + 1 < remaining && !f.nostore && !f.search {
                storekey = Some(at(i + 1).clone());
                storedist = false;
                i += 1;
            } else if is(arg, "storedist") && i + 1 < remaining && !f.nostore && !f.search {
                storekey = Some(at(i + 1).clone());
                storedist = true;
                i += 1;
            } else if is(arg, "storedist") && f.search && f.search_store {
                storedist = true;
            } else if is(arg, "frommember") && i + 1 < remaining && f.search && !fromloc {
                // No key: parsing goes on, the reply is decided at the end.
                if zobj.is_some() {
                    centre = from_member(at(i + 1))?;
                }
                frommember = true;
                i += 1;
            } else if is(arg, "fromlonlat") && i + 2 < remaining && f.search && !frommember {
                centre = long_lat(at(i + 1), at(i + 2))?;
                fromloc = true;
                i += 2;
            } else if is(arg, "byradius") && i + 2 < remaining && f.search && !bybox {
                let (r, c) = radius(&argv[base + i + 1..base + i + 3])?;
                shape = Some(Shape::Radius(r));
                conversion = c;
                byradius = true;
                i += 2;
            } else if is(arg, "bybox") && i + 3 < remaining && f.search && !byradius {
                let (width, height, c) = rectangle(&argv[base + i + 1..base + i + 4])?;
                shape = Some(Shape::Box { width, height });
                conversion = c;
                bybox = true;
                i += 3;
            } else {
                return Err(CommandError::Syntax);
            }
            i += 1;
        }

        if storekey.is_some() && (withdist || withhash || withcoords) {
            return Err(err(format!(
                "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                if f.search_store {
                    "GEOSEARCHSTORE"
                } else {
                    "STORE option in GEORADIUS"
                }
            )));
        }
        let name = || String::from_utf8_lossy(c_str(&argv[0])).into_owned();
        if f.search && !(frommember || fromloc) {
            return Err(err(format!(
                "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
                name()
            )));
        }
        if f.search && !(byradius || bybox) {
            return Err(err(format!(
                "exactly one of BYRADIUS and BYBOX can be specified for {}",
                name()
            )));
        }
        if any && count == 0 {
            return Err(err("the ANY argument requires COUNT argument"));
        }
        let Some(row) = zobj else {
            return Ok(match storekey {
                Some(dest) => Outcome::Store(dest, Vec::new()),
                None => Outcome::Reply(Reply::Array(Vec::new())),
            });
        };
        if count != 0 && sort == Sort::None && !any {
            sort = Sort::Asc;
        }
        let search = Search {
            centre,
            shape: shape.unwrap_or(Shape::Radius(0.0)),
            conversion,
        };
        let limit = if any { count as usize } else { 0 };
        let (mut points, _) = view.geo_search(row.id, &search, limit)?;
        if points.is_empty() && storekey.is_none() {
            return Ok(Outcome::Reply(Reply::Array(Vec::new())));
        }
        let result_length = points.len();
        let returned = if count == 0 || (result_length as u64) < count as u64 {
            result_length
        } else {
            count as usize
        };
        if sort != Sort::None {
            let desc = sort == Sort::Desc;
            if returned == result_length {
                merge_sort(&mut points, desc);
            } else {
                partial_sort(&mut points, desc, returned - 1);
            }
        }
        points.truncate(returned);
        for p in &mut points {
            p.dist /= conversion;
        }
        if let Some(dest) = storekey {
            let items = points
                .into_iter()
                .map(|p| (p.member, if storedist { p.dist } else { p.score }))
                .collect();
            return Ok(Outcome::Store(dest, items));
        }
        let options = withdist as usize + withcoords as usize + withhash as usize;
        let out = points
            .into_iter()
            .map(|p| {
                let member = Reply::bulk(p.member);
                if options == 0 {
                    return member;
                }
                let mut item = Vec::with_capacity(options + 1);
                item.push(member);
                if withdist {
                    item.push(Reply::bulk(format_distance(p.dist)));
                }
                if withhash {
                    item.push(Reply::Int(geo::c_double_to_i64(p.score)));
                }
                if withcoords {
                    item.push(coords(p.xy));
                }
                Reply::Array(item)
            })
            .collect();
        Ok(Outcome::Reply(Reply::Array(out)))
    }
}

impl<const KIND: u8> ReadCommand for GeoSearchGeneric<KIND> {
    const MULTI_STATEMENT: bool = true;
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Self::parse_argv(args, s))
    }
    fn apply(self, view: &View<'_, '_>) -> Result<Reply, CommandError> {
        match self.run(view)? {
            Outcome::Reply(reply) => Ok(reply),
            // `stores` sends every search that can store to the writer.
            Outcome::Store(..) => Err(err("internal error: a search that stores ran as a read")),
        }
    }
}

impl<const KIND: u8> WriteCommand for GeoSearchGeneric<KIND> {
    fn parse(args: &mut Args, s: &Ctx<'_>) -> Result<Self, CommandError> {
        Ok(Self::parse_argv(args, s))
    }
    fn apply(self, txn: &mut Txn<'_, '_>) -> Result<Reply, CommandError> {
        match self.run(txn)? {
            Outcome::Reply(reply) => Ok(reply),
            Outcome::Store(dest, items) => {
                // redis's events: the command's own name when something
                // was stored, else `del` if the destination was there.
                let existed =
                    items.is_empty() && txn.notifying(GENERIC) && txn.exists(self.db, &dest)?;
                let n = items.len() as i64;
                txn.zset_store(self.db, &dest, &items)?;
                if n > 0 {
                    let event = if flavor(KIND).search {
                        "geosearchstore"
                    } else {
                        "georadiusstore"
                    };
                    txn.notify(ZSET, event, self.db, &dest);
                } else if existed {
                    txn.notify(GENERIC, "del", self.db, &dest);
                }
                Ok(Reply::Int(n))
            }
        }
    }
}

/// GEORADIUS and GEORADIUSBYMEMBER: on the writer with STORE or
/// STOREDIST, else on the read pool.
fn plan_radius<const KIND: u8>(s: &mut Session, args: Args) -> Result<Plan, CommandError> {
    let cmd = crate::command::parse_all(
        args,
        &s.ctx(),
        <GeoSearchGeneric<KIND> as WriteCommand>::parse,
    )?;
    if cmd.stores() {
        Ok(Plan::Write(write_op(cmd)))
    } else {
        let (f, needs) = read_job(cmd, s);
        Ok(Plan::Read(f, needs))
    }
}

/// redis's comparator of two points by distance (`sort_gp_asc`, negated
/// for DESC), NaN and all.
fn compare(a: &Point, b: &Point, desc: bool) -> i32 {
    let asc = if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    };
    if desc {
        -asc
    } else {
        asc
    }
}

/// glibc's `qsort` for redis's 40-byte points: a top-down merge sort
/// (`msort_with_tmp`), the left run winning ties.
fn merge_sort(points: &mut Vec<Point>, desc: bool) {
    fn sort(order: &mut [usize], tmp: &mut Vec<usize>, cmp: &dyn Fn(usize, usize) -> i32) {
        let n = order.len();
        if n <= 1 {
            return;
        }
        let n1 = n / 2;
        sort(&mut order[..n1], tmp, cmp);
        sort(&mut order[n1..], tmp, cmp);
        tmp.clear();
        let (mut i, mut j) = (0, n1);
        while i < n1 && j < n {
            if cmp(order[i], order[j]) <= 0 {
                tmp.push(order[i]);
                i += 1;
            } else {
                tmp.push(order[j]);
                j += 1;
            }
        }
        tmp.extend_from_slice(&order[i..n1]);
        let done = tmp.len();
        order[..done].copy_from_slice(tmp);
    }
    let mut order: Vec<usize> = (0..points.len()).collect();
    let cmp = |a: usize, b: usize| compare(&points[a], &points[b], desc);
    sort(&mut order, &mut Vec::with_capacity(points.len()), &cmp);
    permute(points, &order);
}

/// redis's `pqsort` (Bentley and McIlroy's quicksort that only recurses
/// into the parts overlapping the ranks wanted) with `lrange` 0 and
/// `rrange` `last`.
fn partial_sort(points: &mut Vec<Point>, desc: bool, last: usize) {
    let mut order: Vec<usize> = (0..points.len()).collect();
    let cmp = |a: usize, b: usize| compare(&points[a], &points[b], desc);
    let n = order.len();
    pqsort(&mut order, 0, n, &cmp, 0, last);
    permute(points, &order);
}

/// Reorders `points` so that position `i` holds the point that was at
/// `order[i]`.
fn permute(points: &mut Vec<Point>, order: &[usize]) {
    let mut taken: Vec<Option<Point>> = std::mem::take(points).into_iter().map(Some).collect();
    points.extend(order.iter().filter_map(|&i| taken[i].take()));
}

/// `_pqsort` over `v[lo..lo + n]`, element indices standing for redis's
/// pointers (`lrange`, `rrange`: the first and last rank wanted).
fn pqsort(
    v: &mut [usize],
    mut lo: usize,
    mut n: usize,
    cmp: &dyn Fn(usize, usize) -> i32,
    lrange: usize,
    rrange: usize,
) {
    let c = |v: &[usize], a: usize, b: usize| cmp(v[a], v[b]);
    let med3 = |v: &[usize], a: usize, b: usize, d: usize| {
        if c(v, a, b) < 0 {
            if c(v, b, d) < 0 {
                b
            } else if c(v, a, d) < 0 {
                d
            } else {
                a
            }
        } else if c(v, b, d) > 0 {
            b
        } else if c(v, a, d) < 0 {
            a
        } else {
            d
        }
    };
    let vecswap = |v: &mut [usize], a: usize, b: usize, k: usize| {
        for i in 0..k {
            v.swap(a + i, b + i);
        }
    };
    // Whether `[l, r]` holds none of the ranks wanted.
    let outside = |l: usize, r: usize| (lrange < l && rrange < l) || (lrange > r && rrange > r);
    loop {
        if n < 7 {
            for pm in lo + 1..lo + n {
                let mut pl = pm;
                while pl > lo && c(v, pl - 1, pl) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = lo + n / 2;
        if n > 7 {
            let mut pl = lo;
            let mut pn = lo + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(lo, pm);
        let (mut pa, mut pb) = (lo + 1, lo + 1);
        let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
        loop {
            while pb <= pc {
                let r = c(v, pb, lo);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = c(v, pc, lo);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = lo + n;
        let r = (pa - lo).min(pb - pa);
        vecswap(v, lo, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(lo, lo + r - 1) {
            pqsort(v, lo, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            lo = pn - r;
            n = r;
            if !outside(lo, lo + r - 1) {
                continue;
            }
        }
        return;
    }
}

/// This family's rows of the command table (see [`crate::command::TABLE`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::write::<GeoAdd>("geoadd"),
        Spec::read::<GeoDist>("geodist"),
        Spec::read::<GeoHash>("geohash"),
        Spec::read::<GeoPos>("geopos"),
        Spec::write::<GeoRadius>("georadius").planned_by(plan_radius::<RADIUS>),
        Spec::read::<GeoRadiusRo>("georadius_ro"),
        Spec::write::<GeoRadiusByMember>("georadiusbymember").planned_by(plan_radius::<BY_MEMBER>),
        Spec::read::<GeoRadiusByMemberRo>("georadiusbymember_ro"),
        Spec::read::<GeoSearch>("geosearch"),
        Spec::write::<GeoSearchStore>("geosearchstore"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_have_four_decimals() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(-0.0), "0.0000");
        assert_eq!(format_distance(166274.15156960033), "166274.1516");
        assert_eq!(format_distance(0.00005), "0.0000");
        assert_eq!(format_distance(1.23456), "1.2346");
        assert_eq!(format_distance(1.5), "1.5000");
        assert_eq!(format_distance(f64::NAN), "-922337203685477.5808");
    }

    #[test]
    fn coordinates_print_as_human_long_doubles() {
        assert_eq!(format_human(13.361389338970184), "13.36138933897018433");
        assert_eq!(format_human(38.1155563954963), "38.11555639549629859");
        assert_eq!(format_human(180.0), "180");
        assert_eq!(format_human(-0.0), "0");
        assert_eq!(format_human(-1e-20), "0");
        assert_eq!(format_human(0.5), "0.5");
    }

    #[test]
    fn partial_sort_orders_the_ranks_wanted() {
        let dists = [5.0, 3.0, 9.0, 1.0, 7.0, 3.0, 2.0, 8.0, 0.5, 4.0, 6.0, 3.0];
        for last in 0..dists.len() {
            let mut points: Vec<Point> = dists
                .iter()
                .enumerate()
                .map(|(i, &d)| Point {
                    member: vec![i as u8],
                    score: 0.0,
                    xy: [0.0; 2],
                    dist: d,
                })
                .collect();
            partial_sort(&mut points, false, last);
            let mut sorted = dists.to_vec();
            sorted.sort_by(f64::total_cmp);
            let got: Vec<f64> = points[..=last].iter().map(|p| p.dist).collect();
            assert_eq!(got, sorted[..=last].to_vec());
        }
    }
}
