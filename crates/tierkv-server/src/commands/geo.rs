//! Geospatial commands on sorted sets, as Redis 7.0 computes them: GEOADD, GEOPOS,
//! GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their
//! `_RO` forms. A position is a sorted-set member whose score is its 52-bit interleaved
//! geohash (Redis's encoding: longitude in [-180, 180], latitude in the Web Mercator
//! limits), so GEOADD is a ZADD and every sorted-set command works on a geo key.
//! Distances are Redis's haversine on a sphere of radius 6,372,797.560856 m.
//!
//! A search reads the whole set and keeps the members inside the shape (Redis narrows to
//! the nine geohash cells around the centre first, then applies the same test): the same
//! members and distances, in O(N) rather than O(members near the centre).

use super::zsets::{all_scored, scores_of, store_result, Scored};
use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use bytes::Bytes;

const STEP: u32 = 26;
const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;

fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// The geohash of a position over the given latitude range, `STEP` bits per axis.
fn encode(lon: f64, lat: f64, lat_min: f64, lat_max: f64) -> u64 {
    let scale = (1u64 << STEP) as f64;
    let lat_off = (lat - lat_min) / (lat_max - lat_min) * scale;
    let lon_off = (lon - LON_MIN) / (LON_MAX - LON_MIN) * scale;
    spread(lat_off as u32) | (spread(lon_off as u32) << 1)
}

/// The centre of a geohash's cell (Redis's decode), clamped to the valid ranges.
fn decode(bits: u64) -> (f64, f64) {
    let (ilat, ilon) = (squash(bits), squash(bits >> 1));
    let scale = (1u64 << STEP) as f64;
    let lat_min = LAT_MIN + (f64::from(ilat) / scale) * (LAT_MAX - LAT_MIN);
    let lat_max = LAT_MIN + ((f64::from(ilat) + 1.0) / scale) * (LAT_MAX - LAT_MIN);
    let lon_min = LON_MIN + (f64::from(ilon) / scale) * (LON_MAX - LON_MIN);
    let lon_max = LON_MIN + ((f64::from(ilon) + 1.0) / scale) * (LON_MAX - LON_MIN);
    (
        ((lon_min + lon_max) / 2.0).clamp(LON_MIN, LON_MAX),
        ((lat_min + lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX),
    )
}

fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lat1r, lat2r) = (lat1.to_radians(), lat2.to_radians());
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2.to_radians() - lon1.to_radians()) / 2.0).sin();
    2.0 * EARTH_RADIUS_M * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

/// A coordinate as Redis prints it (`%.17Lf` of the value, trailing zeros dropped).
fn human(x: f64) -> String {
    let s = format!("{x:.17}");
    let s = s.trim_end_matches('0');
    s.strip_suffix('.').unwrap_or(s).to_string()
}

fn float_arg(a: &[u8]) -> Result<f64, CmdError> {
    super::strings::parse_float(a).ok_or_else(|| CmdError::err("value is not a valid float"))
}

/// Meters per unit (`m`, `km`, `mi`, `ft`).
fn unit(a: &[u8]) -> Result<f64, CmdError> {
    match a.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"mi" => Ok(1609.34),
        b"ft" => Ok(0.3048),
        _ => Err(CmdError::err(
            "unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

fn check_position(lon: f64, lat: f64) -> Result<(), CmdError> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(CmdError::err(format!(
            "invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok(())
}

/// GEOADD key [NX|XX] [CH] longitude latitude member ...: a ZADD of the members at their
/// geohashes (its reply).
pub(super) fn geoadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut i = 2;
    let mut zadd: Vec<Bytes> = vec![Bytes::from_static(b"ZADD"), args[1].clone()];
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"NX" | b"XX" | b"CH" => zadd.push(args[i].clone()),
            _ => break,
        }
        i += 1;
    }
    let triples = &args[i..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) {
        return Err(CmdError::err(SYNTAX));
    }
    for t in triples.chunks_exact(3) {
        let (lon, lat) = (float_arg(&t[0])?, float_arg(&t[1])?);
        check_position(lon, lat)?;
        let bits = encode(lon, lat, LAT_MIN, LAT_MAX);
        zadd.push(Bytes::from(bits.to_string()));
        zadd.push(t[2].clone());
    }
    super::zsets::zadd(ctx, &zadd)
}

/// GEOPOS key member ...: each member's position, nil for a missing one.
pub(super) fn geopos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let scores = scores_of(&ctx.shared.db(), &args[1], &args[2..])?;
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let (lon, lat) = decode(s as u64);
                ctx.out.array(2);
                ctx.out.double(&human(lon));
                ctx.out.double(&human(lat));
            }
            None => ctx.out.null_array(),
        }
    }
    Ok(Flow::Continue)
}

