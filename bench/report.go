package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Run is everything one invocation measured, with what it ran on.
type Run struct {
	Command    string             `json:"command"`
	Date       time.Time          `json:"date"`
	Machine    Machine            `json:"machine"`
	Engine     []EngineResult     `json:"engine,omitempty"`
	Producers  []EngineResult     `json:"producers,omitempty"` // the producers suite
	Read       []ReadResult       `json:"read,omitempty"`
	Open       []OpenResult       `json:"open,omitempty"`
	Partitions []PartitionsResult `json:"partitions,omitempty"`
	// ManyPartitions is the partitions suite's daemon cell: a topic
	// inside the open-log budget and one far past it (RunManyPartitions).
	ManyPartitions []ManyPartitionsResult `json:"many_partitions,omitempty"`
	HTTP           []HTTPResult           `json:"http,omitempty"`
	CLIProduce     []CLIProduceResult     `json:"cli_produce,omitempty"` // the cli suite
}

// WriteFiles writes results.json, report.md and the charts into dir.
func (r *Run) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	r.Markdown(&md)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	for name, svg := range r.Charts() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PrintEngineRow prints one engine result as a progress line.
func PrintEngineRow(w io.Writer, r EngineResult) {
	fmt.Fprintf(w, "  %-24s %-12s %12.0f rec/s %8.1f MB/s  p50 %7.0f us  p99 %7.0f us  read %8.1f MB/s\n",
		r.Engine, Cell{r.RecordBytes, r.Batch}, r.RecordsPerS, r.MBPerS, r.P50Micros, r.P99Micros, r.ReadMBPerS)
}

// Table prints the summary a terminal shows at the end: per cell, each
// engine's records/s and ratios.
func (r *Run) Table(w io.Writer) {
	if len(r.Engine) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "cell\tengine\trecords/s\tx raw\tx best peer\tp99 us\tread MB/s\tx plain read\t")
		for _, e := range r.Engine {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.1f\t%.2f\t\n", Cell{e.RecordBytes, e.Batch}, e.Engine,
				e.RecordsPerS, e.VsRaw, e.VsBestPeer, e.P99Micros, e.ReadMBPerS, e.ReadVsPlain)
		}
		tw.Flush()
	}
	if len(r.Producers) > 0 {
		fmt.Fprintln(w)
		r.producersTable(w)
	}
	r.tablesOfOtherSuites(w)
	if len(r.Read) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "cell\tworkload\tengine\trecords/s\tMB/s\tx plain read\t")
		for _, e := range r.Read {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.1f\t%s\t\n", Cell{e.RecordBytes, e.Batch}, e.Workload, e.Engine, e.RecordsPerS, e.MBPerS, ratioText(e.VsPlain))
		}
		tw.Flush()
	}
}

// Markdown writes the report: the run's command and machine, then one
// table of ratios and one of absolute figures per suite.
func (r *Run) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# narad-bench, %s\n\n", r.Date.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Command: `%s`\n\nMachine: %s\n\n", r.Command, r.Machine)
	if len(r.Engine) > 0 {
		engines, cells := enginesAndCells(r.Engine)
		at := map[string]map[Cell]EngineResult{}
		for _, e := range r.Engine {
			if at[e.Engine] == nil {
				at[e.Engine] = map[Cell]EngineResult{}
			}
			at[e.Engine][Cell{e.RecordBytes, e.Batch}] = e
		}
		table := func(title string, cellText func(EngineResult) string) {
			fmt.Fprintf(w, "## %s\n\n", title)
			markdownHeader(w, "record x batch", engines)
			for _, c := range cells {
				fmt.Fprintf(w, "| %s |", c)
				for _, e := range engines {
					if res, ok := at[e][c]; ok {
						fmt.Fprintf(w, " %s |", cellText(res))
					} else {
						fmt.Fprint(w, " |")
					}
				}
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w)
		}
		table("Commits: records/s as a ratio to raw (append + fdatasync) in the same cell", func(e EngineResult) string {
			return fmt.Sprintf("%.2f", e.VsRaw)
		})
		table("Commits: records/s", func(e EngineResult) string { return fmt.Sprintf("%.0f", e.RecordsPerS) })
		table("Commit latency, p50 / p99 (us)", func(e EngineResult) string {
			return fmt.Sprintf("%.0f / %.0f", e.P50Micros, e.P99Micros)
		})
		table("Read back (warm page cache): MB/s, and ratio to a plain read of raw's file", func(e EngineResult) string {
			return fmt.Sprintf("%.0f (%.2f)", e.ReadMBPerS, e.ReadVsPlain)
		})
	}
	if len(r.Producers) > 0 {
		r.producersMarkdown(w)
	}
	r.markdownOfOtherSuites(w)
	if len(r.Read) > 0 {
		fmt.Fprint(w, "## Reads\n\n| record x batch | workload | engine | records/s | MB/s | x plain read |\n|---|---|---|---|---|---|\n")
		for _, e := range r.Read {
			fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.1f | %s |\n", Cell{e.RecordBytes, e.Batch}, e.Workload, e.Engine, e.RecordsPerS, e.MBPerS, ratioText(e.VsPlain))
		}
		fmt.Fprintln(w)
	}
}

