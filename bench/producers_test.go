package bench

import (
	"strings"
	"testing"
)

// TestConcurrentEngines_ReadBackWhatFourProducersWrote: every engine of
// the producers suite takes concurrent commits and gives back exactly
// the records they made durable, none lost or doubled.
func TestConcurrentEngines_ReadBackWhatFourProducersWrote(t *testing.T) {
	for _, spec := range ConcurrentEngines() {
		spec.Producers = 4
		r, err := RunCell(t.TempDir(), spec, ProducersCell, tiny)
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		if r.Producers != 4 || r.Records == 0 || r.Records != r.Commits || r.ReadMBPerS <= 0 {
			t.Fatalf("%s: %+v", spec.Name, r)
		}
	}
}

// TestProducersReport: the producers suite's results, quoted against
// raw's with one producer, become a table by engine and count of
// producers, in the terminal and the report, and a chart of records/s
// against producers with a line an engine.
func TestProducersReport(t *testing.T) {
	r := &Run{Producers: []EngineResult{
		{Engine: RawName, Producers: 1, RecordsPerS: 500, P50Micros: 700, P99Micros: 1000},
		{Engine: "narad Node", Producers: 4, RecordsPerS: 4000, P50Micros: 900, P99Micros: 2000},
		{Engine: "pebble Sync", Producers: 4, RecordsPerS: 3000, P50Micros: 1200, P99Micros: 2500},
		{Engine: "narad Node", Producers: 1, RecordsPerS: 1000, P50Micros: 800, P99Micros: 1500},
	}}
	ProducersVsRaw(r.Producers)
	var md strings.Builder
	r.Markdown(&md)
	for _, want := range []string{
		"## Commits of 256 B x 1 from concurrent producers: records/s (x raw, one producer), p50 / p99 (us)",
		"| engine | 1 | 4 |",
		"| raw | 500 (1.00), 700 / 1000 | |",
		"| narad Node | 1000 (2.00), 800 / 1500 | 4000 (8.00), 900 / 2000 |",
		"| pebble Sync | | 3000 (6.00), 1200 / 2500 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("the report lacks %q:\n%s", want, md.String())
		}
	}
	var table strings.Builder
	r.Table(&table)
	if !strings.Contains(table.String(), "4000 rec/s (x8.00), p99 2000 us") {
		t.Fatalf("the terminal table:\n%s", table.String())
	}
	chart, ok := r.Charts()["throughput-vs-producers.svg"]
	if !ok || !strings.Contains(chart, "narad Node") || !strings.Contains(chart, "pebble Sync") || !strings.Contains(chart, ">producers<") {
		t.Fatalf("the chart: %v\n%s", ok, chart)
	}
}