/// GEODIST key member1 member2 [unit]: their distance, nil when one is missing.
pub(super) fn geodist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let per = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(CmdError::err(SYNTAX)),
    };
    let s = scores_of(&ctx.shared.db(), &args[1], &args[2..4])?;
    match (s[0], s[1]) {
        (Some(a), Some(b)) => {
            let ((lon1, lat1), (lon2, lat2)) = (decode(a as u64), decode(b as u64));
            let d = distance(lon1, lat1, lon2, lat2) / per;
            ctx.out.double(&format!("{d:.4}"));
        }
        _ => ctx.out.null(),
    }
    Ok(Flow::Continue)
}

/// GEOHASH key member ...: each member's standard 11-character geohash (latitude over
/// [-90, 90]), nil for a missing one.
pub(super) fn geohash(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let scores = scores_of(&ctx.shared.db(), &args[1], &args[2..])?;
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => {
                let (lon, lat) = decode(s as u64);
                let bits = encode(lon, lat, -90.0, 90.0);
                let text: Vec<u8> = (0..11)
                    .map(|i| {
                        let idx = if i == 10 {
                            0
                        } else {
                            (bits >> (52 - (i + 1) * 5)) & 0x1f
                        };
                        ALPHABET[idx as usize]
                    })
                    .collect();
                ctx.out.bulk(&text);
            }
            None => ctx.out.null(),
        }
    }
    Ok(Flow::Continue)
}

/// A search's shape (in meters).
enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// What a search asks.
struct Search {
    center: Center,
    shape: Shape,
    /// Meters per unit of the shape (distances are replied in it).
    per: f64,
    desc: Option<bool>,
    count: Option<(usize, bool)>,
    with_coord: bool,
    with_dist: bool,
    with_hash: bool,
    store: Option<(Bytes, bool)>,
}

enum Center {
    Member(Bytes),
    Point(f64, f64),
}

fn positive(v: f64, what: &str) -> Result<f64, CmdError> {
    if v < 0.0 || !v.is_finite() {
        return Err(CmdError::err(format!("{what} cannot be negative")));
    }
    Ok(v)
}

