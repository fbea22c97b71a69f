//! The session's chart: tokens per call (projected, calibrated, reported),
//! the window and the compaction threshold, compactions and findings
//! marked; drawn by plotters as SVG, then given classes so the page's
//! style colours it (light and dark) and a reader or a test can find marks.

use plotters::prelude::*;

/// What the chart shows, one entry a call, in call order.
pub struct Series {
    pub calls: Vec<i64>,
    pub projected: Vec<u64>,
    pub calibrated: Vec<Option<u64>>,
    pub reported: Vec<Option<u64>>,
    /// What the model takes, and where the policy compacts (last call's).
    pub window: u64,
    pub threshold: u64,
    /// The positions (in `calls`) of the host's compactions, of the
    /// policy's predicted ones where the host had none, and of findings.
    pub host_compactions: Vec<usize>,
    pub predicted: Vec<usize>,
    pub findings: Vec<usize>,
}

// Each drawn thing's colour, unique, so the SVG's elements can be told
// apart and given a class: plotters draws colours, not classes.
const PROJECTED: RGBColor = RGBColor(31, 119, 180);
const CALIBRATED: RGBColor = RGBColor(255, 127, 14);
const REPORTED: RGBColor = RGBColor(44, 160, 44);
const WINDOW: RGBColor = RGBColor(127, 127, 127);
const THRESHOLD: RGBColor = RGBColor(148, 103, 189);
const HOST: RGBColor = RGBColor(214, 39, 40);
const PREDICTED: RGBColor = RGBColor(23, 190, 207);
const FINDING: RGBColor = RGBColor(188, 189, 34);

/// The most calls whose counts get a dot each.
const DOTS: usize = 200;

/// The classes each colour's elements get.
const CLASSES: [(RGBColor, &str); 8] = [
    (PROJECTED, "series-projected"),
    (CALIBRATED, "series-calibrated"),
    (REPORTED, "series-reported"),
    (WINDOW, "line-window"),
    (THRESHOLD, "line-threshold"),
    (HOST, "mark-compaction"),
    (PREDICTED, "mark-predicted"),
    (FINDING, "mark-finding"),
];

/// The chart as an SVG element, `width` x `height` pixels.
pub fn svg(series: &Series, width: u32, height: u32) -> String {
    let mut out = String::new();
    if draw(series, &mut out, width, height).is_err() {
        return String::new();
    }
    classed(&out)
}

fn draw<'a>(
    s: &Series,
    out: &'a mut String,
    width: u32,
    height: u32,
) -> Result<(), Box<dyn std::error::Error + 'a>> {
    let n = s.calls.len().max(1);
    let top = (s.projected.iter().copied())
        .chain(s.calibrated.iter().flatten().copied())
        .chain(s.reported.iter().flatten().copied())
        .chain([s.window, s.threshold])
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.08;
    let root = SVGBackend::with_string(out, (width, height)).into_drawing_area();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0.5f64..n as f64 + 0.5, 0f64..top)?;
    let calls = &s.calls;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("model call")
        .y_desc("tokens")
        .x_labels(n.min(12))
        .x_label_formatter(&|x| {
            let at = (x.round() as usize).clamp(1, n) - 1;
            calls.get(at).map_or(String::new(), i64::to_string)
        })
        .y_label_formatter(&|y| thousands(*y))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    let at = |i: usize| (i + 1) as f64;
    let line = |color: RGBColor, points: Vec<(f64, f64)>| LineSeries::new(points, color);
    for (value, color) in [(s.window, WINDOW), (s.threshold, THRESHOLD)] {
        if value > 0 {
            let y = value as f64;
            chart.draw_series(line(color, vec![(0.5, y), (n as f64 + 0.5, y)]))?;
        }
    }
    let projected = (s.projected.iter().enumerate()).map(|(i, &t)| (at(i), t as f64));
    chart.draw_series(line(PROJECTED, projected.collect()))?;
    for (values, color) in [(&s.calibrated, CALIBRATED), (&s.reported, REPORTED)] {
        let points: Vec<(f64, f64)> = (values.iter().enumerate())
            .filter_map(|(i, v)| v.map(|t| (at(i), t as f64)))
            .collect();
        if !points.is_empty() {
            chart.draw_series(line(color, points.clone()))?;
            // A dot a call where they can be told apart.
            if points.len() <= DOTS {
                chart.draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 2, color.filled())),
                )?;
            }
        }
    }
    let near_top = top * 0.97;
    for (marks, color) in [(&s.host_compactions, HOST), (&s.predicted, PREDICTED)] {
        chart.draw_series(
            (marks.iter()).map(|&i| TriangleMarker::new((at(i), near_top), 7, color.filled())),
        )?;
    }
    chart.draw_series(
        (s.findings.iter()).map(|&i| Circle::new((at(i), top * 0.02), 3, FINDING.filled())),
    )?;
    root.present()?;
    Ok(())
}

/// The SVG with each drawn thing's class beside its colour, and black (the
/// axes, the labels) as the page's text colour.
fn classed(svg: &str) -> String {
    let mut out = svg.replace("\"#000000\"", "\"currentColor\"");
    for (color, class) in CLASSES {
        let hex = format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2);
        for attribute in ["fill", "stroke"] {
            out = out.replace(
                &format!("{attribute}=\"{hex}\""),
                &format!("class=\"{class}\" {attribute}=\"{hex}\""),
            );
        }
    }
    out.replacen("<svg ", "<svg role=\"img\" class=\"chart\" ", 1)
}

fn thousands(value: f64) -> String {
    crate::display::thousands(value.round() as i64)
}

/// The legend: each series' class and words, for the page to draw beside
/// the chart in its colours.
pub const LEGEND: [(&str, &str); 8] = [
    ("series-projected", "projected (ctxlens's estimate)"),
    ("series-calibrated", "calibrated (in the provider's tokens)"),
    ("series-reported", "reported by the provider"),
    ("line-window", "what the model takes"),
    ("line-threshold", "where the policy compacts"),
    ("mark-compaction", "the host compacted"),
    ("mark-predicted", "the policy compacts, the host did not"),
    ("mark-finding", "a finding"),
];
