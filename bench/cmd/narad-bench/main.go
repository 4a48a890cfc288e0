// Command narad-bench measures Narad storage side by side with the raw
// disk and with peer engines, in one run (package bench has the suites).
//
//	narad-bench [--suites engine,producers,read,open,partitions,http,cli] [--quick]
//	            [--out DIR] [--dir DIR] [--reps N] [--duration D]
//	            [--engines REGEXP] [--daemon BIN | --http-addr URL]
//
// It prints progress and a summary table, and writes results.json,
// report.md and SVG charts into --out. --quick runs every suite at tiny
// sizes (CI runs it to check that every engine reads back what it wrote,
// never speed). A wrong byte read back fails the run with exit status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/narad-io/storage/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "narad-bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("narad-bench", flag.ContinueOnError)
	suites := fs.String("suites", "engine,producers,read,open,partitions,http,cli", "suites to run, comma-separated: engine, producers, read, open, partitions, http, cli")
	quick := fs.Bool("quick", false, "every suite at tiny sizes: checks read-back, not speed")
	out := fs.String("out", "bench-results", "directory for results.json, report.md and the charts")
	dir := fs.String("dir", ".", "directory on the disk to measure; each engine gets a temporary directory in it")
	reps := fs.Int("reps", 2, "repetitions of each engine in each cell; the median is reported")
	duration := fs.Duration("duration", 3*time.Second, "commit time for each engine in each cell")
	maxBytes := fs.Int64("bytes", 512<<20, "commit at most this many bytes for each engine in each cell")
	readBytes := fs.Int64("read-bytes", 256<<20, "history the read suite writes and reads back")
	engines := fs.String("engines", "", "run only the engines whose name matches this regular expression (raw always runs)")
	cells := fs.String("cells", "", "run the engine suite only in the cells whose name (\"4 KiB x 256\") matches this regular expression")
	daemon := fs.String("daemon", "", "the http and cli suites' narad-storaged binary (default: built from this repository)")
	httpAddr := fs.String("http-addr", "", "run the http suite against this running narad-storaged instead of starting one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	sizes := fullSizes
	if *quick {
		*reps, *duration, *maxBytes, *readBytes = 1, 50*time.Millisecond, 1<<20, 4<<20
		sizes = quickSizes
	}
	if *reps < 1 || *duration <= 0 || *maxBytes <= 0 || *readBytes <= 0 {
		return errors.New("--reps, --duration, --bytes and --read-bytes must be positive")
	}
	for _, suite := range strings.Split(*suites, ",") {
		if !slices.Contains([]string{"engine", "producers", "read", "open", "partitions", "http", "cli"}, suite) {
			return fmt.Errorf("--suites: unknown suite %q", suite)
		}
	}
	only, err := regexp.Compile(*engines)
	if err != nil {
		return fmt.Errorf("--engines: %w", err)
	}
	inCells, err := regexp.Compile(*cells)
	if err != nil {
		return fmt.Errorf("--cells: %w", err)
	}
	base, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(base, "narad-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// Interrupted, the run still removes its data (a daemon it started
	// gets SIGTERM as the harness exits).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		os.RemoveAll(work)
		fmt.Fprintln(os.Stderr, "narad-bench:", sig)
		os.Exit(1)
	}()

	r := &bench.Run{Command: strings.TrimSpace("narad-bench " + strings.Join(args, " ")), Date: time.Now(), Machine: bench.DescribeMachine(work)}
	fmt.Printf("narad-bench: %s\n", r.Machine)
	if err := runSuites(r, work, strings.Split(*suites, ","), only, inCells, *reps, bench.Budget{Duration: *duration, Bytes: *maxBytes},
		*readBytes, sizes, *daemon, *httpAddr); err != nil {
		// What the suites before the failure measured is still written.
		if werr := r.WriteFiles(*out); werr != nil {
			fmt.Fprintln(os.Stderr, "narad-bench: write results:", werr)
		}
		return err
	}
	fmt.Println()
	r.Table(os.Stdout)
	if err := r.WriteFiles(*out); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s\n", filepath.Join(*out, "report.md"))
	return nil
}

