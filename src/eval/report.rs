//! `--report DIR` of the eval commands: a markdown summary (`report.md`) and
//! one PNG chart (`recall_at_k.png`) of the recall@k curves (k = 1..=10) of
//! every configuration against the baseline, drawn with `plotters` on its
//! bitmap backend. Text is set in DejaVu Sans, embedded from the `dejavu`
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
}

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
        let root = BitMapBackend::with_buffer(&mut buf, CHART_PX).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
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
        root.present().map_err(plot_err)?;
    }
    Ok(buf)
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
        };
        let with = render(&r).unwrap();
        assert!(count(&with, PALETTE[0]) > 500, "the strata curve is drawn");
        let only_base = Report {
            curves: curves().split_off(1),
            ..r
        };
        assert_eq!(count(&render(&only_base).unwrap(), PALETTE[0]), 0);
    }
}
