package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/narad-io/storage/client"
)

// runProduce sends stdin's lines as records, in batches: one request (so
// one durable commit) per --batch-size lines, or per --linger after a
// batch's first line, whichever comes first; a summary at the end.
func runProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	key := fs.String("key", "", "key of every record (none if empty)")
	batchSize := fs.Int("batch-size", 1000, "lines per request (one durable commit each)")
	linger := fs.Duration("linger", 100*time.Millisecond, "send a batch this long after its first line even if it is not full")
	b64 := fs.Bool("base64", false, "each line is a value in base64 (standard, padded): for bytes a line cannot hold")
	verbose := fs.Bool("v", false, "print each batch's offsets")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged produce --topic T [--partition P] [flags] < lines\n\n"+
			"Sends each line of stdin (without its newline) as one record, exact bytes,\n"+
			"batched; prints a summary. Exit status: 0 all acked, 1 a batch failed, 2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	if *batchSize < 1 || *batchSize > maxBatchRecords || *linger <= 0 {
		fmt.Fprintf(stderr, "produce: --batch-size must be 1 to %d and --linger positive\n", maxBatchRecords)
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "produce:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p := producer{c: c, topic: cf.topic, partition: cf.partition, stdout: stdout, verbose: *verbose}
	if *key != "" {
		p.key = []byte(*key)
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- readLines(ctx, stdin, lines, *b64) }()
	err = p.run(ctx, lines, *batchSize, *linger)
	if err == nil {
		err = <-readErr
	}
	p.summary()
	if p.unsent > 0 {
		fmt.Fprintf(stdout, "interrupted: %d lines read were not sent\n", p.unsent)
	}
	if err != nil {
		fmt.Fprintln(stderr, "produce:", err)
		return 1
	}
	return 0
}

// readLines sends each line of r (decoded from base64 with b64) on out,
// then closes it.
func readLines(ctx context.Context, r io.Reader, out chan<- []byte, b64 bool) error {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	sc.Split(splitLines)
	for n := 1; sc.Scan(); n++ {
		line := append([]byte(nil), sc.Bytes()...)
		if b64 {
			v, err := base64.StdEncoding.DecodeString(string(line))
			if err != nil {
				return fmt.Errorf("line %d is not base64: %w", n, err)
			}
			line = v
		}
		select {
		case out <- line:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return sc.Err()
}

// splitLines splits at each newline and keeps every other byte (a \r
// included, which bufio.ScanLines would drop): a line's value is exactly
// its bytes.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// maxBatchRecords is the daemon's bound on the records of one request.
const maxBatchRecords = 100000

type producer struct {
	c         *client.Client
	topic     string
	partition int
	key       []byte
	stdout    io.Writer
	verbose   bool

	records, batches int64
	first, last      int64
	unsent           int // lines read but not sent when interrupted
}

// run batches lines and sends each batch, until lines closes or a send
// fails.
func (p *producer) run(ctx context.Context, lines <-chan []byte, batchSize int, linger time.Duration) error {
	var batch []client.Record
	bytes := 0
	timer := time.NewTimer(linger)
	timer.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return p.send(ctx, batch)
			}
			size := len(p.key) + len(line)
			if len(batch) > 0 && bytes+size > maxBatchSendBytes {
				// The line would take the request past the cap: what is
				// batched goes first.
				if err := p.send(ctx, batch); err != nil {
					return err
				}
				batch, bytes = batch[:0], 0
			}
			if len(batch) == 0 {
				timer.Reset(linger)
			}
			batch = append(batch, client.Record{Key: p.key, Value: line})
			bytes += size
			if len(batch) < batchSize && bytes < maxBatchSendBytes {
				continue
			}
		case <-timer.C:
		case <-ctx.Done():
			p.unsent = len(batch)
			return ctx.Err()
		}
		timer.Stop()
		if err := p.send(ctx, batch); err != nil {
			return err
		}
		batch, bytes = batch[:0], 0
	}
}

// maxBatchSendBytes sends a batch early once its records hold this many
// bytes, well under the daemon's 64 MiB bound of one request.
const maxBatchSendBytes = 16 << 20

// send sends one batch. An interrupt does not cancel a batch on its way:
// the daemon may commit it anyway, and the summary must say what was
// acked, so it is waited for.
func (p *producer) send(ctx context.Context, batch []client.Record) error {
	if len(batch) == 0 {
		return nil
	}
	res, err := p.c.Produce(context.WithoutCancel(ctx), p.topic, p.partition, batch)
	if err != nil {
		return fmt.Errorf("after %d records acked: %w", p.records, err)
	}
	if p.batches == 0 {
		p.first = res.BaseOffset
	}
	p.batches++
	p.records += res.Count
	p.last = res.BaseOffset + res.Count - 1
	if p.verbose {
		fmt.Fprintf(p.stdout, "offsets %d..%d\n", res.BaseOffset, p.last)
	}
	return nil
}

func (p *producer) summary() {
	if p.records == 0 {
		fmt.Fprintf(p.stdout, "produced 0 records to %s/%d\n", p.topic, p.partition)
		return
	}
	fmt.Fprintf(p.stdout, "produced %d records to %s/%d in %d requests, offsets %d..%d\n",
		p.records, p.topic, p.partition, p.batches, p.first, p.last)
}