// runSuites runs the suites named, in order, into r.
func runSuites(r *bench.Run, work string, suites []string, only, inCells *regexp.Regexp, reps int, budget bench.Budget,
	readBytes int64, sizes suiteSizes, daemon, httpAddr string) error {
	// The daemon the partitions, http and cli suites run: --daemon, or
	// built from this repository once, when the first of them needs it.
	daemonBin := func() (string, error) {
		if daemon == "" {
			built, err := bench.BuildDaemon(work)
			if err != nil {
				return "", err
			}
			daemon = built
		}
		return daemon, nil
	}
	for _, suite := range suites {
		switch suite {
		case "engine":
			if err := engineSuite(r, work, only, inCells, reps, budget); err != nil {
				return err
			}
		case "producers":
			if err := producersSuite(r, work, only, reps, budget, sizes.producerCounts); err != nil {
				return err
			}
		case "read":
			if err := readSuite(r, work, readBytes, sizes.readRounds); err != nil {
				return err
			}
		case "open":
			if err := openSuite(r, work, sizes); err != nil {
				return err
			}
		case "partitions":
			if err := partitionsSuite(r, work, sizes, daemonBin); err != nil {
				return err
			}
		case "http":
			if err := httpSuite(r, work, sizes, daemonBin, httpAddr); err != nil {
				return err
			}
		case "cli":
			if err := cliSuite(r, work, sizes, reps, daemonBin); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown suite %q", suite)
		}
	}
	return nil
}

func engineSuite(r *bench.Run, work string, only, inCells *regexp.Regexp, reps int, budget bench.Budget) error {
	var specs []bench.EngineSpec
	for _, s := range bench.Engines() {
		if s.Name == bench.RawName || only.MatchString(s.Name) {
			specs = append(specs, s)
		}
	}
	var cells []bench.Cell
	for _, c := range bench.Matrix {
		if inCells.MatchString(c.String()) {
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return fmt.Errorf("--cells %q matches none of the engine suite's cells (%s)", inCells, bench.Matrix)
	}
	var results []bench.EngineResult
	for _, c := range cells {
		fmt.Printf("engine suite: %s\n", c)
		medians, err := runInterleaved(work, specs, c, reps, budget)
		if err != nil {
			return err
		}
		results = append(results, medians...)
	}
	bench.Ratios(results)
	r.Engine = results
	return nil
}

// runInterleaved runs each engine in cell c reps times and returns each
// one's median run. Engines are interleaved, so drift hits them alike,
// every other repetition in reverse, so no engine always runs right
// after the same one.
func runInterleaved(work string, specs []bench.EngineSpec, c bench.Cell, reps int, budget bench.Budget) ([]bench.EngineResult, error) {
	runs := make([][]bench.EngineResult, len(specs))
	for rep := range reps {
		for k := range specs {
			i := k
			if rep%2 == 1 {
				i = len(specs) - 1 - k
			}
			res, err := bench.RunCell(work, specs[i], c, budget)
			if err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], res)
		}
	}
	medians := make([]bench.EngineResult, len(specs))
	for i := range specs {
		medians[i] = bench.Median(runs[i])
		bench.PrintEngineRow(os.Stdout, medians[i])
	}
	return medians, nil
}

// producersSuite commits bench.ProducersCell from each count of
// producers through the engines that take concurrent commits.
func producersSuite(r *bench.Run, work string, only *regexp.Regexp, reps int, budget bench.Budget, counts []int) error {
	for _, n := range counts {
		fmt.Printf("producers suite: %d producers, %s\n", n, bench.ProducersCell)
		var specs []bench.EngineSpec
		if n == 1 { // raw, the baseline, with one producer only
			for _, s := range bench.Engines() {
				if s.Name == bench.RawName {
					specs = append(specs, s)
				}
			}
		}
		for _, s := range bench.ConcurrentEngines() {
			if only.MatchString(s.Name) {
				s.Producers = n
				specs = append(specs, s)
			}
		}
		medians, err := runInterleaved(work, specs, bench.ProducersCell, reps, budget)
		if err != nil {
			return err
		}
		r.Producers = append(r.Producers, medians...)
	}
	bench.ProducersVsRaw(r.Producers)
	return nil
}

