//! `--report DIR` of the eval commands: a markdown summary (`report.md`) and
//! one PNG chart (`recall_at_k.png`) of the recall@k curves (k = 1..=10) of
//! every configuration against the baseline and, beside them, the L0 inject
//! outcomes (hit, wrong, empty, answer in context) of each inject variant,
//! drawn with `plotters` on its bitmap backend. Text is set in DejaVu Sans, embedded from the `dejavu`
//! crate, so the chart needs no system fonts.

use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Largest k of the curves (recall@1 ..= recall@`MAX_K`).
pub const MAX_K: usize = 10;

/// File name of the chart inside the report directory.
pub const CHART_FILE: &str = "recall_at_k.png";

/// File name of the markdown summary inside the report directory.
pub const MARKDOWN_FILE: &str = "report.md";

/// Chart size in pixels (width, height).
const CHART_PX: (u32, u32) = (960, 600);

/// One system's recall@k curve.
#[derive(Debug, Clone)]
pub struct Curve {
    /// System name as in the tables (e.g. `strata`, `bm25_raw`).
    pub name: String,
    /// recall@k for k = 1..=[`MAX_K`] (index k − 1), each in 0..=1. NaN points are skipped.
    pub recall: Vec<f64>,
}

/// What one report holds.
#[derive(Debug, Clone)]
pub struct Report {
    /// Title of the markdown page and of the chart.
    pub title: String,
    /// Name of the baseline curve (drawn dashed and black; ratios in the markdown are against it).
    pub baseline: String,
    /// Every configuration's curve, the baseline included.
    pub curves: Vec<Curve>,
    /// Markdown placed under the title, before the chart (run facts, tables).
    pub body: String,
    /// L0 inject outcomes per variant, drawn as bars right of the curves
    /// (none: the curves take the whole chart).
    pub inject: Vec<InjectBars>,
}

/// One inject variant's outcome shares (each in 0..=1; NaN is drawn as 0).
#[derive(Debug, Clone)]
pub struct InjectBars {
    /// Variant name (`fresh turn`, `after previous`).
    pub variant: String,
    /// Shares in the order of [`INJECT_BARS`].
    pub values: [f64; 4],
}

/// The inject outcomes drawn, in order.
pub const INJECT_BARS: [&str; 4] = ["hit", "wrong", "empty", "answer in context"];

/// Width of the inject panel in pixels, when there is one.
const INJECT_PANEL_PX: u32 = 330;

/// A markdown table from a header row and rows of cells.
pub fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        header.iter().map(|_| "---|").collect::<String>()
    );
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    s
}

/// Formats a recall value with three decimals (`n/a` for NaN).
pub fn fmt3(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{x:.3}")
    }
}

/// The standard recall@k table of a report: system, R@1, R@5, R@10 and the
/// R@5 difference to the baseline.
pub fn recall_table(curves: &[Curve], baseline: &str) -> String {
    let at = |c: &Curve, k: usize| c.recall.get(k - 1).copied().unwrap_or(f64::NAN);
    let base5 = curves
        .iter()
        .find(|c| c.name == baseline)
        .map(|c| at(c, 5))
        .unwrap_or(f64::NAN);
    let rows: Vec<Vec<String>> = curves
        .iter()
        .map(|c| {
            let d = at(c, 5) - base5;
            let delta = if c.name == baseline || d.is_nan() {
                "—".to_string()
            } else {
                format!("{d:+.3}")
            };
            vec![
                format!("`{}`", c.name),
                fmt3(at(c, 1)),
                fmt3(at(c, 5)),
                fmt3(at(c, 10)),
                delta,
            ]
        })
        .collect();
    md_table(
        &[
            "system",
            "R@1",
            "R@5",
            "R@10",
            &format!("R@5 vs {baseline}"),
        ],
        &rows,
    )
}

fn plot_err<E: std::fmt::Display>(e: E) -> Error {
    Error::Task(format!("drawing the report chart: {e}"))
}

/// Registers the embedded DejaVu Sans (normal and bold) as plotters'
/// "sans-serif" family, once per process. Needed by every plotters chart in
/// the process, criterion's HTML reports included (plotters' `ab_glyph` font
/// backend has no system fonts).
///
/// # Errors
/// [`Error::Task`] when the embedded font cannot be parsed (never expected).
pub fn register_fonts() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .and_then(|_| {
                plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold())
            })
            .map_err(|_| "the embedded DejaVu Sans font did not load".to_string())
    })
    .clone()
    .map_err(Error::Task)
}

