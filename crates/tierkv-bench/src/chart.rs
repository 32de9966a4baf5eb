//! PNG charts of the timelines: throughput, FD hit rate and slow-disk read rate over time,
//! every system on one chart per metric. Text is drawn with a font compiled into the binary
//! (Ubuntu Light from `epaint_default_fonts`, via plotters' `ab_glyph` backend), so charts
//! render the same on a fresh machine without system fonts. Draws [`crate::results`] and
//! nothing else; [`crate::report`] decides when.

use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

use crate::error::{BenchError, Result};
use crate::results::{BenchResults, TimelinePoint};

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1200, 700);

/// Registers the embedded font once; false when it could not be parsed (charts are then
/// skipped with an error rather than drawn without text).
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    })
}

/// A distinct, readable colour per series; the three main systems keep fixed colours.
fn colour(name: &str, i: usize) -> RGBColor {
    match name {
        "tierkv" => RGBColor(31, 119, 180),
        "tierkv-nopromo" => RGBColor(214, 39, 40),
        "tierkv-fd" => RGBColor(44, 160, 44),
        _ => {
            const OTHERS: [RGBColor; 7] = [
                RGBColor(255, 127, 14),
                RGBColor(148, 103, 189),
                RGBColor(140, 86, 75),
                RGBColor(227, 119, 194),
                RGBColor(127, 127, 127),
                RGBColor(188, 189, 34),
                RGBColor(23, 190, 207),
            ];
            OTHERS[i % OTHERS.len()]
        }
    }
}

/// One series: a system's name and its points.
type Series = (String, Vec<(f64, f64)>);

/// Bytes counted over a timeline point's interval as MiB/s (`None` without an interval).
fn mib_per_s(bytes: Option<u64>, p: &TimelinePoint) -> Option<f64> {
    bytes
        .filter(|_| p.interval_s > 0.0)
        .map(|b| b as f64 / (1u64 << 20) as f64 / p.interval_s)
}

fn series(res: &BenchResults, f: impl Fn(&TimelinePoint) -> Option<f64>) -> Vec<Series> {
    res.systems
        .iter()
        .map(|s| {
            let pts = s
                .timeline
                .iter()
                .filter_map(|p| f(p).map(|v| (p.t_s, v)))
                .collect();
            (s.name.clone(), pts)
        })
        .collect()
}

/// What a chart shows, for its title: the workload and where the keys come from (the
/// distribution, a trace or key files), cut short so a long phase list or path still fits.
pub(crate) fn subject(res: &BenchResults) -> String {
    const MAX: usize = 80;
    let c = &res.config;
    let full = format!("{}, {}", c.workload_label(), c.keys_label());
    if full.chars().count() <= MAX {
        full
    } else {
        let cut: String = full.chars().take(MAX - 3).collect();
        format!("{cut}...")
    }
}

/// Writes `throughput.png`, `fd_hit_rate.png`, `sd_read.png`, `sd_compaction.png` and, per
/// system with a cache, `cache_<system>.png` (KV, KP and block cache sizes over time) into
/// `out`.
pub fn write_charts(res: &BenchResults, out: &Path) -> Result<()> {
    let subject = subject(res);
    let title = |what: &str| format!("{what}: {subject}");
    line_chart(
        &out.join("throughput.png"),
        &title("Throughput"),
        "operations per second",
        &series(res, |p| Some(p.ops_per_sec)),
        None,
    )?;
    line_chart(
        &out.join("fd_hit_rate.png"),
        &title("FD hit rate of gets"),
        "FD hit rate (%)",
        &series(res, |p| p.fd_hit_rate.map(|r| r * 100.0)),
        // A little headroom keeps a 100% line visible above the plot's edge.
        Some(102.0),
    )?;
    line_chart(
        &out.join("sd_read.png"),
        &title("Slow-disk reads"),
        "SD read MiB/s",
        &series(res, |p| mib_per_s(p.sd_read_bytes, p)),
        None,
    )?;
    line_chart(
        &out.join("sd_compaction.png"),
        &title("Slow-disk bandwidth used by compaction"),
        "SD compaction MiB/s (read + write)",
        &series(res, |p| mib_per_s(p.sd_compaction_bytes, p)),
        None,
    )?;
    for sys in &res.systems {
        let pts = |f: fn(&TimelinePoint) -> Option<u64>| -> Vec<(f64, f64)> {
            sys.timeline
                .iter()
                .filter_map(|p| f(p).map(|b| (p.t_s, b as f64 / (1u64 << 20) as f64)))
                .collect()
        };
        let data: Vec<Series> = vec![
            ("KV".to_string(), pts(|p| p.cache_kv_bytes)),
            ("KP".to_string(), pts(|p| p.cache_kp_bytes)),
            ("block".to_string(), pts(|p| p.cache_block_bytes)),
        ];
        if data.iter().all(|(_, p)| p.is_empty()) {
            continue;
        }
        let file = format!("cache_{}.png", sys.name.replace([':', '/'], "-"));
        line_chart(
            &out.join(file),
            &title(&format!("Cache components of {}", sys.name)),
            "MiB",
            &data,
            None,
        )?;
    }
    Ok(())
}

