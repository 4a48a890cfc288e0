package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/narad-io/storage/client"
)

// runProduce sends stdin's lines as records through a client.Producer:
// spread over the topic's partitions, each line's key taken by
// --key-separator (or --key), or all to --partition; a failed line said
// on stderr; a summary at the end.
func runProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var o produceOptions
	fs.StringVar(&o.key, "key", "", "key of every record: they all go to its partition (none if empty)")
	fs.StringVar(&o.separator, "key-separator", "", "each line is KEY SEP VALUE, split at the first SEP (kcat's -K); a line without SEP has no key")
	fs.IntVar(&o.batchSize, "batch-size", 10000, "records a batch (one request, one durable commit) holds at most")
	fs.IntVar(&o.batchBytes, "batch-bytes", 1<<20, "bytes a batch holds at most (a larger line goes alone)")
	fs.DurationVar(&o.linger, "linger", 100*time.Millisecond, "send a batch this long after its first line even if it is not full")
	fs.IntVar(&o.inFlight, "max-in-flight", 4, "requests in flight a partition (pipelined: the partition commits them in order)")
	fs.BoolVar(&o.base64, "base64", false, "each line (key and value apart, with --key-separator) is base64 (standard, padded): for bytes a line cannot hold")
	verbose := fs.Bool("v", false, "print each partition's offsets")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged produce --topic T [--partition P] [--key-separator SEP] [flags] < lines\n\n"+
			"Sends each line of stdin (without its newline) as one record, exact bytes,\n"+
			"batched per partition: a line with a key to its key's partition (the\n"+
			"client package's KeyPartition), the others spread over every partition,\n"+
			"or all to --partition. A line that fails is said on stderr; a summary on\n"+
			"stdout. An interrupt stops reading and sends what was read; a second one\n"+
			"gives up on it. Exit status: 0 all acked, 1 a line failed (or an interrupt),\n"+
			"2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	o.pinned, o.keyBytes = -1, []byte(o.key)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "partition" {
			o.pinned = cf.partition
		}
	})
	switch {
	case o.batchSize < 1 || o.batchSize > maxBatchRecords || o.linger < 0 || o.batchBytes < 1 || o.batchBytes > maxBatchBytes || o.inFlight < 1:
		fmt.Fprintf(stderr, "produce: --batch-size must be 1 to %d, --batch-bytes 1 to %d, --linger not negative and --max-in-flight positive\n", maxBatchRecords, maxBatchBytes)
		return 2
	case o.key != "" && o.separator != "":
		fmt.Fprintln(stderr, "produce: give --key or --key-separator, not both")
		return 2
	case o.pinned < -1:
		fmt.Fprintln(stderr, "produce: --partition must not be negative")
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "produce:", err)
		return 2
	}
	// The first interrupt stops reading (what was read is sent); the
	// second ends the wait for it.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	reading, stopReading := context.WithCancel(context.Background())
	closing, giveUp := context.WithCancel(context.Background())
	defer stopReading()
	defer giveUp()
	go func() {
		for i := 0; i < 2; i++ {
			select {
			case <-signals:
			case <-closing.Done():
				return
			}
			if i == 0 {
				stopReading()
			} else {
				giveUp()
			}
		}
	}()
	rep := &produceReport{topic: cf.topic, stderr: stderr}
	return produceLines(reading, closing, c, cf.topic, o, stdin, stdout, rep, *verbose)
}

// produceOptions are the produce command's flags.
type produceOptions struct {
	key, separator        string
	keyBytes              []byte // key's
	batchSize, batchBytes int
	linger                time.Duration
	inFlight              int
	base64                bool
	pinned                int // -1: not pinned
}

// The daemon's bounds on one request (api.MaxProduceRecords and
// api.MaxProduceBytes).
const (
	maxBatchRecords = 100000
	maxBatchBytes   = 64 << 20
)

// produceBufferBytes bounds the lines the command holds: twice the
// largest line a request takes, so a line of any size the daemon takes
// is taken.
const produceBufferBytes = 2 * maxBatchBytes