/// Colours of the non-baseline curves, in order (matplotlib's "tab10").
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the recall@k chart of `report` into `path` (PNG, 960 × 600 pixels).
///
/// # Errors
/// [`Error::Task`] when drawing fails; I/O errors when the file cannot be written.
pub fn draw_chart(report: &Report, path: &Path) -> Result<()> {
    let buf = render(report)?;
    image::save_buffer_with_format(
        path,
        &buf,
        CHART_PX.0,
        CHART_PX.1,
        image::ColorType::Rgb8,
        image::ImageFormat::Png,
    )
    .map_err(|e| Error::Task(format!("writing the report chart {}: {e}", path.display())))
}

/// Renders the chart into an RGB8 buffer of [`CHART_PX`].
fn render(report: &Report) -> Result<Vec<u8>> {
    register_fonts()?;
    let lowest = report
        .curves
        .iter()
        .flat_map(|c| c.recall.iter().copied())
        .filter(|x| !x.is_nan())
        .fold(1.0f64, f64::min);
    let y_min = ((lowest - 0.05).max(0.0) * 10.0).floor() / 10.0;
    let mut buf = vec![255u8; (CHART_PX.0 * CHART_PX.1 * 3) as usize];
    {
        let whole = BitMapBackend::with_buffer(&mut buf, CHART_PX).into_drawing_area();
        whole.fill(&WHITE).map_err(plot_err)?;
        let (root, panel) = if report.inject.is_empty() {
            (whole.clone(), None)
        } else {
            let (l, r) = whole.split_horizontally(CHART_PX.0 - INJECT_PANEL_PX);
            (l, Some(r))
        };
        if let Some(panel) = &panel {
            draw_inject(panel, &report.inject)?;
        }
        let mut chart = ChartBuilder::on(&root)
            .caption(&report.title, ("sans-serif", 22).into_font())
            .margin(18)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(1f64..MAX_K as f64, y_min..1.0f64)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("k (distinct sessions returned)")
            .y_desc("recall@k")
            .x_labels(MAX_K)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        let mut next = 0usize;
        for c in &report.curves {
            let pts: Vec<(f64, f64)> = c
                .recall
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.is_nan())
                .map(|(i, r)| ((i + 1) as f64, *r))
                .collect();
            let is_base = c.name == report.baseline;
            let color = if is_base {
                BLACK
            } else {
                next += 1;
                PALETTE[(next - 1) % PALETTE.len()]
            };
            let style = ShapeStyle {
                color: color.to_rgba(),
                filled: true,
                stroke_width: if is_base { 2 } else { 3 },
            };
            let label = if is_base {
                format!("{} (baseline)", c.name)
            } else {
                c.name.clone()
            };
            if is_base {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                    .map_err(plot_err)?
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(plot_err)?
            }
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, style.filled())))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(("sans-serif", 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        whole.present().map_err(plot_err)?;
    }
    Ok(buf)
}