fn line_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    data: &[Series],
    y_fixed: Option<f64>,
) -> Result<()> {
    let err = |e: String| BenchError::Chart {
        path: path.to_path_buf(),
        msg: e,
    };
    if !font_ready() {
        return Err(err("the embedded font could not be loaded".into()));
    }
    let x_max = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let y_max = y_fixed.unwrap_or_else(|| {
        let m = data
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
            .fold(0.0f64, f64::max);
        if m > 0.0 {
            m * 1.1
        } else {
            1.0
        }
    });
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        let root = root.margin(14, 0, 0, 0).titled(title, (FONT, 32))?;
        // The legend gets its own row above the plot so it never hides a line.
        let (legend, plot) = root.split_vertically(44);
        let mut x = 130;
        for (i, (name, _)) in data.iter().enumerate() {
            let c = colour(name, i);
            legend.draw(&PathElement::new(
                vec![(x, 18), (x + 32, 18)],
                c.stroke_width(5),
            ))?;
            legend.draw(&Text::new(name.as_str(), (x + 40, 6), (FONT, 22)))?;
            x += 40 + 12 * name.len() as i32 + 40;
        }
        let mut chart = ChartBuilder::on(&plot)
            .margin(24)
            .margin_top(8)
            .x_label_area_size(64)
            .y_label_area_size(110)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time since the run phase started (s)")
            .y_desc(y_desc)
            .label_style((FONT, 18))
            .axis_desc_style((FONT, 22))
            .light_line_style(RGBColor(235, 235, 235))
            .y_label_formatter(&|v| short_number(*v))
            .x_label_formatter(&|v| short_number(*v))
            .draw()?;
        for (i, (name, pts)) in data.iter().enumerate() {
            let style = colour(name, i).stroke_width(3);
            chart.draw_series(LineSeries::new(pts.iter().copied(), style))?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| err(e.to_string()))
}

/// Axis labels: 1500 -> "1.5k", 2000000 -> "2M", 0.004 -> "0.004".
fn short_number(v: f64) -> String {
    let a = v.abs();
    if a < 1e-12 {
        return "0".into();
    }
    let (x, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let decimals = if ax >= 10.0 {
        0
    } else if ax >= 1.0 {
        1
    } else {
        // Two significant digits for small values.
        (-ax.log10()).floor() as usize + 2
    };
    let mut s = format!("{x:.decimals$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{s}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(1500.0), "1.5k");
        assert_eq!(short_number(2_000_000.0), "2M");
        assert_eq!(short_number(0.5), "0.5");
        assert_eq!(short_number(95.0), "95");
        assert_eq!(short_number(0.004), "0.004");
        assert_eq!(short_number(0.0125), "0.013");
        assert_eq!(short_number(2.0), "2");
    }

    #[test]
    fn chart_titles_name_the_workload_and_distribution() {
        let dir = tempfile::tempdir().unwrap();
        let mut res = crate::results::tests::sample_results(dir.path());
        let t = subject(&res);
        assert!(t.starts_with("RO, hotspot-"), "{t}");
        res.config.distribution = crate::distribution::DistSpec::Uniform;
        assert_eq!(subject(&res), "RO, uniform");
    }

    #[test]
    fn charts_render_with_the_embedded_font() {
        let dir = tempfile::tempdir().unwrap();
        let res = crate::results::tests::sample_results(dir.path());
        write_charts(&res, dir.path()).unwrap();
        assert!(
            std::fs::metadata(dir.path().join("throughput.png"))
                .unwrap()
                .len()
                > 1000
        );
    }
}
