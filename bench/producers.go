package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/narad-io/storage/codec"
)

// The producers suite: one cell, commits of one small record, with 1 to
// N producers committing at once, through the engines whose Commit takes
// concurrent calls. A partition log turns commits waiting together into
// one write and one fdatasync (group commit); this is where that shows,
// beside pebble, which does the same for its WAL. etcd's WAL and
// tidwall/wal take one writer, so they are not in it; raw, one file
// appended in order, runs with one producer only: the baseline every
// count is quoted against (ProducersVsRaw).

// ProducersCell is the producers suite's workload.
var ProducersCell = Cell{RecordBytes: 256, Batch: 1}

// ConcurrentEngines are the engines the producers suite runs; Producers
// is set per run.
func ConcurrentEngines() []EngineSpec {
	return []EngineSpec{
		{Name: "narad Log produce", Kind: KindNarad, Open: openNaradLog(true, codec.None)},
		{Name: "narad Node", Kind: KindNarad, Open: openNaradNode},
		{Name: "pebble Sync", Kind: KindPeer, Open: openPebble},
	}
}

// ProducersVsRaw sets each result's VsRaw: its records/s against raw's
// (one producer) among rs.
func ProducersVsRaw(rs []EngineResult) {
	i := slices.IndexFunc(rs, func(e EngineResult) bool { return e.Engine == RawName })
	if i < 0 || rs[i].RecordsPerS <= 0 {
		return
	}
	raw := rs[i].RecordsPerS
	for j := range rs {
		rs[j].VsRaw = rs[j].RecordsPerS / raw
	}
}

// producersGrid lists rs's engines and producer counts in first-seen and
// ascending order, and indexes the results by both.
func producersGrid(rs []EngineResult) (engines []string, counts []int, at map[string]map[int]EngineResult) {
	at = map[string]map[int]EngineResult{}
	for _, e := range rs {
		if !slices.Contains(engines, e.Engine) {
			engines = append(engines, e.Engine)
			at[e.Engine] = map[int]EngineResult{}
		}
		if !slices.Contains(counts, e.Producers) {
			counts = append(counts, e.Producers)
		}
		at[e.Engine][e.Producers] = e
	}
	slices.Sort(counts)
	return engines, counts, at
}

// producersTable prints the producers suite's records/s and p99 by
// engine and producer count.
func (r *Run) producersTable(w io.Writer) {
	engines, counts, at := producersGrid(r.Producers)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s, producers:\t", ProducersCell)
	for _, n := range counts {
		fmt.Fprintf(tw, "%d\t", n)
	}
	fmt.Fprintln(tw)
	for _, e := range engines {
		fmt.Fprintf(tw, "%s\t", e)
		for _, n := range counts {
			if res, ok := at[e][n]; ok {
				fmt.Fprintf(tw, "%.0f rec/s (x%.2f), p99 %.0f us\t", res.RecordsPerS, res.VsRaw, res.P99Micros)
			} else {
				fmt.Fprint(tw, "\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// producersMarkdown writes the producers suite's section of the report.
func (r *Run) producersMarkdown(w io.Writer) {
	engines, counts, at := producersGrid(r.Producers)
	fmt.Fprintf(w, "## Commits of %s from concurrent producers: records/s (x raw, one producer), p50 / p99 (us)\n\n", ProducersCell)
	columns := make([]string, len(counts))
	for i, n := range counts {
		columns[i] = fmt.Sprint(n)
	}
	markdownHeader(w, "engine", columns)
	for _, e := range engines {
		fmt.Fprintf(w, "| %s |", e)
		for _, n := range counts {
			if res, ok := at[e][n]; ok {
				fmt.Fprintf(w, " %.0f (%.2f), %.0f / %.0f |", res.RecordsPerS, res.VsRaw, res.P50Micros, res.P99Micros)
			} else {
				fmt.Fprint(w, " |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// producersChart draws records/s against producers, one line an engine.
func (r *Run) producersChart() string {
	engines, counts, at := producersGrid(r.Producers)
	labels := make([]string, len(counts))
	for i, n := range counts {
		labels[i] = fmt.Sprint(n)
	}
	series := map[string][]float64{}
	for _, e := range engines {
		series[e] = nanSlice(len(counts))
		for i, n := range counts {
			if res, ok := at[e][n]; ok {
				series[e][i] = res.RecordsPerS
			}
		}
	}
	return lineChart(fmt.Sprintf("Records/s (log scale) against concurrent producers, %s", ProducersCell), "producers", labels, engines, series, true)
}
