package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// CLIProduceShape is the cli suite's workload: Lines lines of LineBytes
// bytes (newline excluded) to a topic of Partitions partitions, Reps
// rounds.
type CLIProduceShape struct {
	Lines, LineBytes, Partitions, Reps int
}

// CLIProduceResult is the produce command (a process reading the lines
// from a file on stdin, sending them through client.Producer to a
// narad-storaged on loopback) beside runtime.Node.Produce committing the
// same records in the same batches, a goroutine a partition, on the same
// disk, in rounds each first in turn; then the consume command printing
// them all (from earliest, every partition, its default text lines)
// beside runtime.Node.ReadFunc reading them, a goroutine a partition,
// each side right after its own produce (the page cache holds both).
type CLIProduceResult struct {
	Lines      int `json:"lines"`
	LineBytes  int `json:"line_bytes"`
	Partitions int `json:"partitions"`
	Batch      int `json:"batch"` // records a request and a Node.Produce
	// Records a second, the median round of each.
	CLIRecordsPerS  float64 `json:"cli_records_per_s"`
	NodeRecordsPerS float64 `json:"node_records_per_s"`
	// Ratio is the median of the rounds' CLI records/s over Node's;
	// Ratios each round's.
	Ratio  float64   `json:"ratio"`
	Ratios []float64 `json:"ratios"`
	// The consume command's records a second and Node.ReadFunc's, the
	// median round of each, and their ratios as above.
	CLIConsumeRecordsPerS float64   `json:"cli_consume_records_per_s"`
	NodeReadRecordsPerS   float64   `json:"node_read_records_per_s"`
	ConsumeRatio          float64   `json:"consume_ratio"`
	ConsumeRatios         []float64 `json:"consume_ratios"`
}

// cliBatch is the produce command's --batch-size default: its batches,
// which the Node side commits alike.
const cliBatch = 10000

// RunCLIProduce measures the produce command bin against runtime.Node
// in work (the disk measured). Every round checks that each side's
// partitions hold every line.
func RunCLIProduce(bin, work string, shape CLIProduceShape) (CLIProduceResult, error) {
	res := CLIProduceResult{Lines: shape.Lines, LineBytes: shape.LineBytes, Partitions: shape.Partitions, Batch: cliBatch}
	lines := make([][]byte, shape.Lines)
	for i := range lines {
		line := fmt.Appendf(nil, "%09d ", i)
		for len(line) < shape.LineBytes {
			line = append(line, byte('a'+i%26))
		}
		lines[i] = line[:shape.LineBytes]
	}
	input := filepath.Join(work, "cli-produce-lines")
	if err := writeLines(input, lines); err != nil {
		return res, err
	}
	defer os.Remove(input)
	var cli, node, ratios, cliRead, nodeRead, readRatios []float64
	for rep := range shape.Reps {
		var c, n, cr, nr float64
		var err error
		for i := range 2 {
			dir := filepath.Join(work, fmt.Sprintf("cli-produce-%d-%d", rep, i))
			if (rep+i)%2 == 0 {
				c, cr, err = produceWithCLI(bin, dir, input, shape)
			} else {
				n, nr, err = produceWithNode(dir, lines, shape)
			}
			os.RemoveAll(dir)
			unix.Sync() // the removal is not the next side's to pay
			if err != nil {
				return res, err
			}
		}
		cli, node, ratios = append(cli, c), append(node, n), append(ratios, c/n)
		cliRead, nodeRead, readRatios = append(cliRead, cr), append(nodeRead, nr), append(readRatios, cr/nr)
	}
	res.CLIRecordsPerS, res.NodeRecordsPerS, res.Ratio, res.Ratios = median(cli), median(node), median(ratios), ratios
	res.CLIConsumeRecordsPerS, res.NodeReadRecordsPerS, res.ConsumeRatio, res.ConsumeRatios = median(cliRead), median(nodeRead), median(readRatios), readRatios
	return res, nil
}