// produceLines sends stdin's lines until they end or reading ends, then
// closes the producer (sending what was read) until closing ends, and
// prints the summary; it returns the exit status.
func produceLines(reading, closing context.Context, c *client.Client, topic string, o produceOptions, stdin io.Reader, stdout io.Writer, rep *produceReport, verbose bool) int {
	linger := o.linger
	if linger == 0 {
		linger = -1 // none (the producer's 0 is its default)
	}
	p, err := c.NewProducer(reading, topic, client.ProducerOptions{BatchRecords: o.batchSize, BatchBytes: o.batchBytes,
		Linger: linger, MaxInFlight: o.inFlight, BufferBytes: produceBufferBytes})
	if err != nil {
		fmt.Fprintln(rep.stderr, "produce:", err)
		return 1
	}
	if o.pinned >= p.Partitions() {
		p.Close(closing)
		fmt.Fprintf(rep.stderr, "produce: partition %d: %s has %d partitions\n", o.pinned, topic, p.Partitions())
		return 1
	}
	readCtx, cancelRead := context.WithCancel(reading)
	defer cancelRead()
	chunks, free := make(chan []byte), make(chan []byte, 4)
	readErr := make(chan error, 1)
	go func() { readErr <- readChunks(readCtx, stdin, chunks, free) }()
	line := 0
	var stop error // what ended the lines early
	for ended := false; !ended && stop == nil; {
		var chunk []byte
		select {
		case c, ok := <-chunks:
			chunk, ended = c, !ok
		case <-reading.Done(): // an interrupt: not a line more, even while stdin blocks
		}
		stop = reading.Err()
		whole := chunk
		for len(chunk) > 0 && stop == nil {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				i = len(chunk)
			}
			if stop = rep.send(reading, p, o, line+1, chunk[:i]); stop == nil || !errors.Is(stop, reading.Err()) {
				line++ // taken, or failed for itself
			}
			chunk = chunk[min(i+1, len(chunk)):]
		}
		if cap(whole) > 0 {
			select {
			case free <- whole[:0]: // the producer copied what it took
			default:
			}
		}
	}
	var readStop error
	if stop == nil {
		readStop = <-readErr // the input ended, or could not be read
	} else {
		// The reader may be blocked on stdin (a terminal) for good: it
		// is left to see its context end when its read returns.
		cancelRead()
	}
	if stop != nil && reading.Err() == nil {
		rep.failLine(line, stop) // the line the run ended at
	}
	closeErr := p.Close(closing)
	rep.summary(stdout, p.Stats(), verbose)
	status := 0
	if n := rep.failedLines(); n > 0 {
		fmt.Fprintf(rep.stderr, "produce: %d of %d lines failed\n", n, line)
		status = 1
	}
	var unsent *client.UnsentError
	switch {
	case errors.As(closeErr, &unsent):
		fmt.Fprintf(rep.stderr, "produce: interrupted again: %d lines read were not sent, %d were sent and may or may not be stored\n", unsent.Unsent, unsent.InFlight)
		status = 1
	case reading.Err() != nil:
		fmt.Fprintf(rep.stderr, "produce: interrupted: stopped reading after line %d; every line read was sent\n", line)
		status = 1
	case stop != nil:
		fmt.Fprintln(rep.stderr, "produce: stopped at line", line)
		status = 1
	case readStop != nil:
		fmt.Fprintf(rep.stderr, "produce: reading stdin after line %d: %v\n", line, readStop)
		status = 1
	}
	return status
}

// send parses one line (its number, for the report) and hands it to the
// producer. A line the producer cannot take (a key or value too large, bad
// base64) fails alone; an error that stops the run is returned.
func (rep *produceReport) send(ctx context.Context, p *client.Producer, o produceOptions, n int, line []byte) error {
	var key []byte
	value := line
	switch {
	case o.key != "":
		key = o.keyBytes
	case o.separator != "":
		if i := bytes.Index(line, []byte(o.separator)); i >= 0 {
			key, value = line[:i], line[i+len(o.separator):]
		}
	}
	if o.base64 {
		var err error
		if value, err = decodeBase64(value); err != nil {
			rep.failLine(n, fmt.Errorf("value is not base64: %w", err))
			return nil
		}
		if key != nil && o.key == "" {
			if key, err = decodeBase64(key); err != nil {
				rep.failLine(n, fmt.Errorf("key is not base64: %w", err))
				return nil
			}
		}
	}
	rec := client.Record{Key: key, Value: value}
	done := func(r client.Result) { rep.result(n, r) }
	var err error
	if o.pinned >= 0 {
		err = p.ProduceTo(ctx, o.pinned, rec, done)
	} else {
		err = p.Produce(ctx, rec, done)
	}
	if errors.Is(err, client.ErrRecordTooLarge) {
		rep.failLine(n, err)
		return nil
	}
	return err
}