/// Grouped bars: one group per outcome of [`INJECT_BARS`], one bar per variant.
fn draw_inject<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, bars: &[InjectBars]) -> Result<()> {
    let groups = INJECT_BARS.len();
    let mut chart = ChartBuilder::on(area)
        .caption("L0 inject (share of answerable questions)", ("sans-serif", 16).into_font())
        .margin(18)
        .x_label_area_size(44)
        .y_label_area_size(44)
        .build_cartesian_2d(0f64..groups as f64, 0f64..1.0f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 {
                INJECT_BARS.get(i).map(|s| s.replace(" in context", "")).unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(plot_err)?;
    let width = 0.8 / bars.len().max(1) as f64;
    for (v, b) in bars.iter().enumerate() {
        let color = PALETTE[v % PALETTE.len()];
        chart
            .draw_series((0..groups).map(|g| {
                let x0 = g as f64 + 0.1 + v as f64 * width;
                let y = if b.values[g].is_nan() { 0.0 } else { b.values[g].clamp(0.0, 1.0) };
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, y)], color.filled())
            }))
            .map_err(plot_err)?
            .label(b.variant.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// Writes `report.md` and `recall_at_k.png` into `dir` (created if missing);
/// returns the markdown's path.
///
/// # Errors
/// [`Error::Data`] naming the directory when it cannot be created; I/O
/// errors writing the markdown; [`Error::Task`] when the chart cannot be
/// drawn or written.
pub fn write(dir: &Path, report: &Report) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::Data(format!(
            "cannot create the report directory {}: {e}",
            dir.display()
        ))
    })?;
    draw_chart(report, &dir.join(CHART_FILE))?;
    let md = format!(
        "# {}\n\n{}\n## recall@k, every configuration against `{}`\n\n![recall@k curves]({CHART_FILE})\n\n{}",
        report.title,
        report.body,
        report.baseline,
        recall_table(&report.curves, &report.baseline)
    );
    let path = dir.join(MARKDOWN_FILE);
    std::fs::write(&path, md)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curves() -> Vec<Curve> {
        vec![
            Curve {
                name: "strata".into(),
                recall: (1..=10).map(|k| 0.6 + 0.035 * k as f64).collect(),
            },
            Curve {
                name: "bm25_raw".into(),
                recall: (1..=10).map(|k| 0.5 + 0.04 * k as f64).collect(),
            },
        ]
    }

    #[test]
    fn table_shows_the_r5_difference_to_the_baseline() {
        let t = recall_table(&curves(), "bm25_raw");
        assert!(
            t.contains("| `strata` | 0.635 | 0.775 | 0.950 | +0.075 |"),
            "{t}"
        );
        assert!(
            t.contains("| `bm25_raw` | 0.540 | 0.700 | 0.900 | — |"),
            "{t}"
        );
    }

    #[test]
    fn writes_markdown_and_a_png_chart() {
        let dir = tempfile::tempdir().unwrap();
        let r = Report {
            title: "t".into(),
            baseline: "bm25_raw".into(),
            curves: curves(),
            body: "facts\n".into(),
            inject: vec![],
        };
        let md = write(dir.path(), &r).unwrap();
        let text = std::fs::read_to_string(md).unwrap();
        assert!(text.contains("![recall@k curves](recall_at_k.png)"));
        let png = std::fs::read(dir.path().join(CHART_FILE)).unwrap();
        // a report directory that is a file is a clear error naming it
        let file = dir.path().join("report.md");
        let e = write(&file, &r).unwrap_err().to_string();
        assert!(
            e.contains("cannot create the report directory") && e.contains("report.md"),
            "{e}"
        );
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24
        assert_eq!(
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            CHART_PX.0
        );
        assert_eq!(
            u32::from_be_bytes(png[20..24].try_into().unwrap()),
            CHART_PX.1
        );
    }

    #[test]
    fn every_curve_is_drawn_in_its_colour() {
        let count =
            |buf: &[u8], c: RGBColor| buf.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count();
        let r = Report {
            title: "t".into(),
            baseline: "bm25_raw".into(),
            curves: curves(),
            body: String::new(),
            inject: vec![],
        };
        let with = render(&r).unwrap();
        assert!(count(&with, PALETTE[0]) > 500, "the strata curve is drawn");
        let only_base = Report {
            curves: curves().split_off(1),
            ..r
        };
        assert_eq!(count(&render(&only_base).unwrap(), PALETTE[0]), 0);
    }

    #[test]
    fn inject_bars_are_drawn_beside_the_curves() {
        let count =
            |buf: &[u8], c: RGBColor| buf.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count();
        let bars = |v: [f64; 4]| Report {
            title: "t".into(),
            baseline: "bm25_raw".into(),
            curves: curves().split_off(1),
            body: String::new(),
            inject: vec![InjectBars { variant: "fresh turn".into(), values: v }],
        };
        let tall = count(&render(&bars([0.9, 0.05, 0.05, 0.5])).unwrap(), PALETTE[0]);
        let short = count(&render(&bars([0.2, 0.05, 0.05, 0.1])).unwrap(), PALETTE[0]);
        assert!(tall > 2 * short && short > 100, "bar areas follow the values: {tall} vs {short}");
        let none = count(&render(&bars([f64::NAN; 4])).unwrap(), PALETTE[0]);
        assert!(none < short, "NaN draws as 0: {none}");
    }
}
