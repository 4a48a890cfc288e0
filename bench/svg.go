package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Charts returns the run's charts as SVG files by name: commit latency
// against batch size per engine (one chart per record size), each
// engine's records/s as a ratio to raw across the cells, and records/s
// against concurrent producers.
func (r *Run) Charts() map[string]string {
	out := map[string]string{}
	if len(r.Producers) > 0 {
		out["throughput-vs-producers.svg"] = r.producersChart()
	}
	if len(r.Engine) == 0 {
		return out
	}
	engines, cells := enginesAndCells(r.Engine)
	for _, size := range []int{256, 4096} {
		var batches []int
		for _, c := range cells {
			if c.RecordBytes == size {
				batches = append(batches, c.Batch)
			}
		}
		if len(batches) < 2 {
			continue
		}
		labels := make([]string, len(batches))
		for i, b := range batches {
			labels[i] = fmt.Sprint(b)
		}
		series := map[string][]float64{}
		for _, e := range r.Engine {
			if e.RecordBytes != size {
				continue
			}
			if series[e.Engine] == nil {
				series[e.Engine] = nanSlice(len(batches))
			}
			for i, b := range batches {
				if b == e.Batch {
					series[e.Engine][i] = e.P50Micros
				}
			}
		}
		out[fmt.Sprintf("latency-vs-batch-%s.svg", strings.ReplaceAll(sizeName(size), " ", ""))] =
			lineChart(fmt.Sprintf("Commit latency p50 (us, log scale) against batch, %s records", sizeName(size)), "records per batch", labels, engines, series, true)
	}
	labels := make([]string, len(cells))
	for i, c := range cells {
		labels[i] = c.String()
	}
	series := map[string][]float64{}
	for _, e := range r.Engine {
		if series[e.Engine] == nil {
			series[e.Engine] = nanSlice(len(cells))
		}
		for i, c := range cells {
			if c == (Cell{e.RecordBytes, e.Batch}) {
				series[e.Engine][i] = e.VsRaw
			}
		}
	}
	out["throughput-vs-raw.svg"] = lineChart("Records/s as a ratio to raw (append + fdatasync), same cell", "record x batch", labels, engines, series, false)
	return out
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

var palette = []string{"#222222", "#888888", "#d62728", "#ff7f0e", "#bcbd22", "#e377c2", "#8c564b", "#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#7f7f7f"}

// lineChart draws one line per series over categorical x labels; NaN
// points are left out. yLog puts the y axis on a log10 scale.
func lineChart(title, xTitle string, labels, order []string, series map[string][]float64, yLog bool) string {
	const w, h, left, right, top, bottom = 900, 480, 70, 230, 40, 60
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s {
			if !math.IsNaN(v) && (!yLog || v > 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	tr := func(v float64) float64 { return v }
	if yLog {
		tr = math.Log10
		lo, hi = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	} else {
		lo = 0
		hi = math.Ceil(hi*1.1*10) / 10
	}
	if hi <= lo {
		hi = lo + 1
	}
	y := func(v float64) float64 { return float64(top) + ph - (tr(v)-lo)/(hi-lo)*ph }
	x := func(i int) float64 {
		if len(labels) == 1 {
			return float64(left) + pw/2
		}
		return float64(left) + float64(i)*pw/float64(len(labels)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/><text x="%d" y="24" font-size="15">%s</text>`+"\n", w, h, left, html.EscapeString(title))
	// Grid and y labels.
	for k := 0; k <= 5; k++ {
		v := lo + (hi-lo)*float64(k)/5
		label := fmt.Sprintf("%.2g", v)
		if yLog {
			label = fmt.Sprintf("%.3g", math.Pow(10, v))
		}
		yy := float64(top) + ph - float64(k)/5*ph
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, float64(left)+pw, yy, yy, left-6, yy+4, label)
	}
	for i, l := range labels {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(i), h-bottom+18, html.EscapeString(l))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+pw/2, h-bottom+42, html.EscapeString(xTitle))
	n := 0
	for _, name := range order {
		s, ok := series[name]
		if !ok {
			continue
		}
		color := palette[n%len(palette)]
		var pts []string
		for i, v := range s {
			if math.IsNaN(v) || (yLog && v <= 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(i), y(v), color)
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		}
		ly := top + 10 + n*18
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			w-right+15, w-right+35, ly, ly, color, w-right+40, ly+4, html.EscapeString(name))
		n++
	}
	b.WriteString("</svg>\n")
	return b.String()
}
