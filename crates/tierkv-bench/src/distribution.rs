//! Key distributions: which record an operation touches. Owns parsing of the
//! `--distribution` syntax (including phase files) and sampling record ids from it. A phase
//! may name its operation mix ([`crate::mix`]); what the mix generates is not this module's.
//!
//! Ids are dense integers `0..n`; [`crate::workload`] turns them into keys. Skewed
//! distributions rank records by popularity and map ranks to ids through a fixed bijection
//! ([`Scramble`]) so the popular records are spread over the key space and over load order
//! (otherwise the hottest records would all have been loaded first and sit in the deepest
//! levels together, which no real workload does).

use rand::Rng;
use rand_distr::{Distribution as _, Zipf};
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::mix::Workload;

/// Zipfian constant used when none is given (YCSB's default).
pub const DEFAULT_ZIPF: f64 = 0.99;
/// db_bench's exponential range used when none is given.
pub const DEFAULT_EXP_RANGE: f64 = 10.0;

/// A parsed `--distribution` value.
#[derive(Clone, Debug, PartialEq)]
pub enum DistSpec {
    /// Every record equally likely.
    Uniform,
    /// Zipfian over the records with this constant, scrambled (YCSB's ScrambledZipfian).
    Zipfian {
        /// Skew constant (0.99 in YCSB); any value >= 0.
        theta: f64,
    },
    /// A fraction `key_frac` of the records receives a fraction `op_frac` of the operations.
    Hotspot {
        /// Share of records that are hot, in (0, 1].
        key_frac: f64,
        /// Share of operations that go to the hot records, in [0, 1].
        op_frac: f64,
        /// Moves the hot set: a fraction of the key space, in [0, 1). Two phases with
        /// different shifts have (almost) disjoint hot sets.
        shift: f64,
    },
    /// The most recently inserted records are the most popular (zipfian on recency).
    Latest {
        /// Skew constant of the recency ranks.
        theta: f64,
    },
    /// db_bench's exponential distribution: rank `n * exp(-u * range)`, scrambled.
    Exponential {
        /// Larger ranges are more skewed.
        range: f64,
    },
    /// A sequence of phases, each with its own distribution; the last one lasts until the end.
    Phased(Vec<Phase>),
}

/// How long a phase lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PhaseLen {
    /// A number of operations.
    Ops(u64),
    /// A share of the run's operations.
    Fraction(f64),
}

/// One phase of a phased distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Length of the phase.
    pub len: PhaseLen,
    /// Distribution during the phase (never itself phased).
    pub dist: DistSpec,
    /// Operation mix during the phase (`None`: the run's `--workload`), e.g. a scan phase
    /// followed by a get phase (AC-Key's phase-change experiment).
    pub mix: Option<Workload>,
}

impl DistSpec {
    /// Operation index at which each phase ends (exclusive), for a run of `total_ops`
    /// operations; one phase covering everything when not phased.
    pub fn phase_ends(&self, total_ops: u64) -> Vec<u64> {
        match self {
            DistSpec::Phased(phases) => {
                let mut at = 0u64;
                phases
                    .iter()
                    .map(|p| {
                        let len = match p.len {
                            PhaseLen::Ops(n) => n,
                            PhaseLen::Fraction(f) => ((total_ops as f64 * f).round() as u64).max(1),
                        };
                        at = at.saturating_add(len);
                        at
                    })
                    .collect()
            }
            _ => vec![total_ops],
        }
    }

    /// The distribution a workload is defined with, when it has its own (YCSB D reads the
    /// latest records).
    pub fn of_workload(workload: Workload) -> Option<DistSpec> {
        match workload {
            Workload::D => Some(DistSpec::Latest {
                theta: DEFAULT_ZIPF,
            }),
            _ => None,
        }
    }

    /// Parses the `--distribution` syntax. `phased:FILE` reads the phase file.
    pub fn parse(s: &str) -> Result<DistSpec> {
        let bad = |msg: String| BenchError::InvalidArgument(format!("--distribution {s:?}: {msg}"));
        let s = s.trim();
        if let Some(file) = s.strip_prefix("phased:") {
            return parse_phase_file(Path::new(file));
        }
        if s == "dynamic" {
            return Ok(DistSpec::dynamic());
        }
        Self::parse_simple(s).map_err(bad)
    }