// markdownHeader writes a table's header row, first then columns, and
// its separator.
func markdownHeader(w io.Writer, first string, columns []string) {
	fmt.Fprintf(w, "| %s |", first)
	for _, c := range columns {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprint(w, "\n|---|")
	for range columns {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
}

// enginesAndCells lists the engines and cells of rs in first-seen order.
func enginesAndCells(rs []EngineResult) (engines []string, cells []Cell) {
	for _, e := range rs {
		if !slices.Contains(engines, e.Engine) {
			engines = append(engines, e.Engine)
		}
		if c := (Cell{e.RecordBytes, e.Batch}); !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
	}
	return engines, cells
}

// tablesOfOtherSuites prints the open, partitions and http tables.
func (r *Run) tablesOfOtherSuites(w io.Writer) {
	if len(r.Open) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "sealed history\tactive\tsegments\tclean open us\tx no history\tcrash open us\tallocated\t")
		for _, o := range r.Open {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.0f\t%s\t\n", bytesText(o.HistoryBytes), bytesText(o.ActiveBytes), o.Segments,
				o.CleanMicros, o.VsNoHistory, o.CrashMicros, bytesText(int64(o.CleanAllocBytes)))
		}
		tw.Flush()
	}
	if len(r.Partitions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "partitions\topen logs\topen s\tidle CPU %\tRSS/partition\tfds/partition\tproducers\tcommits/s\t")
		for _, p := range r.Partitions {
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.2f\t%s\t%.2f\t%d\t%.0f\t\n", p.Partitions, p.OpenLogs, p.OpenSecs, p.IdleCPUPercent,
				bytesText(int64(p.RSSPerPartition)), p.FDsPerPartition, p.Producers, p.CommitsPerSec)
		}
		tw.Flush()
	}
	for _, m := range r.ManyPartitions {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "narad-storaged, one topic	partitions	produces/s	p99 ms	reads/s	p99 ms	")
		for _, o := range []struct {
			name string
			c    OnePerPartition
		}{{fmt.Sprintf("inside a budget of %d", m.Budget), m.Inside}, {"past it", m.Past}} {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.0f\t%.1f\t\n", o.name, o.c.Partitions, o.c.ProducesPerS, o.c.ProduceP99Ms, o.c.ReadsPerS, o.c.ReadP99Ms)
		}
		tw.Flush()
		fmt.Fprintln(w, m.summary())
	}
	if len(r.HTTP) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tproducers x partitions x batch\trecords/s\tMB/s\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\t")
		for _, h := range r.HTTP {
			fmt.Fprintf(tw, "%s\t%d x %d x %d\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", h.label(), h.Producers, h.Partitions, h.Batch,
				h.RecordsPerS, h.MBPerS, h.P50Ms, h.P99Ms, h.P999Ms, h.MaxMs)
		}
		tw.Flush()
		r.tailOfProduces(w)
	}
}