/// The options shared by GEOSEARCH and GEORADIUS from `args[i]` on.
fn parse_options(
    args: &[Bytes],
    mut i: usize,
    s: &mut Search,
    search: bool,
    store_allowed: bool,
) -> Result<(), CmdError> {
    while i < args.len() {
        let has = |n: usize| i + n < args.len();
        match args[i].to_ascii_uppercase().as_slice() {
            b"WITHCOORD" => s.with_coord = true,
            b"WITHDIST" => s.with_dist = true,
            b"WITHHASH" => s.with_hash = true,
            b"ASC" => s.desc = Some(false),
            b"DESC" => s.desc = Some(true),
            b"ANY" if s.count.is_some() => {
                if let Some(c) = s.count.as_mut() {
                    c.1 = true;
                }
            }
            b"COUNT" if has(1) => {
                let n = int_arg(&args[i + 1])?;
                if n <= 0 {
                    return Err(CmdError::err("COUNT must be > 0"));
                }
                let any = has(2) && args[i + 2].eq_ignore_ascii_case(b"any");
                s.count = Some((n as usize, any));
                i += 1 + any as usize;
            }
            b"STORE" | b"STOREDIST" if has(1) && store_allowed && !search => {
                let dist = args[i].eq_ignore_ascii_case(b"storedist");
                s.store = Some((args[i + 1].clone(), dist));
                i += 1;
            }
            b"STOREDIST" if store_allowed && search => {
                s.store = s.store.take().map(|(k, _)| (k, true))
            }
            b"FROMMEMBER" if search && has(1) => {
                s.center = Center::Member(args[i + 1].clone());
                i += 1;
            }
            b"FROMLONLAT" if search && has(2) => {
                let (lon, lat) = (float_arg(&args[i + 1])?, float_arg(&args[i + 2])?);
                check_position(lon, lat)?;
                s.center = Center::Point(lon, lat);
                i += 2;
            }
            b"BYRADIUS" if search && has(2) => {
                s.per = unit(&args[i + 2])?;
                s.shape = Shape::Radius(positive(float_arg(&args[i + 1])?, "radius")? * s.per);
                i += 2;
            }
            b"BYBOX" if search && has(3) => {
                s.per = unit(&args[i + 3])?;
                s.shape = Shape::Box {
                    width: positive(float_arg(&args[i + 1])?, "width")? * s.per,
                    height: positive(float_arg(&args[i + 2])?, "height")? * s.per,
                };
                i += 3;
            }
            _ => return Err(CmdError::err(SYNTAX)),
        }
        i += 1;
    }
    if s.store.is_some() && (s.with_coord || s.with_dist || s.with_hash) {
        return Err(CmdError::err(
            "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        ));
    }
    Ok(())
}

/// Runs a search: the members inside the shape, with their distances (in the unit), in
/// the order and number asked; replies them or stores them.
fn run(ctx: &mut Ctx<'_>, key: &[u8], mut s: Search) -> CmdResult {
    let db = &ctx.shared.db();
    let (lon, lat) = match &s.center {
        Center::Point(lon, lat) => (*lon, *lat),
        Center::Member(m) => match scores_of(db, key, std::slice::from_ref(m))?[0] {
            Some(score) => decode(score as u64),
            None => return Err(CmdError::err("could not decode requested zset member")),
        },
    };
    let mut found: Vec<(Vec<u8>, f64, f64)> = Vec::new();
    for (member, score) in all_scored(db, key)? {
        let (plon, plat) = decode(score as u64);
        let inside = match s.shape {
            Shape::Radius(r) => {
                let d = distance(lon, lat, plon, plat);
                (d <= r).then_some(d)
            }
            Shape::Box { width, height } => {
                let lat_d = EARTH_RADIUS_M * (plat.to_radians() - lat.to_radians()).abs();
                if lat_d > height / 2.0 || distance(plon, plat, lon, plat) > width / 2.0 {
                    None
                } else {
                    Some(distance(lon, lat, plon, plat))
                }
            }
        };
        if let Some(d) = inside {
            found.push((member, score, d));
            if s.count.is_some_and(|(n, any)| any && found.len() >= n) {
                break;
            }
        }
    }
    // COUNT without ANY sorts, ascending unless told otherwise (as Redis).
    if s.desc.is_none() && s.count.is_some_and(|(_, any)| !any) {
        s.desc = Some(false);
    }
    if let Some(desc) = s.desc {
        found.sort_by(|a, b| {
            let o = a.2.partial_cmp(&b.2).unwrap_or(std::cmp::Ordering::Equal);
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    }
    if let Some((n, _)) = s.count {
        found.truncate(n);
    }
    if let Some((dst, dist)) = &s.store {
        let items: Vec<Scored> = found
            .iter()
            .map(|(m, score, d)| (m.clone(), if *dist { d / s.per } else { *score }))
            .collect();
        store_result(ctx, dst, &items)?;
        ctx.out.int(items.len() as i64);
        return Ok(Flow::Continue);
    }
    ctx.out.array(found.len());
    let extras = s.with_dist as usize + s.with_hash as usize + s.with_coord as usize;
    for (member, score, d) in &found {
        if extras == 0 {
            ctx.out.bulk(member);
            continue;
        }
        ctx.out.array(1 + extras);
        ctx.out.bulk(member);
        if s.with_dist {
            ctx.out.double(&format!("{:.4}", d / s.per));
        }
        if s.with_hash {
            ctx.out.int(*score as i64);
        }
        if s.with_coord {
            let (plon, plat) = decode(*score as u64);
            ctx.out.array(2);
            ctx.out.double(&human(plon));
            ctx.out.double(&human(plat));
        }
    }
    Ok(Flow::Continue)
}

fn new_search(center: Center) -> Search {
    Search {
        center,
        shape: Shape::Radius(-1.0),
        per: 1.0,
        desc: None,
        count: None,
        with_coord: false,
        with_dist: false,
        with_hash: false,
        store: None,
    }
}

/// GEOSEARCH key FROMMEMBER m | FROMLONLAT lon lat BYRADIUS r unit | BYBOX w h unit
/// [ASC|DESC] [COUNT n [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]; GEOSEARCHSTORE dst src
/// ... [STOREDIST].
pub(super) fn geosearch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let store = args[0].eq_ignore_ascii_case(b"geosearchstore");
    let (key, from) = if store { (&args[2], 3) } else { (&args[1], 2) };
    let mut s = new_search(Center::Point(f64::NAN, f64::NAN));
    if store {
        s.store = Some((args[1].clone(), false));
    }
    parse_options(args, from, &mut s, true, store)?;
    if matches!(s.center, Center::Point(lon, _) if lon.is_nan()) {
        return Err(CmdError::err(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH",
        ));
    }
    if matches!(s.shape, Shape::Radius(r) if r < 0.0) {
        return Err(CmdError::err(
            "exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH",
        ));
    }
    if store && (s.with_coord || s.with_dist || s.with_hash) {
        return Err(CmdError::err(SYNTAX));
    }
    run(ctx, key, s)
}

/// GEORADIUS key lon lat radius unit [options] and GEORADIUSBYMEMBER key member radius
/// unit [options] (STORE, STOREDIST unless `_RO`).
pub(super) fn georadius(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let name = args[0].to_ascii_lowercase();
    let by_member = name.starts_with(b"georadiusbymember");
    let read_only = name.ends_with(b"_ro");
    let (center, at) = if by_member {
        if args.len() < 5 {
            return Err(CmdError::err(SYNTAX));
        }
        (Center::Member(args[2].clone()), 3)
    } else {
        if args.len() < 6 {
            return Err(CmdError::err(SYNTAX));
        }
        let (lon, lat) = (float_arg(&args[2])?, float_arg(&args[3])?);
        check_position(lon, lat)?;
        (Center::Point(lon, lat), 4)
    };
    let mut s = new_search(center);
    s.per = unit(&args[at + 1])?;
    s.shape = Shape::Radius(positive(float_arg(&args[at])?, "radius")? * s.per);
    parse_options(args, at + 2, &mut s, false, !read_only)?;
    run(ctx, &args[1], s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geohash_bits_round_trip_near_the_position() {
        for (lon, lat) in [(13.361389, 38.115556), (-122.27652, 37.805186), (0.0, 0.0)] {
            let (dlon, dlat) = decode(encode(lon, lat, LAT_MIN, LAT_MAX));
            assert!((dlon - lon).abs() < 1e-5 && (dlat - lat).abs() < 1e-5);
        }
        // Redis's documented example: Palermo to Catania is 166274.1516 m.
        let p = decode(encode(13.361389, 38.115556, LAT_MIN, LAT_MAX));
        let c = decode(encode(15.087269, 37.502669, LAT_MIN, LAT_MAX));
        assert_eq!(
            format!("{:.4}", distance(p.0, p.1, c.0, c.1)),
            "166274.1516"
        );
    }
}