    /// The HotRAP paper's dynamic workload: uniform, then hotspot 1%, 3%, 5%, a shifted 5%,
    /// 4% and 2%, each for a seventh of the run.
    pub fn dynamic() -> DistSpec {
        let hot = |key_frac: f64, shift: f64| DistSpec::Hotspot {
            key_frac,
            op_frac: 0.95,
            shift,
        };
        let dists = [
            DistSpec::Uniform,
            hot(0.01, 0.0),
            hot(0.03, 0.0),
            hot(0.05, 0.0),
            hot(0.05, 0.5),
            hot(0.04, 0.5),
            hot(0.02, 0.5),
        ];
        DistSpec::Phased(
            dists
                .into_iter()
                .map(|dist| Phase {
                    len: PhaseLen::Fraction(1.0 / 7.0),
                    dist,
                    mix: None,
                })
                .collect(),
        )
    }

    /// Parses every form except `phased:` (used inside phase files too).
    fn parse_simple(s: &str) -> std::result::Result<DistSpec, String> {
        let num = |p: &str, what: &str| -> std::result::Result<f64, String> {
            let v: f64 = p
                .trim()
                .trim_end_matches('%')
                .parse()
                .map_err(|_| format!("{what} {p:?} is not a number"))?;
            if !v.is_finite() {
                return Err(format!("{what} {p:?} is not finite"));
            }
            Ok(if p.trim().ends_with('%') {
                v / 100.0
            } else {
                v
            })
        };
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or("").to_ascii_lowercase();
        let args: Vec<&str> = parts.collect();
        let max_args = |n: usize| {
            if args.len() > n {
                Err(format!("{name} takes at most {n} parameter(s)"))
            } else {
                Ok(())
            }
        };
        let spec = match name.as_str() {
            "uniform" => {
                max_args(0)?;
                DistSpec::Uniform
            }
            "zipfian" | "zipf" => {
                max_args(1)?;
                let theta = match args.first() {
                    Some(p) => num(p, "zipfian constant")?,
                    None => DEFAULT_ZIPF,
                };
                if theta < 0.0 {
                    return Err(format!("zipfian constant {theta} must be >= 0"));
                }
                DistSpec::Zipfian { theta }
            }
            "latest" => {
                max_args(1)?;
                let theta = match args.first() {
                    Some(p) => num(p, "latest constant")?,
                    None => DEFAULT_ZIPF,
                };
                if theta < 0.0 {
                    return Err(format!("latest constant {theta} must be >= 0"));
                }
                DistSpec::Latest { theta }
            }
            "exponential" | "exp" => {
                max_args(1)?;
                let range = match args.first() {
                    Some(p) => num(p, "exponential range")?,
                    None => DEFAULT_EXP_RANGE,
                };
                if range <= 0.0 {
                    return Err(format!("exponential range {range} must be > 0"));
                }
                DistSpec::Exponential { range }
            }
            "hotspot" => {
                max_args(3)?;
                let key_frac = match args.first() {
                    Some(p) => num(p, "hot key fraction")?,
                    None => {
                        return Err("hotspot needs a key fraction, e.g. hotspot:0.05:0.95".into())
                    }
                };
                let op_frac = match args.get(1) {
                    Some(p) => num(p, "hot operation fraction")?,
                    None => 0.95,
                };
                let shift = match args.get(2) {
                    Some(p) => num(p, "hot set shift")?,
                    None => 0.0,
                };
                hotspot(key_frac, op_frac, shift)?
            }
            other => {
                // hotspot-5% (the paper's name) and hotspot-5%-shifted.
                if let Some(rest) = other.strip_prefix("hotspot-") {
                    max_args(0)?;
                    let (pct, shift) = match rest.strip_suffix("-shifted") {
                        Some(p) => (p, 0.5),
                        None => (rest, 0.0),
                    };
                    if !pct.ends_with('%') {
                        return Err(format!("expected hotspot-N% (e.g. hotspot-5%), got {s:?}"));
                    }
                    hotspot(num(pct, "hot key percentage")?, 0.95, shift)?
                } else {
                    return Err(format!(
                        "unknown distribution {name:?}: expected uniform, zipfian[:CONST], hotspot-5%, \
                         hotspot:KEYFRAC[:OPFRAC[:SHIFT]], latest[:CONST], exponential[:RANGE], dynamic or phased:FILE"
                    ));
                }
            }
        };
        Ok(spec)
    }