// markdownOfOtherSuites writes the open, partitions and http sections.
func (r *Run) markdownOfOtherSuites(w io.Writer) {
	if len(r.Open) > 0 {
		fmt.Fprint(w, "## Open (page cache warm)\n\n| sealed history | active segment | segments | clean open (us) | x no history | crash open (us) | allocated |\n|---|---|---|---|---|---|---|\n")
		for _, o := range r.Open {
			fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.2f | %.0f | %s |\n", bytesText(o.HistoryBytes), bytesText(o.ActiveBytes), o.Segments,
				o.CleanMicros, o.VsNoHistory, o.CrashMicros, bytesText(int64(o.CleanAllocBytes)))
		}
		fmt.Fprintln(w)
	}
	if len(r.Partitions) > 0 {
		fmt.Fprint(w, "## Partitions on one node\n\n| partitions | open logs | open (s) | idle CPU (% of a core) | RSS a partition | descriptors a partition | producers at once | commits/s |\n|---|---|---|---|---|---|---|---|\n")
		for _, p := range r.Partitions {
			fmt.Fprintf(w, "| %d | %d | %.1f | %.2f | %s | %.2f | %d | %.0f |\n", p.Partitions, p.OpenLogs, p.OpenSecs, p.IdleCPUPercent,
				bytesText(int64(p.RSSPerPartition)), p.FDsPerPartition, p.Producers, p.CommitsPerSec)
		}
		fmt.Fprintln(w)
	}
	for _, m := range r.ManyPartitions {
		fmt.Fprintf(w, "## Partitions past the open-log budget (narad-storaged, one topic, %d clients)\n\n| | partitions | produces/s | produce p99 ms | reads/s | read p99 ms |\n|---|---|---|---|---|---|\n", m.Inside.Clients)
		fmt.Fprintf(w, "| inside a budget of %d | %d | %.0f | %.1f | %.0f | %.1f |\n", m.Budget, m.Inside.Partitions, m.Inside.ProducesPerS, m.Inside.ProduceP99Ms, m.Inside.ReadsPerS, m.Inside.ReadP99Ms)
		fmt.Fprintf(w, "| past it | %d | %.0f | %.1f | %.0f | %.1f |\n\n%s\n\n", m.Past.Partitions, m.Past.ProducesPerS, m.Past.ProduceP99Ms, m.Past.ReadsPerS, m.Past.ReadP99Ms, m.summary())
	}
	if len(r.HTTP) > 0 {
		fmt.Fprint(w, "## Over HTTP (narad-storaged, the Go client, loopback)\n\n| workload | producers x partitions x batch | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|---|\n")
		for _, h := range r.HTTP {
			fmt.Fprintf(w, "| %s | %d x %d x %d | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", h.label(), h.Producers, h.Partitions, h.Batch,
				h.RecordsPerS, h.MBPerS, h.P50Ms, h.P99Ms, h.P999Ms, h.MaxMs)
		}
		fmt.Fprint(w, "\n| produce workload | producers x partitions x batch | client p99 ms | sends late p99 ms | node request p99 ms | commit p99 ms | fsync p99 ms |\n|---|---|---|---|---|---|---|\n")
		for _, h := range r.HTTP {
			if h.Server != nil {
				fmt.Fprintf(w, "| %s | %d x %d x %d | %.2f | %s | %.2f | %.2f | %.2f |\n", h.Workload, h.Producers, h.Partitions, h.Batch,
					h.P99Ms, h.sendsLate(), h.Server.RequestMs, h.Server.CommitMs, h.Server.FsyncMs)
			}
		}
		fmt.Fprint(w, "\nOpen-loop latency is measured from each batch's scheduled send time (corrected for coordinated omission), each batch sent at its time whether or not the producer's earlier ones were answered; the node's p99s are its own histograms' over the workload (its produce requests' time to answer, its commits, its fdatasyncs), and sends late is how long after its scheduled time the generator began a send; produce to fetch, from the send to the record reaching a long-polling fetch. The topic workloads (no latency figures) move the same records: runtime.Node.Produce in the harness's process, in the batches the Producer's defaults make, a goroutine a partition; a client.Producer, one Produce a record; a client.Consumer reading the topic; a client.QueueConsumer leasing and acking it; each beside the Node's records/s in the same run.\n\n")
	}
	r.markdownOfCLIProduce(w)
}

// bytesText renders a byte count in binary units.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ratioText renders a ratio, or "-" where there is nothing to compare with.
func ratioText(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// tailOfProduces writes, for each produce workload of the http suite,
// its p99 as the client saw it beside the daemon's own (ServerP99) and,
// open, how late the generator began its sends: where the tail was spent.
func (r *Run) tailOfProduces(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nproduce workload\tproducers x partitions x batch\tclient p99 ms\tsends late p99 ms\tnode request p99 ms\tcommit p99 ms\tfsync p99 ms\t")
	for _, h := range r.HTTP {
		if h.Server == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d x %d x %d\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t\n", h.Workload, h.Producers, h.Partitions, h.Batch,
			h.P99Ms, h.sendsLate(), h.Server.RequestMs, h.Server.CommitMs, h.Server.FsyncMs)
	}
	tw.Flush()
}

// sendsLate is an open loop's p99 of sends begun late, "-" for a closed
// loop, which has no schedule.
func (h HTTPResult) sendsLate() string {
	if h.TargetRate == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", h.SendLateP99Ms)
}