func writeLines(path string, lines [][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, l := range lines {
		w.Write(l)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// produceWithCLI starts a daemon on dir, makes the topic and times the
// produce command over input (process start to exit), then the consume
// command printing every record; records/s of each.
func produceWithCLI(bin, dir, input string, shape CLIProduceShape) (produced, consumed float64, err error) {
	d, err := StartDaemon(bin, dir)
	if err != nil {
		return 0, 0, err
	}
	defer d.Stop()
	c, err := client.New(d.Addr, client.Options{})
	if err != nil {
		return 0, 0, err
	}
	ctx := context.Background()
	if _, _, err := c.CreateTopic(ctx, "lines", shape.Partitions, client.Retention{}); err != nil {
		return 0, 0, err
	}
	in, err := os.Open(input)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	cmd := exec.Command(bin, "produce", "--addr", d.Addr, "--topic", "lines", "--batch-size", strconv.Itoa(cliBatch))
	cmd.Stdin = in
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("produce: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if want := fmt.Sprintf("produced %d records to lines", shape.Lines); !strings.HasPrefix(stdout.String(), want) {
		return 0, 0, fmt.Errorf("produce said %q; want %s", stdout.String(), want)
	}
	t, err := c.Topic(ctx, "lines")
	if err != nil {
		return 0, 0, err
	}
	total := int64(0)
	for _, p := range t.Partitions {
		total += p.HighWatermark
	}
	if total != int64(shape.Lines) {
		return 0, 0, fmt.Errorf("the daemon's partitions hold %d records after the produce command sent %d", total, shape.Lines)
	}
	consumed, err = consumeWithCLI(bin, d.Addr, shape.Lines)
	return float64(shape.Lines) / elapsed.Seconds(), consumed, err
}

// consumeWithCLI times the consume command printing the topic from
// earliest (process start to exit), its lines counted as they come;
// records/s.
func consumeWithCLI(bin, addr string, lines int) (float64, error) {
	cmd := exec.Command(bin, "consume", "--addr", addr, "--topic", "lines", "--from", "earliest")
	var out lineCounter
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("consume: %v\n%s", err, stderr.String())
	}
	if out.lines != lines {
		return 0, fmt.Errorf("consume printed %d lines of %d records", out.lines, lines)
	}
	return float64(lines) / elapsed.Seconds(), nil
}

// lineCounter counts the newlines written to it.
type lineCounter struct{ lines int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// produceWithNode commits the lines through runtime.Node.Produce on dir
// in the command's batches (cliBatch lines, the batches dealt to the
// partitions in turn as the command's sticky placement does), a
// goroutine a partition, then reads them all back through ReadFunc;
// records/s of each, from the first call to the last answer.
func produceWithNode(dir string, lines [][]byte, shape CLIProduceShape) (produced, read float64, err error) {
	n, err := runtime.New(runtime.Config{DataDir: dir, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer n.Close()
	if _, _, err := n.CreateTopic(bg, "lines", shape.Partitions, runtime.Retention{}); err != nil {
		return 0, 0, err
	}
	batches := make([][][]partition.Record, shape.Partitions)
	for k := 0; k*cliBatch < len(lines); k++ {
		part := lines[k*cliBatch : min((k+1)*cliBatch, len(lines))]
		recs := make([]partition.Record, len(part))
		for i, v := range part {
			recs[i].Value = v
		}
		batches[k%shape.Partitions] = append(batches[k%shape.Partitions], recs)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, shape.Partitions)
	for p := range shape.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches[p] {
				if _, err := n.Produce(bg, "lines", p, b); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := int64(0)
	for p := range shape.Partitions {
		if errs[p] != nil {
			return 0, 0, errs[p]
		}
		hwm, err := n.HighWatermark(bg, "lines", p)
		if err != nil {
			return 0, 0, err
		}
		total += hwm
	}
	if total != int64(shape.Lines) {
		return 0, 0, fmt.Errorf("the node's partitions hold %d records after %d were produced", total, shape.Lines)
	}
	read, err = readWithNode(n, shape)
	return float64(shape.Lines) / elapsed.Seconds(), read, err
}

// readWithNode reads every partition of the topic through
// Node.ReadFunc, from offset 0 to its high watermark in reads of the
// consume command's fetch size (the API's default records and bytes), a
// goroutine a partition; records/s.
func readWithNode(n *runtime.Node, shape CLIProduceShape) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	counts, errs := make([]int, shape.Partitions), make([]error, shape.Partitions)
	for p := range shape.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offset := int64(0); ; {
				sum, err := n.ReadFunc(bg, "lines", p, offset, api.DefaultFetchRecords, api.DefaultFetchBytes, func(r partition.ReadRecord) error {
					counts[p]++
					return nil
				})
				if err == nil && sum.Next <= offset && offset < sum.HighWatermark {
					err = fmt.Errorf("partition %d: a read at %d below the high watermark %d gave nothing", p, offset, sum.HighWatermark)
				}
				if err != nil {
					errs[p] = err
					return
				}
				if offset = sum.Next; offset >= sum.HighWatermark {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := 0
	for p := range shape.Partitions {
		if errs[p] != nil {
			return 0, errs[p]
		}
		total += counts[p]
	}
	if total != shape.Lines {
		return 0, fmt.Errorf("the node's reads gave %d records of %d", total, shape.Lines)
	}
	return float64(total) / elapsed.Seconds(), nil
}

// markdownOfCLIProduce writes the cli suite's section.
func (r *Run) markdownOfCLIProduce(w io.Writer) {
	if len(r.CLIProduce) == 0 {
		return
	}
	fmt.Fprint(w, "## The produce command beside runtime.Node.Produce\n\n| lines x bytes | partitions | batch | produce command rec/s | runtime.Node.Produce rec/s | ratio | each round's |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.CLIProduce {
		fmt.Fprintf(w, "| %d x %d | %d | %d | %.0f | %.0f | %.2f | %.2f |\n", c.Lines, c.LineBytes, c.Partitions, c.Batch, c.CLIRecordsPerS, c.NodeRecordsPerS, c.Ratio, c.Ratios)
	}
	fmt.Fprint(w, "\nThe command's time runs from its start to its exit (reading the lines from a file, through the Go client to a daemon on loopback); the Node's from its first produce to its last answer, a goroutine a partition, the same batches. The ratio is the median of the rounds' (each side first in turn).\n\n")
	fmt.Fprint(w, "## The consume command beside runtime.Node.ReadFunc\n\n| lines x bytes | partitions | consume command rec/s | runtime.Node.ReadFunc rec/s | ratio | each round's |\n|---|---|---|---|---|---|\n")
	for _, c := range r.CLIProduce {
		fmt.Fprintf(w, "| %d x %d | %d | %.0f | %.0f | %.2f | %.2f |\n", c.Lines, c.LineBytes, c.Partitions, c.CLIConsumeRecordsPerS, c.NodeReadRecordsPerS, c.ConsumeRatio, c.ConsumeRatios)
	}
	fmt.Fprint(w, "\nThe command prints every record of the topic from earliest (its default text line each) to a pipe the bench counts, process start to exit, right after its produce; the Node reads them through ReadFunc in reads of up to 1 MiB, a goroutine a partition, right after its own.\n\n")
}