    /// Short name for reports.
    pub fn describe(&self) -> String {
        match self {
            DistSpec::Uniform => "uniform".into(),
            DistSpec::Zipfian { theta } => format!("zipfian:{theta}"),
            DistSpec::Hotspot {
                key_frac,
                op_frac,
                shift,
            } => {
                if *op_frac == 0.95 && *shift == 0.0 {
                    format!("hotspot-{}%", key_frac * 100.0)
                } else {
                    format!("hotspot:{key_frac}:{op_frac}:{shift}")
                }
            }
            DistSpec::Latest { theta } => format!("latest:{theta}"),
            DistSpec::Exponential { range } => format!("exponential:{range}"),
            DistSpec::Phased(phases) => {
                let p: Vec<String> = phases
                    .iter()
                    .map(|p| {
                        let mix = p.mix.map(|w| format!(" {}", w.name())).unwrap_or_default();
                        match p.len {
                            PhaseLen::Ops(n) => format!("{n} {}{mix}", p.dist.describe()),
                            PhaseLen::Fraction(f) => {
                                format!("{:.1}% {}{mix}", f * 100.0, p.dist.describe())
                            }
                        }
                    })
                    .collect();
                format!("phased[{}]", p.join(", "))
            }
        }
    }
}

fn hotspot(key_frac: f64, op_frac: f64, shift: f64) -> std::result::Result<DistSpec, String> {
    if !(key_frac > 0.0 && key_frac <= 1.0) {
        return Err(format!("hot key fraction {key_frac} must be in (0, 1]"));
    }
    if !(0.0..=1.0).contains(&op_frac) {
        return Err(format!(
            "hot operation fraction {op_frac} must be in [0, 1]"
        ));
    }
    if !(0.0..1.0).contains(&shift) {
        return Err(format!("hot set shift {shift} must be in [0, 1)"));
    }
    Ok(DistSpec::Hotspot {
        key_frac,
        op_frac,
        shift,
    })
}

/// Reads a phase file: one phase per line, `LENGTH DISTRIBUTION [WORKLOAD]`, where LENGTH is
/// a number of operations or a percentage of the run (`25%`) and WORKLOAD, when given,
/// replaces `--workload`'s operation mix during the phase; `#` starts a comment.
pub fn parse_phase_file(path: &Path) -> Result<DistSpec> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    parse_phases(&text, path)
}

/// Parses the text of a phase file (`path` only names it in errors).
pub fn parse_phases(text: &str, path: &Path) -> Result<DistSpec> {
    let err = |line: usize, msg: String| BenchError::Parse {
        path: PathBuf::from(path),
        line,
        msg,
    };
    let mut phases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(len), Some(dist), mix, None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(err(
                i + 1,
                format!("expected `OPS DISTRIBUTION [WORKLOAD]` (e.g. `100000 hotspot-5%`, `25% uniform` or `30% hotspot-5% scan`), got {line:?}"),
            ));
        };
        let mix = mix
            .map(|m| m.parse::<Workload>())
            .transpose()
            .map_err(|e| err(i + 1, e.to_string()))?;
        let len = if let Some(pct) = len.strip_suffix('%') {
            let f: f64 = pct
                .parse()
                .map_err(|_| err(i + 1, format!("phase length {len:?} is not a percentage")))?;
            if !(f > 0.0 && f <= 100.0) {
                return Err(err(
                    i + 1,
                    format!("phase length {len} must be in (0%, 100%]"),
                ));
            }
            PhaseLen::Fraction(f / 100.0)
        } else {
            let n: u64 = len.parse().map_err(|_| {
                err(
                    i + 1,
                    format!("phase length {len:?} is not a number of operations"),
                )
            })?;
            if n == 0 {
                return Err(err(i + 1, "phase length must be positive".into()));
            }
            PhaseLen::Ops(n)
        };
        let dist = DistSpec::parse_simple(dist).map_err(|m| err(i + 1, m))?;
        phases.push(Phase { len, dist, mix });
    }
    if phases.is_empty() {
        return Err(err(
            0,
            "no phases: expected lines of `OPS DISTRIBUTION`".into(),
        ));
    }
    Ok(DistSpec::Phased(phases))
}