func readSuite(r *bench.Run, work string, bytes int64, rounds int) error {
	for _, c := range []bench.Cell{{RecordBytes: 256, Batch: 1}, {RecordBytes: 256, Batch: 256}, {RecordBytes: 4096, Batch: 4096}} {
		fmt.Printf("read suite: %s\n", c)
		// Batch 1 writes one frame a record: its history is kept small
		// enough to write in reasonable time.
		b := bytes
		if c.Batch == 1 {
			b = min(bytes, 16<<20)
		}
		res, err := bench.RunRead(work, c, b, rounds)
		if err != nil {
			return err
		}
		for _, x := range res {
			fmt.Printf("  %-16s %-12s %12.0f rec/s %8.1f MB/s\n", x.Workload, x.Engine, x.RecordsPerS, x.MBPerS)
		}
		r.Read = append(r.Read, res...)
	}
	return nil
}

// suiteSizes are the shapes of the read suite's catch-ups and of the
// producers, open, partitions and http suites.
type suiteSizes struct {
	readRounds     int   // catch-up rounds of the read suite (bench.RunRead)
	producerCounts []int // the producers suite's counts of producers
	openShapes     []bench.OpenShape
	openReps       int
	partitions     []int
	idle           time.Duration
	// partitionProducers of the partitions suite's partitions produce at
	// once, for produceFor.
	partitionProducers int
	produceFor         time.Duration
	// many is the partitions suite's daemon cell (bench.RunManyPartitions).
	many manyShape
	http []bench.HTTPLoad
	cli  bench.CLIProduceShape
}

// manyShape is a bench.RunManyPartitions: partitions of one topic inside
// the daemon's open-log budget and past it, clients at once, the daemon
// run with Flags (a budget of its own, for the quick sizes).
type manyShape struct {
	Inside, Past, Clients int
	Flags                 []string
}

var fullSizes = suiteSizes{
	readRounds:     5,
	producerCounts: []int{1, 4, 16, 64},
	// History at one active size, and active sizes with no history: an
	// open costs O(active segment), whatever the history.
	openShapes: []bench.OpenShape{{}, {Active: 8 << 20}, {Active: 32 << 20}, {Active: 56 << 20},
		{History: 1 << 30, Active: 32 << 20}, {History: 4 << 30, Active: 32 << 20}},
	openReps:   5,
	partitions: []int{1000, 10000}, idle: 30 * time.Second, partitionProducers: 64, produceFor: 10 * time.Second,
	many: manyShape{Inside: 2000, Past: 100000, Clients: 32},
	http: []bench.HTTPLoad{
		{Producers: 8, Partitions: 8, Batch: 1, RecordBytes: 256, Duration: 10 * time.Second},
		{Producers: 8, Partitions: 16, Batch: 256, RecordBytes: 256, Duration: 10 * time.Second, TopicRecords: 1_000_000},
	},
	cli: bench.CLIProduceShape{Lines: 1_000_000, LineBytes: 100, Partitions: 16, Reps: 3},
}

var quickSizes = suiteSizes{
	readRounds:     1,
	producerCounts: []int{1, 4},
	openShapes:     []bench.OpenShape{{}, {Active: 4 << 20}, {History: 64 << 20, Active: 4 << 20}}, openReps: 3,
	partitions: []int{200}, idle: time.Second, partitionProducers: 8, produceFor: 500 * time.Millisecond,
	many: manyShape{Inside: 50, Past: 400, Clients: 8, Flags: []string{"--max-open-logs", "100"}},
	http: []bench.HTTPLoad{{Producers: 2, Partitions: 4, Batch: 16, RecordBytes: 256, Duration: 500 * time.Millisecond, TopicRecords: 50_000}},
	cli:  bench.CLIProduceShape{Lines: 20_000, LineBytes: 100, Partitions: 4, Reps: 1},
}

func openSuite(r *bench.Run, work string, sizes suiteSizes) error {
	for _, shape := range sizes.openShapes {
		fmt.Printf("open suite: %d MiB of sealed history, %d MiB active\n", shape.History>>20, shape.Active>>20)
		res, err := bench.RunOpen(work, shape, sizes.openReps)
		if err != nil {
			return err
		}
		fmt.Printf("  clean open %8.0f us, crash open %8.0f us, %d segments\n", res.CleanMicros, res.CrashMicros, res.Segments)
		r.Open = append(r.Open, res)
	}
	bench.OpenVsNoHistory(r.Open)
	return nil
}