// decodeBase64 decodes standard padded base64 as the server's JSON
// produce does: strict, and no line breaks (which the decoder would skip).
func decodeBase64(b []byte) ([]byte, error) {
	if bytes.ContainsAny(b, "\r\n") {
		return nil, errors.New("a line break inside")
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Strict().Decode(out, b)
	return out[:n], err
}

// chunkBytes is the size of the reads of stdin.
const chunkBytes = 1 << 20

// maxLineBytes bounds a line (a request's bound and some room).
const maxLineBytes = maxBatchBytes + 1<<20

// readChunks sends r's bytes on out in chunks of whole lines (the last
// one may lack its newline), then closes out: one send for many lines,
// each chunk a buffer from free when one came back (the producer copies
// what it takes). A line's bytes are exactly its bytes before its
// newline, a \r included (found by review: bufio.ScanLines dropped it).
func readChunks(ctx context.Context, r io.Reader, out chan<- []byte, free <-chan []byte) error {
	defer close(out)
	get := func() []byte {
		select {
		case b := <-free:
			return b[:0]
		default:
			return make([]byte, 0, chunkBytes)
		}
	}
	buf, end := get(), 0 // buf[:end] is whole lines
	for {
		if cap(buf)-len(buf) < chunkBytes/2 {
			buf = slices.Grow(buf, max(chunkBytes, len(buf))) // a long line: double, never copy it per read
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		if i := bytes.LastIndexByte(buf[len(buf):len(buf)+n], '\n'); i >= 0 {
			end = len(buf) + i + 1
		}
		buf = buf[:len(buf)+n]
		if err != nil {
			end = len(buf) // the input ended (or failed): its last line too
		}
		if len(buf)-end > maxLineBytes {
			return fmt.Errorf("a line of more than %d bytes", maxLineBytes)
		}
		if end > 0 {
			next := append(get(), buf[end:]...) // the line begun, into the next chunk
			select {
			case out <- buf[:end]:
			case <-ctx.Done():
				return ctx.Err()
			}
			buf, end = next, 0
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// produceReport gathers the results: each partition's first and last
// offset, and the lines that failed (said on stderr as they come).
type produceReport struct {
	topic  string
	stderr io.Writer

	mu     sync.Mutex
	spans  []offsetSpan // by partition
	acked  int64
	failed int64
}

// offsetSpan is the first and last offset acked in a partition.
type offsetSpan struct {
	first, last int64
	any         bool
}

func (rep *produceReport) result(line int, r client.Result) {
	if r.Err != nil {
		rep.failLine(line, r.Err)
		return
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.acked++
	for len(rep.spans) <= r.Partition {
		rep.spans = append(rep.spans, offsetSpan{})
	}
	sp := &rep.spans[r.Partition]
	if !sp.any {
		sp.first, sp.last, sp.any = r.Offset, r.Offset, true
	}
	sp.first, sp.last = min(sp.first, r.Offset), max(sp.last, r.Offset)
}

func (rep *produceReport) failLine(line int, err error) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.failed++
	fmt.Fprintf(rep.stderr, "line %d: %v\n", line, err)
}

func (rep *produceReport) failedLines() int64 {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.failed
}

// summary prints what was acked: to one partition, its offsets; to
// several, how many (and with verbose each one's offsets).
func (rep *produceReport) summary(stdout io.Writer, st client.ProducerStats, verbose bool) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	var parts []int
	for p, sp := range rep.spans {
		if sp.any {
			parts = append(parts, p)
		}
	}
	switch len(parts) {
	case 0:
		fmt.Fprintf(stdout, "produced 0 records to %s\n", rep.topic)
	case 1:
		sp := rep.spans[parts[0]]
		fmt.Fprintf(stdout, "produced %d records to %s/%d in %d requests, offsets %d..%d\n", rep.acked, rep.topic, parts[0], st.Committed, sp.first, sp.last)
	default:
		fmt.Fprintf(stdout, "produced %d records to %s in %d requests, over %d partitions\n", rep.acked, rep.topic, st.Committed, len(parts))
		if verbose {
			for _, p := range parts {
				fmt.Fprintf(stdout, "%s/%d: offsets %d..%d\n", rep.topic, p, rep.spans[p].first, rep.spans[p].last)
			}
		}
	}
}