/// A fixed bijection on `0..n` (`r -> (a * r + b) mod n` with `a` coprime to `n`), used to
/// spread popularity ranks over record ids.
#[derive(Clone, Copy, Debug)]
pub struct Scramble {
    n: u64,
    a: u64,
    b: u64,
}

impl Scramble {
    /// A bijection on `0..n` whose offset is `shift` of the range.
    pub fn new(n: u64, shift: f64) -> Scramble {
        let n = n.max(1);
        // A large odd multiplier near n * golden ratio keeps consecutive ranks far apart.
        let mut a = ((n as f64 * 0.618_033_988_749_895) as u64) | 1;
        while gcd(a, n) != 1 {
            a += 2;
        }
        // A fixed extra offset keeps the most popular rank away from id 0 (the first record
        // loaded), which would otherwise always be the hottest.
        let b = (((shift + 0.381_966) * n as f64) as u64) % n;
        Scramble {
            n,
            a: a % n.max(2),
            b,
        }
    }

    /// The id of rank `r` (`r < n`).
    pub fn map(&self, r: u64) -> u64 {
        if self.n <= 1 {
            return 0;
        }
        ((self.a as u128 * r as u128 + self.b as u128) % self.n as u128) as u64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Draws of an id not inserted yet before `KeyChooser::sample` folds one into the existing
/// range.
const MAX_REDRAWS: u32 = 64;

/// A sampler built from a [`DistSpec`] for a run.
#[derive(Clone, Debug)]
pub struct KeyChooser {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Uniform,
    Zipfian {
        zipf: Zipf<f64>,
        scramble: Scramble,
    },
    Hotspot {
        hot: u64,
        op_frac: f64,
        space: u64,
        scramble: Scramble,
    },
    Latest {
        theta: f64,
    },
    Exponential {
        range: f64,
        space: u64,
    },
    Phased {
        /// Op index at which each phase ends (exclusive), ascending.
        ends: Vec<u64>,
        choosers: Vec<KeyChooser>,
    },
}

impl KeyChooser {
    /// Builds the sampler. `loaded` is the number of records loaded before the run, `space`
    /// the number of ids the run can address (those plus its inserts). A hotspot lies in the
    /// loaded records, as YCSB's hotspot generator and the HotRAP prototype's driver place
    /// it: inserts never join it. The zipfian ranks over `space`, so a rank keeps its id as
    /// records are inserted. `total_ops` sizes fractional phases.
    pub fn new(spec: &DistSpec, loaded: u64, space: u64, total_ops: u64) -> Result<KeyChooser> {
        let space = space.max(1);
        let loaded = loaded.clamp(1, space);
        let kind = match spec {
            DistSpec::Uniform => Kind::Uniform,
            DistSpec::Zipfian { theta } => Kind::Zipfian {
                zipf: Zipf::new(space, *theta).map_err(|e| {
                    BenchError::InvalidArgument(format!("zipfian constant {theta}: {e}"))
                })?,
                scramble: Scramble::new(space, 0.0),
            },
            DistSpec::Hotspot {
                key_frac,
                op_frac,
                shift,
            } => Kind::Hotspot {
                hot: ((loaded as f64 * key_frac).round() as u64).clamp(1, loaded),
                op_frac: *op_frac,
                space: loaded,
                scramble: Scramble::new(loaded, *shift),
            },
            DistSpec::Latest { theta } => {
                Zipf::new(space, *theta).map_err(|e| {
                    BenchError::InvalidArgument(format!("latest constant {theta}: {e}"))
                })?;
                Kind::Latest { theta: *theta }
            }
            DistSpec::Exponential { range } => Kind::Exponential {
                range: *range,
                space,
            },
            DistSpec::Phased(phases) => {
                let mut ends = Vec::with_capacity(phases.len());
                let mut choosers = Vec::with_capacity(phases.len());
                let mut at = 0u64;
                for p in phases {
                    if matches!(p.dist, DistSpec::Phased(_)) {
                        return Err(BenchError::InvalidArgument(
                            "phases cannot be nested".into(),
                        ));
                    }
                    let len = match p.len {
                        PhaseLen::Ops(n) => n,
                        PhaseLen::Fraction(f) => ((total_ops as f64 * f).round() as u64).max(1),
                    };
                    at = at.saturating_add(len);
                    ends.push(at);
                    choosers.push(KeyChooser::new(&p.dist, loaded, space, total_ops)?);
                }
                Kind::Phased { ends, choosers }
            }
        };
        Ok(KeyChooser { kind })
    }

    /// Index of the phase that operation `op_index` falls in (0 when not phased).
    pub fn phase_of(&self, op_index: u64) -> usize {
        match &self.kind {
            Kind::Phased { ends, .. } => {
                ends.partition_point(|&e| e <= op_index).min(ends.len() - 1)
            }
            _ => 0,
        }
    }

    /// Samples the id for operation `op_index`, when `existing` ids (`0..existing`) exist.
    /// Always returns an id below `existing` (or 0 when nothing exists).
    pub fn sample<R: Rng>(&self, rng: &mut R, op_index: u64, existing: u64) -> u64 {
        let existing = existing.max(1);
        if let Kind::Phased { choosers, .. } = &self.kind {
            return choosers[self.phase_of(op_index)].sample(rng, op_index, existing);
        }
        // An id not inserted yet is drawn again, as YCSB and the prototype's driver do: folding
        // it into the existing range instead sent a popular rank to a different record after
        // every insert (with 25% inserts a third of a hotspot moved all the time). Rarely
        // most of the space is still to come; the fold then bounds the draws.
        let mut id = self.draw(rng, existing);
        for _ in 0..MAX_REDRAWS {
            if id < existing {
                return id;
            }
            id = self.draw(rng, existing);
        }
        id % existing
    }

    fn draw<R: Rng>(&self, rng: &mut R, existing: u64) -> u64 {
        match &self.kind {
            Kind::Uniform => rng.gen_range(0..existing),
            Kind::Zipfian { zipf, scramble } => {
                let rank = zipf.sample(rng) as u64 - 1;
                scramble.map(rank)
            }
            Kind::Hotspot {
                hot,
                op_frac,
                space,
                scramble,
            } => {
                let rank = if *hot >= *space || rng.gen_bool(*op_frac) {
                    rng.gen_range(0..*hot)
                } else {
                    rng.gen_range(*hot..*space)
                };
                scramble.map(rank)
            }
            Kind::Latest { theta } => {
                // Validated in `new`; a fresh sampler per call because `existing` grows.
                let back = Zipf::new(existing, *theta)
                    .map(|z| z.sample(rng) as u64 - 1)
                    .unwrap_or(0);
                existing - 1 - back.min(existing - 1)
            }
            Kind::Exponential { range, space } => {
                let u: f64 = rng.gen();
                let rank = ((-u * range).exp() * *space as f64) as u64;
                // db_bench's prime multiply spreads neighbouring ranks.
                rank.wrapping_mul(0x5bd1_e995) % *space
            }
            // `sample` picks the phase's chooser first.
            Kind::Phased { .. } => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn counts(chooser: &KeyChooser, n: u64, samples: usize) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut c = vec![0u64; n as usize];
        for i in 0..samples {
            c[chooser.sample(&mut rng, i as u64, n) as usize] += 1;
        }
        c
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(DistSpec::parse("uniform").unwrap(), DistSpec::Uniform);
        assert_eq!(
            DistSpec::parse("zipfian").unwrap(),
            DistSpec::Zipfian { theta: 0.99 }
        );
        assert_eq!(
            DistSpec::parse("zipfian:1.2").unwrap(),
            DistSpec::Zipfian { theta: 1.2 }
        );
        assert_eq!(
            DistSpec::parse("hotspot-5%").unwrap(),
            DistSpec::Hotspot {
                key_frac: 0.05,
                op_frac: 0.95,
                shift: 0.0
            }
        );
        assert_eq!(
            DistSpec::parse("hotspot:0.01:0.9").unwrap(),
            DistSpec::Hotspot {
                key_frac: 0.01,
                op_frac: 0.9,
                shift: 0.0
            }
        );
        assert_eq!(
            DistSpec::parse("hotspot:5%:95%:0.5").unwrap(),
            DistSpec::Hotspot {
                key_frac: 0.05,
                op_frac: 0.95,
                shift: 0.5
            }
        );
        assert_eq!(
            DistSpec::parse("latest").unwrap(),
            DistSpec::Latest { theta: 0.99 }
        );
        assert_eq!(
            DistSpec::parse("exponential").unwrap(),
            DistSpec::Exponential { range: 10.0 }
        );
        assert!(matches!(DistSpec::parse("dynamic").unwrap(), DistSpec::Phased(p) if p.len() == 7));
    }

    #[test]
    fn rejects_bad_forms_with_a_message() {
        for bad in [
            "zipf:abc",
            "zipfian:-1",
            "hotspot",
            "hotspot:0",
            "hotspot:0.5:2",
            "hotspot:0.1:0.9:1.5",
            "hotspot-5",
            "normal",
            "uniform:3",
            "exponential:0",
            "phased:/nonexistent/phases.txt",
        ] {
            let e = DistSpec::parse(bad).unwrap_err().to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        let e = DistSpec::parse("normal").unwrap_err().to_string();
        assert!(e.contains("unknown distribution"), "{e}");
    }

    #[test]
    fn scramble_is_a_bijection_in_range() {
        for n in [1u64, 2, 3, 10, 97, 1000, 1024, 4096] {
            for shift in [0.0, 0.3] {
                let s = Scramble::new(n, shift);
                let mut seen = vec![false; n as usize];
                for r in 0..n {
                    let id = s.map(r);
                    assert!(id < n);
                    assert!(!seen[id as usize], "n={n} collides at {r}");
                    seen[id as usize] = true;
                }
            }
        }
    }

    /// A hotspot stays on the same loaded records while the run inserts more (YCSB's and
    /// the HotRAP prototype's hotspot): a record hot before the inserts is hot after them,
    /// and no inserted record joins the hot set.
    #[test]
    fn hotspot_stays_put_while_records_are_inserted() {
        let (loaded, space) = (10_000u64, 15_000u64);
        let c = KeyChooser::new(&DistSpec::parse("hotspot-5%").unwrap(), loaded, space, 0).unwrap();
        let hot_ids = |existing: u64| {
            let mut rng = SmallRng::seed_from_u64(3);
            let mut n = vec![0u32; space as usize];
            for i in 0..100_000 {
                n[c.sample(&mut rng, i, existing) as usize] += 1;
            }
            // A hot id gets about 190 draws, a cold one under 1.
            (0..space)
                .filter(|&id| n[id as usize] > 20)
                .collect::<Vec<_>>()
        };
        let before = hot_ids(loaded);
        assert_eq!(before.len(), 500);
        assert_eq!(hot_ids(12_500), before);
        assert_eq!(hot_ids(space), before);
    }

    #[test]
    fn samples_stay_in_range() {
        let specs = [
            "uniform",
            "zipfian",
            "zipfian:2.1",
            "hotspot-5%",
            "latest",
            "exponential",
            "dynamic",
        ];
        let mut rng = SmallRng::seed_from_u64(1);
        for s in specs {
            let c = KeyChooser::new(&DistSpec::parse(s).unwrap(), 10_000, 10_000, 1000).unwrap();
            for i in 0..5000u64 {
                // Fewer ids exist than the space: samples must still be valid ids.
                let existing = 1 + i % 7000;
                assert!(c.sample(&mut rng, i, existing) < existing, "{s}");
            }
        }
    }

    #[test]
    fn zipfian_is_skewed_and_scrambled() {
        let n = 1000;
        let c = KeyChooser::new(&DistSpec::Zipfian { theta: 0.99 }, n, n, 0).unwrap();
        let mut cnt = counts(&c, n, 100_000);
        // Scrambled: the most popular id is not id 0 (it would be without scrambling).
        let top = (0..n as usize).max_by_key(|&i| cnt[i]).unwrap();
        assert_ne!(top, 0);
        cnt.sort_unstable_by(|a, b| b.cmp(a));
        let top10: u64 = cnt[..10].iter().sum();
        // Zipf 0.99 over 1000 items: the top 1% gets ~39% of accesses; uniform would give 1%.
        assert!(top10 > 30_000 && top10 < 50_000, "top10 = {top10}");
        assert!(cnt[0] > 10 * cnt[100], "rank 1 vs rank 101");
    }

    #[test]
    fn hotspot_sends_the_op_fraction_to_the_key_fraction() {
        let n = 2000;
        let spec = DistSpec::parse("hotspot-5%").unwrap();
        let c = KeyChooser::new(&spec, n, n, 0).unwrap();
        let mut cnt = counts(&c, n, 200_000);
        let touched = cnt.iter().filter(|&&x| x > 0).count();
        assert!(touched > 1900, "cold keys are still read: {touched}");
        cnt.sort_unstable_by(|a, b| b.cmp(a));
        let hot: u64 = cnt[..100].iter().sum();
        let share = hot as f64 / 200_000.0;
        assert!((0.94..0.96).contains(&share), "hot share {share}");
    }

    #[test]
    fn shifted_hotspot_uses_another_hot_set() {
        let n = 2000;
        let a = KeyChooser::new(&DistSpec::parse("hotspot:0.05:1").unwrap(), n, n, 0).unwrap();
        let b = KeyChooser::new(&DistSpec::parse("hotspot:0.05:1:0.5").unwrap(), n, n, 0).unwrap();
        let (ca, cb) = (counts(&a, n, 20_000), counts(&b, n, 20_000));
        let overlap = (0..n as usize).filter(|&i| ca[i] > 0 && cb[i] > 0).count();
        assert_eq!(ca.iter().filter(|&&x| x > 0).count(), 100);
        assert_eq!(overlap, 0);
    }

    #[test]
    fn latest_prefers_recent_ids() {
        let c = KeyChooser::new(&DistSpec::Latest { theta: 0.99 }, 1000, 1000, 0).unwrap();
        let cnt = counts(&c, 1000, 50_000);
        let recent: u64 = cnt[900..].iter().sum();
        let old: u64 = cnt[..100].iter().sum();
        assert!(recent > 5 * old, "recent {recent} old {old}");
        assert!(cnt[999] > cnt[998]);
    }

    #[test]
    fn exponential_is_skewed() {
        let c = KeyChooser::new(&DistSpec::Exponential { range: 10.0 }, 10_000, 10_000, 0).unwrap();
        let mut cnt = counts(&c, 10_000, 100_000);
        cnt.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = cnt[..1000].iter().sum();
        // exp(-10u) puts most mass on small ranks: the top 10% of ids get most operations.
        assert!(top > 60_000, "top 10% got {top}");
    }

    #[test]
    fn phases_switch_at_their_boundaries() {
        let text = "# comment\n100 hotspot:0.01:1\n\n50% uniform # rest\n";
        let spec = parse_phases(text, Path::new("p.txt")).unwrap();
        let c = KeyChooser::new(&spec, 10_000, 10_000, 1000).unwrap();
        assert_eq!(c.phase_of(0), 0);
        assert_eq!(c.phase_of(99), 0);
        assert_eq!(c.phase_of(100), 1);
        // Past the last phase, the last one goes on.
        assert_eq!(c.phase_of(5000), 1);
        let mut rng = SmallRng::seed_from_u64(3);
        let first: std::collections::HashSet<u64> =
            (0..100).map(|i| c.sample(&mut rng, i, 10_000)).collect();
        assert!(first.len() <= 100 && first.iter().all(|&id| id < 10_000));
        let hot_ids: std::collections::HashSet<u64> =
            (0..2000).map(|_| c.sample(&mut rng, 50, 10_000)).collect();
        assert_eq!(hot_ids.len(), 100, "phase 0 is a 1% hotspot");
        let later: std::collections::HashSet<u64> =
            (0..2000).map(|_| c.sample(&mut rng, 200, 10_000)).collect();
        assert!(later.len() > 1500, "phase 1 is uniform");
    }

    #[test]
    fn bad_phase_lines_name_the_line() {
        for (text, line) in [
            ("100 uniform\nabc uniform\n", 2),
            ("100\n", 1),
            ("0 uniform\n", 1),
            ("1 uniform\n2 nonsense\n", 2),
            ("150% uniform\n", 1),
            ("1 uniform extra\n", 1),
        ] {
            match parse_phases(text, Path::new("p.txt")) {
                Err(BenchError::Parse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(parse_phases("# nothing\n", Path::new("p.txt")).is_err());
    }
}