func partitionsSuite(r *bench.Run, work string, sizes suiteSizes, daemonBin func() (string, error)) error {
	for _, n := range sizes.partitions {
		fmt.Printf("partitions suite: %d partitions\n", n)
		res, err := bench.RunPartitions(work, n, sizes.idle, min(sizes.partitionProducers, n), sizes.produceFor)
		if err != nil {
			return err
		}
		fmt.Printf("  idle CPU %.2f%%, %.0f B RSS and %.2f descriptors a partition, %d producers: %.0f commits/s\n",
			res.IdleCPUPercent, res.RSSPerPartition, res.FDsPerPartition, res.Producers, res.CommitsPerSec)
		r.Partitions = append(r.Partitions, res)
	}
	m := sizes.many
	bin, err := daemonBin()
	if err != nil {
		return err
	}
	fmt.Printf("partitions suite: narad-storaged, %d clients, %d partitions inside its open-log budget, %d past it\n", m.Clients, m.Inside, m.Past)
	many, err := bench.RunManyPartitions(bin, work, m.Inside, m.Past, m.Clients, m.Flags...)
	if err != nil {
		return err
	}
	fmt.Printf("  budget %d: produce %.2fx, read %.2fx of inside; ready %.2f s after a clean stop, %.2f s after a crash; %.0f B a closed partition, %.0f B an open one\n",
		many.Budget, many.Ratios.Produce, many.Ratios.Read, many.Startup.ReadyCleanSecs, many.Startup.ReadyCrashSecs,
		many.Memory.PerClosedPartition, many.Memory.PerOpenPartition)
	r.ManyPartitions = append(r.ManyPartitions, many)
	return nil
}

func httpSuite(r *bench.Run, work string, sizes suiteSizes, daemonBin func() (string, error), addr string) error {
	if addr == "" {
		bin, err := daemonBin()
		if err != nil {
			return err
		}
		dataDir := filepath.Join(work, "http-data")
		d, err := bench.StartDaemon(bin, dataDir)
		if err != nil {
			return err
		}
		defer d.Stop()
		addr = d.Addr
	}
	for i, load := range sizes.http {
		load.EngineDir = filepath.Join(work, "http-engine") // the topic workloads' runtime.Node, on the daemon's disk when it is ours
		fmt.Printf("http suite: %d producers x %d partitions x batch %d\n", load.Producers, load.Partitions, load.Batch)
		res, err := bench.RunHTTP(addr, fmt.Sprintf("narad-bench-%d-%d", time.Now().UnixNano(), i), load)
		if err != nil {
			return err
		}
		for _, h := range res {
			if h.VsEngine > 0 {
				fmt.Printf("  %-30s %10.0f rec/s  %.2fx runtime.Node.Produce\n", h.Workload, h.RecordsPerS, h.VsEngine)
				continue
			}
			fmt.Printf("  %-30s %10.0f rec/s  p50 %7.2f ms  p99 %7.2f ms\n", h.Workload, h.RecordsPerS, h.P50Ms, h.P99Ms)
		}
		r.HTTP = append(r.HTTP, res...)
	}
	return nil
}

// cliSuite runs the produce command beside runtime.Node.Produce
// (bench.RunCLIProduce).
func cliSuite(r *bench.Run, work string, sizes suiteSizes, reps int, daemonBin func() (string, error)) error {
	bin, err := daemonBin()
	if err != nil {
		return err
	}
	shape := sizes.cli
	shape.Reps = max(shape.Reps, reps) // --reps, when more
	fmt.Printf("cli suite: produce and consume of %d lines of %d bytes to %d partitions, beside runtime.Node.Produce and ReadFunc\n", shape.Lines, shape.LineBytes, shape.Partitions)
	res, err := bench.RunCLIProduce(bin, work, shape)
	if err != nil {
		return err
	}
	fmt.Printf("  produce command %10.0f rec/s  runtime.Node.Produce %10.0f rec/s  ratio %.2f (rounds %.2f)\n", res.CLIRecordsPerS, res.NodeRecordsPerS, res.Ratio, res.Ratios)
	fmt.Printf("  consume command %10.0f rec/s  runtime.Node.ReadFunc %9.0f rec/s  ratio %.2f (rounds %.2f)\n", res.CLIConsumeRecordsPerS, res.NodeReadRecordsPerS, res.ConsumeRatio, res.ConsumeRatios)
	r.CLIProduce = append(r.CLIProduce, res)
	return nil
}
